#!/usr/bin/env bash
# Quick timing of attn/prefill.py against the frozen baseline copy, on the GPU.
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
spec = importlib.util.spec_from_file_location("_bench_baseline", "/opt/verifier-baseline/prefill.py")
base = importlib.util.module_from_spec(spec)
spec.loader.exec_module(base)
from attn.prefill import causal_attention as cand

def clock(fn, args):
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); out = fn(*args); e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e), out

for label, (b, h, n, d, dt) in [("b=2 h=16 seq=2048 d=128 fp16", (2, 16, 2048, 128, torch.float16)),
                                ("b=4 h=8  seq=1500 d=64  bf16", (4, 8, 1500, 64, torch.bfloat16))]:
    g = torch.Generator(device="cuda").manual_seed(7)
    args = [torch.randn(b, h, n, d, generator=g, device="cuda").to(dt) for _ in range(3)]
    clock(base.causal_attention, args); clock(cand, args)
    tb, tc, diff = [], [], 0.0
    for r in range(reps):
        t, ob = clock(base.causal_attention, args); tb.append(t)
        t, oc = clock(cand, args); tc.append(t)
        diff = max(diff, (ob.float() - oc.float()).abs().max().item())
    mb, mc = statistics.median(tb), statistics.median(tc)
    print(f"{label}  baseline {mb:9.3f} ms  yours {mc:9.3f} ms  ratio {mb / mc:7.2f}x  max|diff| {diff:.3g}")
' "$@"
