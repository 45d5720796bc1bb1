"""What this machine has to grade with."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

# Host folders a GPU grader needs inside the sandbox when they are mounts of their own (an
# overlay of / does not show other mounts): the driver's libraries on GPU clouds.
GPU_MOUNTS = ("/usr/local/nvidia",)
# Where a GPU grading sees the host's Nsight Compute (read-only): a folder the profile probe
# looks in (evaluator/trust/inside/pesflow_profile.py find_ncu), whatever the host's PATH was.
NCU_MOUNT = "/opt/nvidia/nsight-compute/host"


@lru_cache(maxsize=1)
def gpu_available() -> bool:
    if not os.path.exists("/dev/nvidiactl") and not any(os.path.exists(f"/dev/nvidia{i}") for i in range(8)):
        return False
    smi = (shutil.which("nvidia-smi")
           or ("/usr/local/nvidia/bin/nvidia-smi" if os.path.exists("/usr/local/nvidia/bin/nvidia-smi") else None))
    if smi is None:
        return True  # device nodes without the tool: let the grader find out
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def gpu_mounts() -> list[str]:
    return [p for p in GPU_MOUNTS if os.path.ismount(p)]


def ncu_install(path: str | None = None) -> Path | None:
    """The folder holding the host's Nsight Compute (`ncu` on `path`, default the PATH), the
    whole install its launcher needs; None where the host has none. A CUDA toolkit's bin/ncu
    only starts <toolkit>/nsight-compute-<version>/ncu: that folder is the install."""
    return _ncu_install_on(path if path is not None else os.environ.get("PATH", os.defpath))


@lru_cache(maxsize=8)  # asked at every GPU grading's binds; keyed by the PATH searched, which can change
def _ncu_install_on(path: str) -> Path | None:
    found = shutil.which("ncu", path=path)
    if found is None:
        return None
    real = Path(os.path.realpath(found))
    if real.parent.name == "bin":
        beside = sorted(h for h in real.parent.parent.glob("nsight-compute*/ncu") if os.access(h, os.X_OK))
        if beside:
            return beside[-1].parent
    return real.parent


def gpu_binds(path: str | None = None) -> list[tuple[Path, str]]:
    """Host folders a GPU grading's sandbox binds read-only (host path, path inside): the
    driver's mounts at their own paths, and the host's Nsight Compute at NCU_MOUNT, so a
    profile reads its counters inside the grading where the host can."""
    binds = [(Path(m), m) for m in gpu_mounts()]
    ncu = ncu_install(path)
    if ncu is not None:
        binds.append((ncu, NCU_MOUNT))
    return binds


def cpu_model() -> str:
    """The CPU's model line (/proc/cpuinfo, else what the platform says), no torch needed."""
    try:
        return next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine() or "cpu"
