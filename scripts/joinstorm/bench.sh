#!/usr/bin/env bash
# make bench-joinstorm: the join storm of joinstorm.mjs (its header says what is measured)
# against a hub and a peer built from this tree, Hocuspocus and the y-websocket server, in
# one run. Not part of `make test`: it takes a few minutes and several GiB for the editors.
#
# Environment: CLIENTS (150), SPREAD_MS (1000), MIB (20), WORKERS (3 editor processes),
# SERVERS ("hub,peer,hocuspocus,y-websocket"), TIMEOUT_S (600 per server).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/scripts/joinstorm"
for tool in node npm go; do
  command -v "$tool" >/dev/null || { echo "bench-joinstorm: $tool is needed" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/nomicore-bench-joinstorm-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "bench-joinstorm: building the hub and the peer" >&2
(cd "$root" && go build -o "$work/bin/" ./cmd/hub ./cmd/peer)
if [ ! -f "$here/node_modules/.package-lock.json" ] || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
# Each editor is a socket of the editors' processes and of the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
node "$here/joinstorm.mjs" --hub-bin "$work/bin/hub" --peer-bin "$work/bin/peer"
