#!/usr/bin/env bash
# One call on the GPU machine (its time is scarce): the cheat suite on the three GPU packages,
# a noop per task (the new gates must not fire on the honest baseline), then more oracle
# gradings for the spread of the speedup, until the deadline. Everything lands in $OUT:
#   cheats/cheats.json, spread/*.json (verdicts), gradings.tgz (verdict.json,
#   benchmark_results.json and reward.json of every grading), timing_spread.txt.
# Run from the repository root, as root:  OUT=/tmp/h200 BUDGET_S=540 [PLAN=cheats|spread] bash benchmarks/gpu/h200_batch.sh
set -u
OUT="${OUT:?set OUT}"
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-540} ))
export PYTHONUNBUFFERED=1
SET=(--set evaluator.local.install_steps=skip)
SSM=kfc/ssm-selective-scan-firstorder FLASH=kfc/flash-online-softmax-prefill SGEMM=kfc/sgemm-register-blocktiling
mkdir -p "$OUT/spread"
left() { echo $(( DEADLINE - $(date +%s) )); }
cheats() {  # TASK CHEAT...
  local task="$1"; shift
  [ "$(left)" -gt 30 ] || return 0
  timeout "$(left)" python3 benchmarks/gpu/gpu_cheats.py --out "$OUT/cheats-${task##*/}" --task "$task" \
    $(printf -- '--cheat %s ' "$@") > "$OUT/cheats-${task##*/}.txt" 2>&1
  echo "$task cheats rc=$?: $(tail -n 3 "$OUT/cheats-${task##*/}.txt" | tr '\n' ' ')"
}
grade() {  # TASK MODE N
  local i
  for i in $(seq 1 "$3"); do
    [ "$(left)" -gt 45 ] || return 0
    timeout "$(left)" python3 -m agent.cli evaluate "$1" --mode "$2" --grader hidden --json "${SET[@]}" \
      > "$OUT/spread/${1##*/}.$2.$i.json" 2>> "$OUT/spread/errors.txt"
    echo "$1 $2 #$i rc=$?: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['status'], d['speedup'], d['hard_fail_reasons'][:3], d['seconds'])" "$OUT/spread/${1##*/}.$2.$i.json" 2>&1 | tail -c 200)"
  done
}
nvidia-smi -L > "$OUT/machine.txt" 2>&1
if [ "${PLAN:-cheats}" = cheats ]; then
  cheats "$SSM" side_stream side_stream_partial sampled_checks event_patched sync_patched timer_code_swapped \
    output_cached inputs_mutated baseline_called baseline_hidden
  cheats "$SGEMM" side_stream output_cached inputs_mutated
  cheats "$FLASH" side_stream side_stream_partial sampled_checks timer_code_swapped
  grade "$SSM" noop 1; grade "$SGEMM" noop 1; grade "$FLASH" noop 1
  grade "$SGEMM" oracle 2; grade "$SSM" oracle 2; grade "$FLASH" oracle 2
else  # PLAN=spread: the timing cheats against a fresh oracle control, then more oracle gradings
  cheats "$SSM" side_stream side_stream_partial
  cheats "$FLASH" side_stream side_stream_partial
  grade "$SSM" oracle 3; grade "$FLASH" oracle 3; grade "$SGEMM" oracle 2
fi
tar czf "$OUT/gradings.tgz" $(find "$OUT" traces/evaluate \( -name verdict.json -o -name benchmark_results.json \
  -o -name reward.json \) 2>/dev/null) 2>/dev/null
python3 benchmarks/gpu/timing_spread.py "$OUT" traces/evaluate --json "$OUT/timing_spread.json" > "$OUT/timing_spread.txt" 2>&1
cat "$OUT/timing_spread.txt" | tail -n 60
