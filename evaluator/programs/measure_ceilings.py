"""The measurement of a machine's ceilings: its device's facts, peak memory bandwidth and FLOP/s
per dtype, printed as one JSON line (evaluator/ceilings.py caches and describes them).

Run by evaluator/ceilings.py `measure` in a child of the interpreter pesflow runs on, on the
machine pesflow runs on, as `PYTHON measure_ceilings.py DEVICE SIZE`; stdlib only, with torch for
a GPU and numpy for a CPU where it is there. Each figure is the best of a few runs after a
warm-up. A GPU: bandwidth as a device-to-device copy (read + write), FLOP/s as square matmuls per
dtype. A CPU, torch or not: bandwidth as a large copy (read + write), over one thread and over all
cores (numpy's copy lets the GIL go: what a vectorized or threaded candidate could reach), FLOP/s
as numpy's square matmuls (its BLAS); without numpy a plain buffer copy on one thread and no FLOP/s.

Arguments, positional:
  DEVICE  `cuda` (the first GPU, with torch) or anything else for the CPU
  SIZE    `small` (quick: smaller buffers and matrices, fewer runs) or `full`
"""

import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def best(fn, reps, sync=None):
    """The fastest of `reps` runs of `fn` after one warm-up, in seconds (`sync` waits for the device)."""
    fn()
    if sync:
        sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        out.append(time.perf_counter() - t)
    return min(out)


def gpu_bandwidth(torch, small, sync):
    """GB/s of a device-to-device copy (read + write); its buffers freed on return, before the matmuls."""
    a = torch.empty(1 << 24 if small else 1 << 28, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    return round(2 * a.numel() * 4 / best(lambda: b.copy_(a), 3 if small else 5, sync) / 1e9, 1)


def gpu(small):
    import torch  # optional: a GPU's measurement only, and this child fails without it (measure: None)
    sync = torch.cuda.synchronize
    p = torch.cuda.get_device_properties(0)
    facts = {"device": "cuda", "name": p.name, "sms": p.multi_processor_count,
             "memory_gib": round(p.total_memory / 2**30, 1), "capability": "%d.%d" % (p.major, p.minor)}
    facts["bandwidth_gbs"] = gpu_bandwidth(torch, small, sync)
    tflops = {}
    m = 2048 if small else 8192
    for name, dt in {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}.items():
        try:
            x = torch.randn(m, m, device="cuda").to(dt)
            y = torch.randn(m, m, device="cuda").to(dt)
            tflops[name] = float("%.4g" % (2 * m ** 3 / best(lambda: x @ y, 3, sync) / 1e12))
        except Exception:  # a dtype the GPU lacks: left out
            pass
    facts["tflops"] = tflops
    return facts


def scale(small):
    """The copied buffer's bytes and the runs per figure."""
    return ((1 << 24) if small else (1 << 28)), (3 if small else 5)


def cpu_bandwidth(np, facts, small):
    """The copy's GB/s over one thread and over all cores; its buffers freed on return, before the matmuls."""
    size, reps = scale(small)
    cores = facts["cores"]
    a = np.ones(size // 8)
    b = np.empty_like(a)
    one = best(lambda: np.copyto(b, a), reps)
    cut = [j * len(a) // cores for j in range(cores + 1)]
    parts = [(a[cut[j]:cut[j + 1]], b[cut[j]:cut[j + 1]]) for j in range(cores)]
    with ThreadPoolExecutor(cores) as pool:
        every = best(lambda: list(pool.map(lambda ab: np.copyto(ab[1], ab[0]), parts)), reps)
    facts["bandwidth_one_thread_gbs"] = round(2 * size / one / 1e9, 1)
    facts["bandwidth_gbs"] = round(2 * size / min(one, every) / 1e9, 1)
    facts["bandwidth_threads"] = cores if every < one else 1


def cpu_with_numpy(np, facts, small):
    cpu_bandwidth(np, facts, small)
    reps = scale(small)[1]
    m = 256 if small else 1024
    tflops = {}
    for name, dt in (("fp32", np.float32), ("fp64", np.float64)):
        x = np.random.default_rng(0).standard_normal((m, m)).astype(dt)
        y = np.random.default_rng(1).standard_normal((m, m)).astype(dt)
        tflops[name] = float("%.4g" % (2 * m ** 3 / best(lambda: x @ y, reps) / 1e12))
    facts["tflops"] = tflops
    facts["how"] = "with numpy"


def cpu_plain(facts, small):
    size, reps = scale(small)
    a = bytearray(size)
    b = bytearray(size)
    mb = memoryview(b)

    def copy():
        mb[:] = a
    facts["bandwidth_gbs"] = facts["bandwidth_one_thread_gbs"] = round(2 * size / best(copy, reps) / 1e9, 1)
    facts["bandwidth_threads"] = 1
    facts["how"] = "with a plain buffer copy: no numpy, no FLOP/s"


def cpu(small):
    try:
        with open("/proc/cpuinfo") as info:
            model = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except Exception:  # no /proc, no model line: what platform says
        model = platform.processor() or platform.machine()
    facts = {"device": "cpu", "name": model, "cores": os.cpu_count() or 1}
    try:
        import numpy as np  # optional: numpy's copies and matmuls where it is, else a plain copy
    except ImportError:
        np = None
    if np is not None:
        cpu_with_numpy(np, facts, small)
    else:
        cpu_plain(facts, small)
    return facts


def main(argv):
    device, small = argv[1], argv[2] == "small"
    print(json.dumps(gpu(small) if device == "cuda" else cpu(small)))


if __name__ == "__main__":
    main(sys.argv)
