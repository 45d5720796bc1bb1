#!/usr/bin/env bash
# Quick timing of state_space_scan.py against the frozen baseline copy, on the GPU.
# Not the grader: a few synthetic shapes, median of a few calls each (CUDA events), in ms,
# and the largest difference between the two outputs.
# Usage: bash /app/workspace/run_dev_bench.sh [repeats]
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
export PYTHONPATH=/app/repo PYTHONDONTWRITEBYTECODE=1
cd /app/repo || exit 1
python3 -c '
import importlib.util, statistics, sys
import torch
if not torch.cuda.is_available():
    print("no CUDA device visible: this bench needs the GPU")
    sys.exit(0)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
spec = importlib.util.spec_from_file_location("_bench_baseline", "/opt/verifier-baseline/state_space_scan.py")
base = importlib.util.module_from_spec(spec)
spec.loader.exec_module(base)
from state_space_scan import state_space_scan as cand

def inputs(b, L, D, N, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    delta = torch.nn.functional.softplus(torch.randn(b, L, D, 1, generator=g, device="cuda") - 4)
    A = torch.exp(-delta * torch.rand(1, 1, D, N, generator=g, device="cuda") * 2)
    B = torch.randn(b, L, N, generator=g, device="cuda")
    C = torch.randn(b, L, N, generator=g, device="cuda")
    x = torch.randn(b, L, D, generator=g, device="cuda")
    return [t.to(dtype) for t in (A, B, C, x)]

def clock(fn, args):
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); out = fn(*args); e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e), out

for label, shape in [("b=2 L=512  D=128 N=16 fp32", (2, 512, 128, 16, torch.float32)),
                     ("b=1 L=1024 D=64  N=16 bf16", (1, 1024, 64, 16, torch.bfloat16))]:
    args = inputs(*shape, seed=7)
    clock(base.state_space_scan, args); clock(cand, args)
    tb, tc, diff = [], [], 0.0
    for r in range(reps):
        t, yb = clock(base.state_space_scan, args); tb.append(t)
        t, yc = clock(cand, args); tc.append(t)
        diff = max(diff, (yb.float() - yc.float()).abs().max().item())
    mb, mc = statistics.median(tb), statistics.median(tc)
    print(f"{label}  baseline {mb:9.3f} ms  yours {mc:9.3f} ms  ratio {mb / mc:7.2f}x  max|diff| {diff:.3g}")
' "$@"
