"""What this machine has to grade with."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache

# Host folders a GPU grader needs inside the sandbox when they are mounts of their own (an
# overlay of / does not show other mounts): the driver's libraries on GPU clouds.
GPU_MOUNTS = ("/usr/local/nvidia",)


@lru_cache(maxsize=1)
def gpu_available() -> bool:
    if not os.path.exists("/dev/nvidiactl") and not any(os.path.exists(f"/dev/nvidia{i}") for i in range(8)):
        return False
    smi = shutil.which("nvidia-smi") or ("/usr/local/nvidia/bin/nvidia-smi" if os.path.exists("/usr/local/nvidia/bin/nvidia-smi") else None)
    if smi is None:
        return True  # device nodes without the tool: let the grader find out
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def gpu_mounts() -> list[str]:
    return [p for p in GPU_MOUNTS if os.path.ismount(p)]
