"""The grading machine as a kernel engineer reads it: the device's model and size (SMs and memory
for a GPU, cores for a CPU) and its ceilings, peak memory bandwidth and FLOP/s per dtype,
measured once per device by pesflow (a large copy, large matmuls, best of a few) and cached; the
datasheet figures of known parts only where nothing could be measured, said so.

The measurement runs in a child interpreter (the one pesflow runs in), on the machine pesflow
runs on: the ceilings of the machine that grades where the backend grades here (local, a local
container engine); a backend that grades elsewhere gets the table's figures for the part its
gradings name, or none. A GPU is measured with torch; a CPU needs no torch (a README install
has none): numpy's copies over threads and matmuls where numpy is, else a plain buffer copy,
else the CPU named only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from evaluator.hardware import cpu_model  # noqa: F401 - the machine's name, here too (ceilings.cpu_model)
from evaluator.programs import MEASURE_CEILINGS

# Datasheet figures, dense (no sparsity): memory bandwidth in GB/s, TFLOP/s per dtype. Facts,
# from the vendors' published specifications; a fallback only.
KNOWN: dict[str, dict[str, Any]] = {
    "H200": {"bandwidth_gbs": 4800, "tflops": {"fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979}},
    "H100 80GB HBM3": {"bandwidth_gbs": 3350, "tflops": {"fp32": 67, "tf32": 495, "bf16": 989, "fp16": 989,
                                                         "fp8": 1979}},
    "H100 PCIe": {"bandwidth_gbs": 2000, "tflops": {"fp32": 51, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513}},
    "H20": {"bandwidth_gbs": 4000, "tflops": {"fp32": 44, "tf32": 74, "bf16": 148, "fp16": 148, "fp8": 296}},
    "A100-SXM4-80GB": {"bandwidth_gbs": 2039, "tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}},
    "A100-SXM4-40GB": {"bandwidth_gbs": 1555, "tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}},
    "L40S": {"bandwidth_gbs": 864, "tflops": {"fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362, "fp8": 733}},
}


def measure(device: str, small: bool = False, timeout: float = 300) -> dict[str, Any] | None:
    """The device's facts and measured ceilings ("cuda": the first GPU, with torch; "cpu", with
    numpy or none), or None where they cannot be measured here (a GPU without torch, no such device)."""
    try:  # evaluator/programs/measure_ceilings.py, in a child: a failed import or a crash costs nothing here
        out = subprocess.run([sys.executable, str(MEASURE_CEILINGS), device, "small" if small else "full"],
                             capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        facts = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    facts["source"] = "measured by pesflow"  # `how` (a CPU's): with what, said beside it (describe)
    return facts


def _name(device: str) -> str:
    """The device's model: the GPU's name from the driver, the CPU's model line and its cores."""
    if device == "cuda":
        try:
            return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                  text=True, timeout=20).stdout.splitlines()[0].strip()
        except (OSError, subprocess.TimeoutExpired, IndexError):
            return ""
    return f"{cpu_model()}-{os.cpu_count()}"


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
    if got is None and device != "cuda":  # named at least: a CPU's prompt says what the machine is
        return {"device": "cpu", "name": cpu_model(), "cores": os.cpu_count(),
                "source": "named only: its measurement failed"}
    if got is None:
        return known(name) if name else None
    if key:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(got, indent=1))
        os.replace(tmp, p)
    return got


def _flops(v: float) -> str:
    return f"{v:g} TFLOP/s" if v >= 1 else f"{v * 1e3:.3g} GFLOP/s"


def describe(f: dict[str, Any] | None) -> list[str]:
    """The facts as a prompt's lines (engineer)."""
    if not f:
        return ["(no figures: the device could not be measured here and is not in pesflow's table)"]
    size = (f"{f['sms']} SMs, {f['memory_gib']} GiB, compute capability {f['capability']}" if f.get("sms")
            else f"{f['cores']} cores" if f.get("cores") else "")
    lines = [f"{f.get('name', '?')}" + (f" ({size})" if size else "")]
    source = " ".join(x for x in (f.get("source"), f.get("how")) if x)
    if f.get("bandwidth_gbs"):
        threads = int(f.get("bandwidth_threads") or 0)
        how = f" over {threads} threads, {f['bandwidth_one_thread_gbs']:g} GB/s on one" \
            if threads > 1 and f.get("bandwidth_one_thread_gbs") else " on one thread" if threads == 1 else ""
        lines.append(f"memory bandwidth: {f['bandwidth_gbs']:g} GB/s{how} ({source})")
    if f.get("tflops"):
        lines.append("compute: " + ", ".join(f"{k} {_flops(v)}" for k, v in f["tflops"].items()) + f" ({source})")
    elif f.get("device") == "cpu":
        lines.append(f"no FLOP/s figure ({source or 'not measured'})")
    return lines
