#!/usr/bin/env bash
# The relay benchmark (../shared/bench/relay) against this project's hub, beside Hocuspocus
# and the y-websocket server, in one run. The harness folder is read-only: it is copied to a
# temporary directory, the adapters in scripts/relay/adapters/*.mjs are overlaid (each registers
# itself in lib/adapters.mjs), npm ci installs the harness's pinned packages, the hub is
# built, and every (scenario, server) pair runs once, interleaved. One JSON line per run goes
# to $OUT_DIR/runs.jsonl; the summary prints each scenario's ratios against Hocuspocus.
#
#   scripts/relay/run.sh                          # fanout and multidoc, one run each
#   SCENARIOS=fanout REPEATS=3 scripts/relay/run.sh
#   SERVERS="nomicore-yws hocuspocus" scripts/relay/run.sh
#
# Env: HARNESS (default ../shared/bench/relay beside the checkout, or ../../shared for a worktree), SERVERS (default "nomicore-yws nomicore-hocuspocus nomicore-hocuspocus-mux hocuspocus hocuspocus-mux
# y-websocket"; also "nomicore", the NMCR adapter), SCENARIOS (default "fanout multidoc"),
# REPEATS (1), BENCH_ARGS (extra bench.mjs arguments), OUT_DIR (default a temp dir),
# QUIET_MAX / QUIET_WAIT_S (before each run, wait up to QUIET_WAIT_S seconds until other
# processes use fewer than QUIET_MAX cores; default 0.15 and 60),
# KEEP (1: keep the temporary copy).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
harness=${HARNESS:-}
if [ -z "$harness" ]; then
  for h in "$root/../shared/bench/relay" "$root/../../shared/bench/relay"; do
    if [ -f "$h/bench.mjs" ]; then harness=$h; break; fi
  done
fi
SERVERS=${SERVERS:-"nomicore-yws nomicore-hocuspocus nomicore-hocuspocus-mux hocuspocus hocuspocus-mux y-websocket"}
SCENARIOS=${SCENARIOS:-"fanout multidoc"}
REPEATS=${REPEATS:-1}
BENCH_ARGS=${BENCH_ARGS:-}
QUIET_MAX=${QUIET_MAX:-0.15}
QUIET_WAIT_S=${QUIET_WAIT_S:-60}
[ -n "$harness" ] && [ -f "$harness/bench.mjs" ] || { echo "relay: no harness at $harness (set HARNESS)" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/nomicore-relay.XXXXXX")
cleanup() { if [ "${KEEP:-0}" != 1 ]; then rm -rf "$work"; else echo "relay: kept $work" >&2; fi; }
trap cleanup EXIT
OUT_DIR=${OUT_DIR:-${TMPDIR:-/tmp}/nomicore-relay-results-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT_DIR"

cp -r "$harness" "$work/relay"
chmod -R u+w "$work/relay"
rm -rf "$work/relay/node_modules" "$work/relay/results"
for adapter in "$root"/scripts/relay/adapters/*.mjs; do
  name=$(basename "$adapter" .mjs)
  cp "$adapter" "$work/relay/lib/"
  export_name=$(sed -n 's/^export const \([A-Za-z0-9_]*\) = () => {$/\1/p' "$adapter" | head -1)
  printf "import { %s } from './%s.mjs'\nSERVERS['%s'] = %s()\n" "$export_name" "$name" "$name" "$export_name" >> "$work/relay/lib/adapters.mjs"
done
(cd "$work/relay" && npm ci --no-audit --no-fund --loglevel=error)
(cd "$root" && go build -o "$work/bin/" ./cmd/hub)
export HUB_BIN=$work/bin/hub

for rep in $(seq "$REPEATS"); do
  for scenario in $SCENARIOS; do
    for server in $SERVERS; do
      extra=()
      if [ "$server" = nomicore ]; then extra=(--hub-bin "$HUB_BIN"); fi
      # Wait (bounded) until other processes leave the CPUs alone: only ratios measured in
      # quiet, side by side, hold on a shared machine. Each line records the foreign load.
      (cd "$work/relay" && node lib/quiet.mjs "$QUIET_MAX" "$QUIET_WAIT_S" 2>>"$work/quiet.log") || true
      echo "relay: run $rep: $server $scenario" >&2
      # shellcheck disable=SC2086
      if ! (cd "$work/relay" && timeout 600 node bench.mjs --server "$server" --scenario "$scenario" "${extra[@]}" $BENCH_ARGS) \
           > "$work/line.json" 2> "$work/run.log"; then
        echo "relay: $server $scenario failed:" >&2; tail -n 5 "$work/run.log" >&2
      fi
      tail -n 1 "$work/line.json" >> "$OUT_DIR/runs.jsonl" || true
    done
  done
done
node "$root/scripts/relay/summary.mjs" "$OUT_DIR/runs.jsonl"
echo "relay: raw results in $OUT_DIR/runs.jsonl" >&2
