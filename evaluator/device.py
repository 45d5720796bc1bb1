"""Which device a grading runs on, and what its environment says of it: a GPU task on a machine
without a GPU is checked on the CPU only when asked (--device cpu: correctness, small shapes, no
reward), its Triton kernels in Triton's interpreter."""

from __future__ import annotations

from evaluator.hardware import gpu_available
from evaluator.task import Task, TaskError


def check_device(task: Task, device: str | None, gpus_here: bool = True) -> str | None:
    """The device a GPU task is graded on; a GPU task on a machine without one needs --device cpu
    (`gpus_here` False: the backend's gradings run where the GPUs are, this machine needs none)."""
    if device not in (None, "cpu", "cuda"):
        raise TaskError(f"unknown device {device!r}; use --device cuda or --device cpu")
    if task.gpus > 0 and device != "cpu":
        if gpus_here and not gpu_available():
            raise TaskError(f"{task.name} needs a GPU (gpus = {task.gpus}) and this machine has none; "
                            "pass --device cpu to `pesflow evaluate` or `pesflow tasks check` to "
                            "check its correctness on the CPU with small shapes (no reward; a search, `pesflow "
                            "run`, needs the GPU's timings)")
        return "cuda"
    return device


def device_env(device: str | None) -> dict[str, str]:
    if device is None:
        return {}
    env = {"KERNELBENCH_DEVICE": device}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton kernels run in its interpreter on the CPU
    return env
