#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME (default 10s) each: a bounded smoke run.
# FUZZ_MATCH (an extended regular expression) keeps only the targets whose "PACKAGE TARGET"
# matches it — e.g. FUZZ_MATCH='^\./yjs ' — so that a long run can be taken in parts. A
# summary of the targets run, their time and their outcome ends the output.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
match=${FUZZ_MATCH:-}
status=0
summary=()
# Targets that also run in a second build with these tags: the yjs targets that build
# documents, with chunks of 4 structs in the struct lists, so that small inputs already split
# and cross chunks.
declare -A extra_tags=(
  ["./yjs FuzzApplyUpdate"]=yjs_smallchunks
  ["./yjs FuzzMergeUpdates"]=yjs_smallchunks
  ["./yjs FuzzStructList"]=yjs_smallchunks
)
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    if [ -n "$match" ] && ! grep -qE -- "$match" <<<"$pkg $target"; then
      continue
    fi
    for tags in "" ${extra_tags["$pkg $target"]:-}; do
      echo "== $pkg $target${tags:+ (-tags $tags)} ($fuzztime)"
      for attempt in 1 2; do
        log=$(mktemp)
        if go test ${tags:+-tags "$tags"} -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" 2>&1 | tee "$log"; then
          execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
          summary+=("ok    $pkg $target${tags:+ (-tags $tags)}: $fuzztime, ${execs:-?} executions")
          rm -f "$log"
          break
        fi
        # The fuzzing engine itself sometimes gives up on a busy machine ("context deadline
        # exceeded", no failing input): run the target once more. A real failure writes its
        # input under testdata/fuzz and fails both times.
        if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
          echo "== $pkg $target: the fuzzing engine timed out without a failing input; once more"
          rm -f "$log"
          continue
        fi
        summary+=("FAIL  $pkg $target${tags:+ (-tags $tags)}: $(grep -m1 -oE 'Failing input written to .*' "$log" || echo 'see its output above')")
        rm -f "$log"
        status=1
        break
      done
    done
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' 2>/dev/null || true)
echo "== summary: ${#summary[@]} fuzz runs of $fuzztime each${match:+ (FUZZ_MATCH=$match)}"
for line in "${summary[@]}"; do echo "$line"; done
exit $status
