#!/usr/bin/env bash
# Run `molecule test` for each scenario given, side by side (scripts/run-tests.py:
# TEST_JOBS at a time, each after the images it uses are built), report each
# one's time and actions, and fail at the end if any failed (so one failure does
# not hide the others). Usage: scripts/run-molecule.sh SCENARIO...
set -euo pipefail
cd "$(dirname "$0")/.."
(($# > 0)) || { echo "usage: $0 SCENARIO..." >&2; exit 2; }
exec python3 scripts/run-tests.py "${@/#/molecule:}"
