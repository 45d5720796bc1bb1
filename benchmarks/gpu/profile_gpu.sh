#!/usr/bin/env bash
# benchmarks/profile_cost.py on the device, with the card's measured ceilings and whether Nsight
# Compute can read its counters: installs the carried wheels (.whl/), checks the benchmark out
# of .bench/faibench-git.tgz, runs in the foreground (one call). .whl and .bench are git-ignored:
# name them in the call's carry.
#   OUT=... TASKS="kfc/a kfc/b" [REPEATS=2] [SHARE=0.15] [NO_CHECK=1] bash benchmarks/gpu/profile_gpu.sh
set -u
OUT="${OUT:?set OUT}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.txt" 2>&1 || { echo "wheels did not install"; tail -n 5 "$OUT/pip.txt"; exit 1; }
rm -rf /tmp/bench && mkdir -p /tmp/bench && tar xzf .bench/faibench-git.tgz -C /tmp/bench
git -C /tmp/bench read-tree HEAD && git -C /tmp/bench checkout-index -a -f 2> /dev/null
{ nvidia-smi -L; command -v ncu && ncu --version | tail -n 1; } > "$OUT/machine.txt" 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# can ncu read this card's counters at all (outside any sandbox)?
[ -n "${NO_CHECK:-}" ] || timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
  python3 -c "import torch; x = torch.ones(1 << 24, device='cuda'); (x * 2).sum().item()" > "$OUT/ncu-check.txt" 2>&1
tail -n 12 "$OUT/ncu-check.txt"
[ -n "${NO_CHECK:-}" ] || python3 -c "import json, sys; from evaluator import ceilings; print(json.dumps(ceilings.measure('cuda'), indent=1))" \
  > "$OUT/ceilings.json" 2> "$OUT/ceilings.err"
cat "$OUT/ceilings.json"
args=(); for t in ${TASKS:?set TASKS}; do args+=(--task "$t"); done
python3 benchmarks/profile_cost.py --tasks-root /tmp/bench/tasks --install-steps skip --repeats "${REPEATS:-2}" ${SHARE:+--profile-share "$SHARE"} \
  --cache /tmp/cache-pc --out /tmp/pc "${args[@]}" 2>&1 | tee "$OUT/run.txt"
cp /tmp/pc/rows.jsonl "$OUT/" 2>/dev/null
tar czf "$OUT/profiles.tgz" -C /tmp/pc --exclude=cache --exclude=logs . 2>/dev/null
