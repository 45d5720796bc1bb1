#!/usr/bin/env bash
# How long a fresh python3 takes to import what a GPU probe loads, twice (the second warm); run on the GPU machine.
for i in 1 2; do
python3 - <<'PY'
import time
t=time.perf_counter(); import torch; a=time.perf_counter()-t
t=time.perf_counter(); import triton; b=time.perf_counter()-t
t=time.perf_counter(); import numpy; c=time.perf_counter()-t
t=time.perf_counter(); torch.cuda.init(); x=torch.zeros(1,device="cuda"); torch.cuda.synchronize(); d=time.perf_counter()-t
print("torch %.3f triton %.3f numpy %.3f cuda-init %.3f" % (a,b,c,d))
PY
done
