#!/usr/bin/env bash
# Quick local timing of /app/repo/sgemm_kernel.cu against the frozen baseline copy.
# Not the grader: a few shapes, CUDA-event medians, times in ms, and a check that
# your output matches a float64 torch product. Without a GPU it only compiles both.
# Usage: bash /app/workspace/run_dev_bench.sh [repeats]
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/cuda/bin
export PYTHONPATH=/app/repo PYTHONDONTWRITEBYTECODE=1
cd /app/repo || exit 1
python3 - "$@" <<'PY'
import statistics, sys
import torch
from gemm_runtime.build import build_library, load_library

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
if not torch.cuda.is_available():
    arch = ["-arch=sm_90"]
    print("no GPU here: compile check only (" + arch[0] + ")")
    print("  yours   :", build_library("/app/repo/sgemm_kernel.cu", arch))
    print("  baseline:", build_library("/opt/verifier-baseline/sgemm_kernel.cu", arch))
    sys.exit(0)

cand = load_library("/app/repo/sgemm_kernel.cu")
base = load_library("/opt/verifier-baseline/sgemm_kernel.cu")
shapes = [(1536, 1536, 1536, 1.0, 0.0), (3000, 2000, 1000, 1.0, 1.0), (777, 4100, 333, 0.5, 0.0)]
flush = torch.empty(64 << 20, device="cuda")

def run(fn, a, b, c, d, alpha, beta):
    m, k = a.shape
    n = b.shape[1]
    s = torch.cuda.current_stream().cuda_stream
    rc = fn(m, n, k, alpha, a.data_ptr(), b.data_ptr(), beta, c.data_ptr(), d.data_ptr(), s)
    if rc != 0:
        raise SystemExit(f"sgemm_launch returned CUDA error {rc}")

def clock(fn, *args):
    flush.zero_()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record(); run(fn, *args); e1.record(); torch.cuda.synchronize()
    return e0.elapsed_time(e1)

for m, n, k, alpha, beta in shapes:
    a = torch.randn(m, k, device="cuda"); b = torch.randn(k, n, device="cuda")
    c = torch.randn(m, n, device="cuda"); d = torch.empty(m, n, device="cuda")
    run(cand, a, b, c, d, alpha, beta); torch.cuda.synchronize()
    ref = alpha * (a.double() @ b.double()) + (beta * c.double() if beta else 0)
    budget = 2.0 ** -19 * (abs(alpha) * (a.double().abs() @ b.double().abs()) + (abs(beta) * c.double().abs() if beta else 0))
    ok = bool(((d.double() - ref).abs() <= budget + 1e-37).all())
    for fn in (base, cand):
        clock(fn, a, b, c, d, alpha, beta)
    tb = statistics.median(clock(base, a, b, c, d, alpha, beta) for _ in range(reps))
    tc = statistics.median(clock(cand, a, b, c, d, alpha, beta) for _ in range(reps))
    tflops = 2.0 * m * n * k / (tc * 1e9)
    print(f"M={m:5d} N={n:5d} K={k:5d}  baseline {tb:8.3f} ms  yours {tc:8.3f} ms  "
          f"ratio {tb / tc:6.2f}x  {tflops:6.1f} TFLOP/s  matches fp64 reference: {ok}")
PY
