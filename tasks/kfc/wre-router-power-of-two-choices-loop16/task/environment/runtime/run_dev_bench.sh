#!/usr/bin/env bash
# Quick local timing of submission/kernel.py against the frozen baseline copy.
# Not the grader: two synthetic streams, median of a few calls each, times in ms.
# Usage: bash /app/workspace/run_dev_bench.sh [repeats]
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
export PYTHONPATH=/app/repo PYTHONDONTWRITEBYTECODE=1
cd /app/repo || exit 1
python3 -c '
import importlib.util, statistics, sys, time
import numpy as np
from submission.traffic import synthetic_stream

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
spec = importlib.util.spec_from_file_location("_bench_baseline", "/opt/verifier-baseline/kernel.py")
base = importlib.util.module_from_spec(spec)
spec.loader.exec_module(base)
from submission.kernel import route_p2c as cand

streams = [
    ("R=48  n=60000 token costs", dict(num_replicas=48, num_requests=60000, seed=7)),
    ("R=8   n=80000 unit costs ", dict(num_replicas=8, num_requests=80000, seed=8, unit_costs=True)),
    ("R=256 n=50000 hot pair   ", dict(num_replicas=256, num_requests=50000, seed=9, hot_fraction=0.5)),
]

def clock(fn, args):
    R, c, l, k = args
    a = (R, c.copy(), l.copy(), None if k is None else k.copy())
    t0 = time.perf_counter()
    out = fn(*a)
    return (time.perf_counter() - t0) * 1e3, out

for label, kw in streams:
    args = synthetic_stream(**kw)
    clock(base.route_p2c, args); clock(cand, args)
    tb, tc, same = [], [], True
    for _ in range(reps):
        t, ob = clock(base.route_p2c, args); tb.append(t)
        t, oc = clock(cand, args); tc.append(t)
        same = same and isinstance(oc, tuple) and len(oc) == 2 and all(
            np.array_equal(x, y) and getattr(y, "dtype", None) == np.int64 for x, y in zip(ob, oc))
    mb, mc = statistics.median(tb), statistics.median(tc)
    print(f"{label}  baseline {mb:8.2f} ms  yours {mc:8.2f} ms  ratio {mb / mc:5.2f}x  same output: {same}")
' "$@"
