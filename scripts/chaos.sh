#!/usr/bin/env bash
# The long fault-injection run (e2e TestChaos): CHAOS_CYCLES (default 1000) kill -9 cycles of
# the hub and its peers under write load, then flapping links for CHAOS_FLAP (default 10m).
# Progress lines go to the terminal, the whole output to CHAOS_LOG (default a temporary
# file), and a summary (cycles, acknowledged writes, lost) at the end. CHAOS_CYCLES=0 or
# CHAOS_FLAP=0 skips a part. The exit status is the test's.
set -euo pipefail
cd "$(dirname "$0")/.."
cycles=${CHAOS_CYCLES:-1000}
flap=${CHAOS_FLAP:-10m}
log=${CHAOS_LOG:-$(mktemp -t nomicore-chaos-XXXXXX.log)}
keep=${CHAOS_KEEP_LOGS:-${log%.log}-processes}
summary=$(mktemp -t nomicore-chaos-summary-XXXXXX)
trap 'rm -f "$summary"' EXIT
echo "chaos: $cycles kill -9 cycles, then flapping links for $flap"
echo "chaos: the whole output goes to $log; the logs of the processes of a failed part to $keep"
set +e
NOMICORE_CHAOS=1 NOMICORE_CHAOS_CYCLES=$cycles NOMICORE_CHAOS_FLAP=$flap NOMICORE_CHAOS_SUMMARY=$summary \
  NOMICORE_E2E_LOGS=$keep \
  go test -count=1 -timeout "${CHAOS_TIMEOUT:-300m}" -run '^TestChaos$' -v ./e2e/ 2>&1 | tee "$log" |
  grep --line-buffered -E 'acknowledged keys on every node|^\s*--- (PASS|FAIL)|^(ok|FAIL)\s|panic:|chaos_test.go:[0-9]+: '
codes=("${PIPESTATUS[@]}")
set -e
status=${codes[0]}
echo
if [ -s "$summary" ]; then
  cat "$summary"
else
  echo "chaos: no summary was written (the run did not get that far); see $log"
  [ "$status" = 0 ] && status=1
fi
exit "$status"
