"""The grading machine as a kernel engineer reads it: the device's model and size (SMs and memory
for a GPU, cores for a CPU) and its ceilings, peak memory bandwidth and FLOP/s per dtype,
measured once per device by pesflow (a large copy, large matmuls, best of a few) and cached; the
datasheet figures of known parts only where nothing could be measured, said so.

The measurement runs in a child interpreter with torch (the one pesflow runs in), on the machine
pesflow runs on: the ceilings of the machine that grades where the backend grades here (local,
a local container engine); a backend that grades elsewhere gets the table's figures for the
part its gradings name, or none.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

# Datasheet figures, dense (no sparsity): memory bandwidth in GB/s, TFLOP/s per dtype. Facts,
# from the vendors' published specifications; a fallback only.
KNOWN: dict[str, dict[str, Any]] = {
    "H200": {"bandwidth_gbs": 4800, "tflops": {"fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979}},
    "H100 80GB HBM3": {"bandwidth_gbs": 3350, "tflops": {"fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979}},
    "H100 PCIe": {"bandwidth_gbs": 2000, "tflops": {"fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513}},
    "H20": {"bandwidth_gbs": 4000, "tflops": {"fp32": 44, "tf32": 74, "bf16": 148, "fp16": 148, "fp8": 296}},
    "A100-SXM4-80GB": {"bandwidth_gbs": 2039, "tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}},
    "A100-SXM4-40GB": {"bandwidth_gbs": 1555, "tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}},
    "L40S": {"bandwidth_gbs": 864, "tflops": {"fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362, "fp8": 733}},
}

# The child's measurement: bandwidth as a device-to-device copy (read + write), FLOP/s as square
# matmuls per dtype; the best of `reps` after a warm-up.
_MEASURE = r"""
import json, sys, time
import torch
dev = sys.argv[1]
small = sys.argv[2] == "small"
gpu = dev == "cuda"
def sync():
    if gpu:
        torch.cuda.synchronize()
def best(fn, reps):
    fn(); sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); sync(); out.append(time.perf_counter() - t)
    return min(out)
facts = {"device": dev}
if gpu:
    p = torch.cuda.get_device_properties(0)
    facts.update(name=p.name, sms=p.multi_processor_count, memory_gib=round(p.total_memory / 2**30, 1),
                 capability="%d.%d" % (p.major, p.minor))
else:
    import os, platform
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception:
        model = platform.processor() or platform.machine()
    facts.update(name=model, cores=os.cpu_count(), threads=torch.get_num_threads())
n = (1 << 24 if small else 1 << 28) if gpu else (1 << 22 if small else 1 << 26)
a = torch.empty(n, dtype=torch.float32, device=dev)
b = torch.empty_like(a)
t = best(lambda: b.copy_(a), 3 if small else 5)
facts["bandwidth_gbs"] = round(2 * a.numel() * 4 / t / 1e9, 1)
del a, b
tflops = {}
dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16} if gpu else {"fp32": torch.float32}
m = (2048 if small else 8192) if gpu else (256 if small else 1024)
for name, dt in dtypes.items():
    try:
        x = torch.randn(m, m, device=dev).to(dt)
        y = torch.randn(m, m, device=dev).to(dt)
        t = best(lambda: x @ y, 3)
        tflops[name] = float("%.4g" % (2 * m ** 3 / t / 1e12))
    except Exception:
        pass
facts["tflops"] = tflops
print(json.dumps(facts))
"""


def measure(device: str, small: bool = False, timeout: float = 300) -> dict[str, Any] | None:
    """The device's facts and measured ceilings ("cuda": the first GPU, "cpu"), or None where
    they cannot be measured here (no torch, no such device)."""
    try:
        out = subprocess.run([sys.executable, "-c", _MEASURE, device, "small" if small else "full"], capture_output=True,
                             text=True, timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        facts = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    facts["source"] = "measured by pesflow"
    return facts


def _name(device: str) -> str:
    """The device's model: the GPU's name from the driver, the CPU's model line and its cores."""
    if device == "cuda":
        try:
            return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                  text=True, timeout=20).stdout.splitlines()[0].strip()
        except (OSError, subprocess.TimeoutExpired, IndexError):
            return ""
    try:
        name = next(ln.split(":", 1)[1] for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name"))
    except (OSError, StopIteration):
        name = "cpu"
    return f"{name.strip()}-{os.cpu_count()}"


def known(name: str) -> dict[str, Any] | None:
    """The table's figures for a part named `name` (a driver's name, or a grading's hardware)."""
    for part, figs in sorted(KNOWN.items(), key=lambda kv: -len(kv[0])):
        if part.lower() in name.lower():
            return {"name": name, **figs, "source": f"datasheet ({part}), not measured"}
    return None


def facts(device: str, cache_dir: Path, small: bool = False) -> dict[str, Any] | None:
    """The device's facts: cached, else measured here once and cached, else the table's."""
    name = _name(device)
    key = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{device}-{name}")[:120] if name else ""  # one cache file per model
    p = Path(cache_dir) / "machine" / f"{key}.json"
    if key and p.is_file():
        try:
            return json.loads(p.read_text())
        except ValueError:
            pass
    got = measure(device, small=small)
    if got is None:
        return known(name) if device == "cuda" and name else None
    if key:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(got, indent=1))
        os.replace(tmp, p)
    return got


def describe(f: dict[str, Any] | None) -> list[str]:
    """The facts as a prompt's lines (engineer)."""
    if not f:
        return ["(no figures: the device could not be measured here and is not in pesflow's table)"]
    size = (f"{f['sms']} SMs, {f['memory_gib']} GiB, compute capability {f['capability']}" if f.get("sms")
            else f"{f['cores']} cores" if f.get("cores") else "")
    lines = [f"{f.get('name', '?')}" + (f" ({size})" if size else "")]
    if f.get("bandwidth_gbs"):
        lines.append(f"memory bandwidth: {f['bandwidth_gbs']:g} GB/s ({f.get('source', '')})")
    if f.get("tflops"):
        lines.append("compute: " + ", ".join(f"{k} {v:g} TFLOP/s" for k, v in f["tflops"].items()) + f" ({f.get('source', '')})")
    return lines
