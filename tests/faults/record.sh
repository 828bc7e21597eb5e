#!/usr/bin/env bash
# Run molecule/faults step by step and go on past failures, so that every
# window's outcome is recorded even where today's roles fail (a failing
# converge stops `molecule test` before verify). Keeps every log, the
# interrupted runs' logs, the node checks and the tables in OUT, and the time
# of each step in OUT/steps.txt; exits 1 when a step failed.
#   tests/faults/record.sh [OUT]        (default .cache/faults-record/<date>)
# FAULTS_SCENARIO picks another scenario with the same playbooks.
set -uo pipefail
cd "$(dirname "$0")/../.."
scenario=${FAULTS_SCENARIO:-faults}
out=${1:-.cache/faults-record/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/files"
out=$(cd "$out" && pwd)
[[ -d .venv/bin ]] && export PATH=$PWD/.venv/bin:$PATH
command -v molecule >/dev/null || { echo "record.sh: molecule not found (run make bootstrap)" >&2; exit 2; }
export GPUNODE_FAULTS_OUT=$out/files PY_COLORS=0 ANSIBLE_FORCE_COLOR=0 NO_COLOR=1
# `molecule create` also runs prepare (the interruptions); log lines carry the time
steps=(destroy create side-effect converge verify idempotence side-effect verify destroy)
failed=0
: >"$out/steps.txt"
for i in "${!steps[@]}"; do
  step=${steps[$i]}
  log=$(printf '%s/%02d-%s.log' "$out" "$i" "$step")
  start=$SECONDS
  molecule "$step" -s "$scenario" 2>&1 | while IFS= read -r text; do printf '%(%T)T %s\n' -1 "$text"; done >"$log"
  rc=${PIPESTATUS[0]}
  line="$(printf '%-12s rc=%-3s %5d s' "$step" "$rc" $((SECONDS - start)))"
  echo "$line" | tee -a "$out/steps.txt"
  ((rc == 0)) || failed=1
  if [[ $step == create ]] && ((rc != 0)); then
    # the nodes or the interruptions are broken: a later step would run prepare again
    echo "record: create/prepare failed, see $log" >&2
    molecule destroy -s "$scenario" >"$out/destroy-after-failure.log" 2>&1
    break
  fi
done
echo "record: $out (steps.txt, files/interrupted.txt, files/verify-*.txt)"
exit "$failed"
