#!/usr/bin/env bash
# Run `molecule test` for each scenario given, report each one's time, and
# fail at the end if any failed (so one failure does not hide the others).
set -uo pipefail
cd "$(dirname "$0")/.."
failed=()
summary=()
for scenario in "$@"; do
  start=$SECONDS
  echo "=== molecule test -s $scenario"
  if molecule test -s "$scenario"; then
    summary+=("$scenario: passed in $((SECONDS - start)) s")
  else
    summary+=("$scenario: FAILED after $((SECONDS - start)) s")
    failed+=("$scenario")
  fi
done
printf '%s\n' "=== molecule summary" "${summary[@]}"
echo "molecule: $(($# - ${#failed[@]})) passed, ${#failed[@]} failed"
((${#failed[@]} == 0))
