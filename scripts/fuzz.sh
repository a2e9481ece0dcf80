#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME (default 10s) each: a bounded smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
status=0
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    echo "== $pkg $target ($fuzztime)"
    if ! go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"; then
      status=1
    fi
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' 2>/dev/null || true)
exit $status
