#!/usr/bin/env bash
# Grade the bundled GPU packages on this machine's GPU through pesflow, as a user would:
#   pesflow calibrate TASK --repeats 5   (the oracle 5 times; median -> the anchor, spread reported)
#   pesflow evaluate TASK --mode noop|negative --grader hidden
# Run from the repository root, as root, on a machine with an NVIDIA GPU:
#   bash benchmarks/gpu/grade_gpu_tasks.sh kfc/ssm-selective-scan-firstorder ...
# Results (JSON verdicts, the calibration, the anchors written, the grader logs) go to $OUT.
set -u
OUT="${OUT:-/tmp/pesflow-gpu-results}"
WORK="${WORK:-/tmp/pesflow-gpu-work}"  # everything, archived into $OUT/results.tgz after each task
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1
# The GPU machine has no network: Dockerfile install steps are skipped, the host's torch stands in.
SET=(--set evaluator.local.install_steps=skip)
nvidia-smi -L > "$WORK/nvidia-smi.txt" 2>&1
python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0))" >> "$WORK/nvidia-smi.txt" 2>&1
archive() {
  tar czf "$OUT/results.tgz" -C "$WORK" . -C "$PWD" tasks/kfc/*/task/tests/ref_speedup.txt tasks/kfc/*/task/tests/ref_speedup.caveat.md \
    tasks/kfc/*/task/task.toml tasks/kfc/*/task/environment/verifier-correctness-manifest.json \
    $(find traces/evaluate \( -name verdict.json -o -name benchmark_results.json -o -name reward.json -o -name grader_output.log \) 2>/dev/null) 2>/dev/null
}
for task in "$@"; do
  name="${task//\//__}"
  start=$(date +%s)
  python3 -m agent.cli calibrate "$task" --repeats 5 --json "${SET[@]}" > "$WORK/$name.calibrate.json" 2> "$WORK/$name.calibrate.err"
  echo "$task calibrate rc=$? $(( $(date +%s) - start ))s: $(head -c 600 "$WORK/$name.calibrate.json") $(tail -c 400 "$WORK/$name.calibrate.err")"
  for mode in noop negative; do
    python3 -m agent.cli evaluate "$task" --mode "$mode" --grader hidden --json "${SET[@]}" > "$WORK/$name.$mode.json" 2> "$WORK/$name.$mode.err"
    echo "$task $mode rc=$?: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['status'], d['speedup'], d['hard_fail_reasons'], d['seconds'])" "$WORK/$name.$mode.json" 2>&1 | tail -c 300)"
  done
  archive
done
ls -la "$OUT"
