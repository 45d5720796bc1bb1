#!/usr/bin/env bash
# Quick local check of native_histogram_merge.py against the frozen baseline copy.
# Not the grader: a few synthetic merges, the outputs compared, then the instructions
# each side executes for them (valgrind's callgrind, as the grader counts), or wall
# time when valgrind is missing.
# Usage: bash /app/workspace/run_dev_bench.sh [rounds]   (30 merges of 40 histograms by default)
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
export PYTHONPATH=/app/repo PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0
cd /app/repo || exit 1
ROUNDS="${1:-30}"
WORK="$(mktemp -d /tmp/devbench.XXXXXX)" || exit 1
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/bench.py" <<'PY'
import random, sys, time, zlib

which, rounds = sys.argv[1], int(sys.argv[2])
if which == "baseline":
    sys.path.insert(0, "/opt/verifier-baseline")
import native_histogram_merge as m

rng = random.Random(12345)
rand = rng.random

def hist(scale):
    unit = 2.0 ** scale
    mid = int((17.0 * rand() - 5.0) * unit)
    half = max(80, int((0.3 + 2.7 * rand()) * unit))
    buckets = {mid + int((2.0 * rand() - 1.0) * half): 1 + int(300 * rand()) for _ in range(5 + int(45 * rand()))}
    zero = int(20 * rand())
    return {"scale": scale, "zero_count": zero, "count": zero + sum(buckets.values()),
            "sum": int(1e6 * rand()), "buckets": buckets}

calls = [([hist(int(9 * rand())) for _ in range(40)], (32, 160)[int(2 * rand())]) for _ in range(rounds)]
t0 = time.perf_counter()
crc = 0
for hists, cap in calls:
    crc = zlib.crc32(repr(m.merge_histograms(hists, cap)).encode(), crc)
print("%s %.1f ms checksum %08x" % (which, (time.perf_counter() - t0) * 1e3, crc))
PY

PY="$(python3 -c 'import sys; print(sys.executable)')"
for which in baseline candidate; do
  "$PY" "$WORK/bench.py" "$which" "$ROUNDS" || exit 1
done
if command -v valgrind >/dev/null 2>&1; then
  for which in baseline candidate; do
    valgrind --tool=callgrind --cache-sim=no --branch-sim=no --log-file="$WORK/$which.log" \
      --callgrind-out-file="$WORK/$which.out" "$PY" -S "$WORK/bench.py" "$which" "$ROUNDS" >/dev/null
    ir=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$WORK/$which.log" | tr -d ',' | tail -n 1)
    echo "$which instructions: ${ir:-?} (whole process, interpreter start included)"
  done
else
  echo "valgrind not found: instruction counts skipped"
fi
