#!/usr/bin/env bash
# make bench-relay: the relay benchmark of ../shared/bench/relay — fan-out and multidoc —
# against the hub built from this tree, Hocuspocus and the y-websocket server, in one run,
# then the ratios of the hub's figures to theirs. Not part of `make test`.
#
# The harness is read-only (and CI's copy of shared/ has no write bits): it is copied to a
# temporary folder, the files of each overlay folder are copied over it (adapters of other
# servers, e.g. RELAY_OVERLAY=scripts/relay/overlay; see the harness's lib/adapters.mjs),
# `npm ci` installs its pinned packages there, and its run.sh runs the matrix.
#
# Environment (the harness's run.sh documents the rest):
#   RELAY_HARNESS  the harness folder                 default ../shared/bench/relay (or ../../shared)
#   RELAY_OVERLAY  folders copied over the copy       default scripts/relay/overlay if present
#   SERVERS        servers of the matrix              default "nomicore nomicore-hocuspocus
#                  nomicore-hocuspocus-mux hocuspocus hocuspocus-mux y-websocket"
#                  (the adapters of scripts/relay/adapters: nomicore-yws, the hub's y-websocket
#                  endpoint; nomicore-hocuspocus, its Hocuspocus endpoint, against
#                  @hocuspocus/server; the -mux ones with many documents over one socket)
#   SCENARIOS      default "fanout multidoc"
#   REPEATS        runs per server and scenario       default 1
#   SERVER_NODES   node for the Node servers: "system" and/or "22"   default system
#   QUIET_MAX      a run during which other processes used more cores than this is retried
#                  (at most 3 attempts) and reported as noisy    default 0.1
#   QUIET_WAIT_S   how long to wait for quiet before each run     default 60
#   MAX_TOTAL_S    after this, stop waiting for quiet and retrying default 1500
#   KEEP=1         keep the temporary folder (its path is printed)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
harness=${RELAY_HARNESS:-}
if [ -z "$harness" ]; then
  # ../shared beside the checkout, or ../../shared for a worktree one level down
  for h in "$root/../shared/bench/relay" "$root/../../shared/bench/relay"; do
    if [ -f "$h/bench.mjs" ]; then harness=$h; break; fi
  done
fi
if [ ! -f "$harness/bench.mjs" ]; then
  echo "bench-relay: no relay harness at $harness (set RELAY_HARNESS)" >&2
  exit 2
fi
for tool in node npm go; do
  command -v "$tool" >/dev/null || { echo "bench-relay: $tool is needed" >&2; exit 2; }
done
overlays=${RELAY_OVERLAY-}
if [ -z "${RELAY_OVERLAY+x}" ] && [ -d "$root/scripts/relay/overlay" ]; then overlays="$root/scripts/relay/overlay"; fi

# The harness's nomicore adapter starts `hub serve` with its own listeners only: the hub's
# editor listener (default 127.0.0.1:8789) is not part of the NMCR workloads, and a hub
# already running on this machine must not make it fail to start.
export NOMICORE_CLIENT_LISTEN=${NOMICORE_CLIENT_LISTEN:-off}

work=$(mktemp -d "${TMPDIR:-/tmp}/nomicore-bench-relay-XXXXXX")
if [ "${KEEP:-}" != 1 ]; then trap 'rm -rf "$work"' EXIT; fi
echo "bench-relay: working in $work"
cp -R "$harness" "$work/harness"
chmod -R u+w "$work/harness"
rm -rf "$work/harness/node_modules" "$work/harness/results"
for o in $overlays; do
  case "$o" in /*) ;; *) o="$root/$o" ;; esac
  [ -d "$o" ] || { echo "bench-relay: overlay $o is not a folder" >&2; exit 2; }
  echo "bench-relay: overlay $o"
  cp -R "$o/." "$work/harness/"
done

# The project's own adapters (scripts/relay/adapters/*.mjs, e.g. nomicore-yws: the hub's
# y-websocket endpoint) join the harness's server list, so SERVERS may name them.
for adapter in "$root"/scripts/relay/adapters/*.mjs; do
  [ -f "$adapter" ] || continue
  name=$(basename "$adapter" .mjs)
  cp "$adapter" "$work/harness/lib/"
  export_name=$(sed -n 's/^export const \([A-Za-z0-9_]*\) = () => {$/\1/p' "$adapter" | head -1)
  printf "import { %s } from './%s.mjs'\nSERVERS['%s'] = %s()\n" "$export_name" "$name" "$name" "$export_name" >> "$work/harness/lib/adapters.mjs"
done

echo "bench-relay: building the hub"
(cd "$root" && go build -o "$work/bin/" ./cmd/hub)
(cd "$work/harness" && npm ci --no-audit --no-fund --loglevel=error)

# The hub's descriptor limit: each connection is a socket.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

export HUB_BIN="$work/bin/hub"
export SERVERS=${SERVERS:-"nomicore nomicore-hocuspocus nomicore-hocuspocus-mux hocuspocus hocuspocus-mux y-websocket"}
export SCENARIOS=${SCENARIOS:-"fanout multidoc"}
export REPEATS=${REPEATS:-1}
export SERVER_NODES=${SERVER_NODES:-system}
export QUIET_MAX=${QUIET_MAX:-0.1}
export QUIET_WAIT_S=${QUIET_WAIT_S:-60}
export MAX_TOTAL_S=${MAX_TOTAL_S:-1500}
export OUT_DIR="$work/results"
(cd "$work/harness" && bash run.sh)
node "$root/scripts/benchrelay/ratios.mjs" "$work/results/runs.jsonl"
if [ "${KEEP:-}" = 1 ]; then echo "bench-relay: results in $work/results"; fi
