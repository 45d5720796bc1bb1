#!/usr/bin/env bash
# One call on the GPU machine: the allowlisted, read-only sandbox root grading CUDA (the bundled
# selective scan's noop and oracle), then `pesflow tasks check` over the benchmark's GPU
# packages, in SHARDS parallel shards (preparing is CPU work; gradings share the one GPU, so
# speedups are looser than a lone grading's), until the deadline. Carried in: .whl/ (pesflow's
# pydantic, for the machine's python) and .bench/gpu-packages.tgz (the GPU packages of a
# benchmark checkout, with its .git, so that they read as official). Everything lands in $OUT.
#   OUT=/tmp/h200 BUDGET_S=540 SHARDS=3 [NAMES=file] bash benchmarks/gpu/h200_check.sh
set -u
OUT="${OUT:?set OUT}"
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-540} ))
left() { echo $(( DEADLINE - $(date +%s) )); }
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.txt" 2>&1 || { echo "wheels did not install"; tail -n 5 "$OUT/pip.txt"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
mkdir -p /tmp/bench && tar xzf .bench/gpu-packages.tgz -C /tmp/bench
nvidia-smi -L > "$OUT/machine.txt" 2>&1
python3 -c 'import sys, torch; print(sys.executable, torch.__version__, torch.cuda.get_device_name(0))' >> "$OUT/machine.txt" 2>&1
SET=(--set evaluator.local.install_steps=skip)
for mode in noop oracle; do
  timeout "$(left)" python3 -m agent.cli evaluate kfc/ssm-selective-scan-firstorder --mode "$mode" --grader hidden --json \
    "${SET[@]}" > "$OUT/root-ssm-$mode.json" 2> "$OUT/root-ssm-$mode.err"
  echo "bundled ssm $mode rc=$?: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['status'], d['speedup'], d['hard_fail_reasons'][:3], d['environment']['kind'], d['seconds'])" "$OUT/root-ssm-$mode.json" 2>&1 | tail -c 300)"
done
# the GPU packages, kfc first (single-file kernels), then lh, then e2e (or those NAMES lists)
if [ -n "${NAMES:-}" ]; then
  mapfile -t names < "$NAMES"
else
  mapfile -t names < <(cd /tmp/bench/tasks && ls -d kfc/* lh/* e2e/* | while read -r d; do
    t="$d/task/task.toml"; [ -f "$t" ] || t="$d/task.toml"; grep -qE '^\s*gpus\s*=\s*[1-9]' "$t" && echo "$d"; done)
fi
echo "${#names[@]} GPU packages"
n=${SHARDS:-3}
for i in $(seq 0 $((n - 1))); do
  shard=()
  for j in "${!names[@]}"; do [ $((j % n)) = "$i" ] && shard+=("${names[$j]}"); done
  timeout "$(( $(left) - 20 ))" python3 -m agent.cli tasks check "${shard[@]}" --tasks-root /tmp/bench/tasks "${SET[@]}" \
    --set "evaluator.local.cache_dir=/tmp/cache-$i" --out "$OUT/check-$i" > "$OUT/check-$i.txt" 2>&1 &
done
wait
cat "$OUT"/check-*/results.jsonl > "$OUT/results.jsonl" 2>/dev/null
python3 - "$OUT/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in rows:
    print(f"{r['task']:55s} {r['klass']:20s} {r['evidence'][:150]}")
print(len(rows), "checked")
PY
