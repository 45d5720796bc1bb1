#!/usr/bin/env bash
# One call on the GPU machine for the trust screen: the GPU cheats of benchmarks/gpu/trust_gpu.py
# on the benchmark's own packages (JOB=cheats), `pesflow tasks check` with the screen on over
# the GPU packages NAMES lists (JOB=check; SHARDS=1 measures each row alone on the GPU), both, or
# the screen's cost on one GPU package (JOB=overhead, TASK=...; SETTINGS=off,warm,cold: the screen
# off, on with the warm probe, on with the probe started cold), or one grading with the screen on
# (JOB=evaluate, TASK=..., MODE=oracle), until the deadline. Carried in:
# .whl/ (pydantic for the machine's python) and .bench/faibench-git.tgz (the benchmark checkout's
# .git at the pinned commit, its origin the official URL: checked out there, the packages read as official).
#   OUT=... JOB=cheats|check|both|overhead|evaluate BUDGET_S=540 [SHARDS=3] [NAMES=file] [TASK=bench/dir] bash benchmarks/gpu/trust_gpu.sh
# What is left is listed beside the last results: results-h200/2026-12-02-trust/next-unchecked.txt
# (packages not checked yet: NAMES=) and results-h200/2026-12-03-trust-c/next-alone.txt (rows to
# grade alone, one package at a time: SHARDS=1).
# A row that needs more than one call: unpack each call's rest.tgz (or put its gradings.jsonl) into
# .bench/resume/check-N/ before the next. Keep BUDGET_S under the call's limit_s (status: budget_left_s).
set -u
OUT="${OUT:?set OUT}"
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-540} ))
left() { echo $(( DEADLINE - $(date +%s) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.txt" 2>&1 || { echo "wheels did not install"; tail -n 5 "$OUT/pip.txt"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
mkdir -p /tmp/bench && tar xzf .bench/faibench-git.tgz -C /tmp/bench && git -C /tmp/bench reset -q --hard HEAD 2> "$OUT/checkout.txt"; ls /tmp/bench/tasks/kfc | wc -l >> "$OUT/checkout.txt"
nvidia-smi -L > "$OUT/machine.txt" 2>&1
SET=(--set evaluator.local.install_steps=skip)
rm -rf /tmp/check-*  # a machine still warm from an earlier call keeps its folders: never merged into this call's rows
if [ "${JOB:-cheats}" = overhead ]; then  # screen on and off ABAB, alone on the GPU
  timeout "$(( $(left) - 10 ))" python3 benchmarks/trust_overhead.py --task "${TASK:?set TASK}" --tasks-root /tmp/bench/tasks \
    --install-steps skip --repeats "${REPEATS:-4}" --settings "${SETTINGS:-off,warm,cold}" --cache-dir /tmp/cache-o \
    > "$OUT/overhead.txt" 2>&1
  grep -v '^pesflow: ' "$OUT/overhead.txt"; exit 0
fi
if [ "${JOB:-cheats}" = evaluate ]; then  # one grading of TASK in MODE (oracle) with the screen on, its verdict whole
  timeout "$(( $(left) - 10 ))" python3 -m agent.cli evaluate "${TASK:?set TASK}" --mode "${MODE:-oracle}" --grader hidden \
    --tasks-root /tmp/bench/tasks "${SET[@]}" --set evaluator.local.cache_dir=/tmp/cache-e --json > "$OUT/evaluate.json" 2> "$OUT/evaluate.err"
  python3 -c "import json,sys; v=json.load(open(sys.argv[1])); t=v['trust']; print(v['status'], v['speedup'], v['seconds'], v['grader_seconds'], t['suspect'], t['reasons'][:3], t['checks'].get('runtime', {}).get('guard_seconds'), (t['checks'].get('probes') or {}).get('seconds'))" "$OUT/evaluate.json"
  exit 0
fi
if [ "${JOB:-cheats}" != check ]; then  # cheats, or cheats then check (ROWS: which rows)
  only=(); [ -n "${ROWS:-}" ] && only=(--only ${ROWS})  # one --only with every row (a second one would replace the first)
  timeout "$(( $(left) - 10 ))" python3 benchmarks/gpu/trust_gpu.py --tasks-root /tmp/bench/tasks --out "$OUT/trust-gpu-a.jsonl" \
    kfc/ssm-selective-scan-firstorder "${only[@]}" > "$OUT/cheats-a.txt" 2>&1 &
  timeout "$(( $(left) - 10 ))" python3 benchmarks/gpu/trust_gpu.py --tasks-root /tmp/bench/tasks --out "$OUT/trust-gpu-b.jsonl" \
    --cache-dir /tmp/cache-b kfc/merge-attn-states-combine "${only[@]}" > "$OUT/cheats-b.txt" 2>&1 &
  [ "${JOB:-cheats}" = cheats ] && { wait; cat "$OUT"/cheats-*.txt | grep -v '^pesflow: '; exit 0; }
fi
mapfile -t names < "$NAMES"
n=${SHARDS:-3}
for i in $(seq 0 $((n - 1))); do
  # a row longer than one call: the finished gradings of earlier calls (their rest.tgz unpacked
  # into .bench/resume/) are reused, keyed by content, whichever shard graded them
  mkdir -p "/tmp/check-$i" && cat .bench/resume/check-*/gradings.jsonl > "/tmp/check-$i/gradings.jsonl" 2>/dev/null
  shard=()
  for j in "${!names[@]}"; do [ $((j % n)) = "$i" ] && shard+=("${names[$j]}"); done
  timeout "$(( $(left) - 25 ))" python3 -m agent.cli tasks check "${shard[@]}" --tasks-root /tmp/bench/tasks "${SET[@]}" \
    --set "evaluator.local.cache_dir=/tmp/cache-$i" --out "/tmp/check-$i" > "/tmp/check-$i.txt" 2>&1 &
done
# what is done comes back even when the call is cut short (the device's limit can be shorter than
# BUDGET_S when little device time is left): the rows and finished gradings, copied as they land
copy_back() {
  for f in results gradings; do cat /tmp/check-*/$f.jsonl > "$OUT/$f.part" 2>/dev/null; mv -f "$OUT/$f.part" "$OUT/$f.jsonl"; done
}
( while sleep 15; do copy_back; done ) > /dev/null 2>&1 &
copier=$!
wait $(jobs -p | grep -vx "$copier")
kill "$copier" 2>/dev/null
copy_back
cat "$OUT"/cheats-*.txt 2>/dev/null | grep -v '^pesflow: '
grep -hv '^pesflow: ' /tmp/check-*.txt | tail -n 60
# at most 8 files come back: the rest in one archive
tar czf "$OUT/rest.tgz" -C /tmp $(cd /tmp && ls -d check-* 2>/dev/null) -C "$OUT" pip.txt machine.txt checkout.txt 2>/dev/null
rm -f "$OUT/pip.txt" "$OUT/machine.txt" "$OUT/checkout.txt"
