"""Grading several candidates at once over one backend: worker slots, GPU locks, infra retries.

`ParallelBackend` wraps any backend behind the same interface, so the Evaluator (and the
search's thread pool calling it) needs no change:
- at most `workers` gradings run at once; each holds a worker slot, and a backend that keeps
  warm state per worker (the docker backend: one warm container per slot) is told which;
- GPU tasks: a task's grader is one opaque script (build, correctness and timing inside it),
  so the timing phase cannot be singled out from here. Each GPU grading therefore holds its
  GPU(s) for its whole run: one grading at a time per device, whatever `workers` says, while
  CPU tasks run `workers` at once. Slot i always gets the same device group (i modulo the
  number of groups), so a warm container keeps the GPUs it was created with;
- an infrastructure failure (InfraError, or a run that says infra_error: engine down, build
  failed, container killed) is tried `retries` more times, then reported as infra_error,
  never as the candidate's failure. Preparing is done once per package at a time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import lru_cache
from typing import Callable, Iterable, TypeVar

from evaluator.backends.base import (Backend, Capabilities, capabilities_of, forget, GradeRequest, GradeRun, InfraError,
                                     Prepared, Slot)
from evaluator.task import Task

T = TypeVar("T")
R = TypeVar("R")


@lru_cache(maxsize=1)
def gpu_indices() -> tuple[int, ...]:
    """Indices of the GPUs nvidia-smi lists (none when it is missing or fails)."""
    smi = (shutil.which("nvidia-smi")
           or ("/usr/local/nvidia/bin/nvidia-smi" if os.path.exists("/usr/local/nvidia/bin/nvidia-smi") else None))
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(int(x) for x in out.stdout.split() if x.strip().isdigit()) if out.returncode == 0 else ()


def device_groups(devices: Iterable[int], per_task: int) -> list[tuple[int, ...]]:
    """Disjoint groups of `per_task` GPUs; leftovers that do not make a whole group are unused."""
    devs = list(devices)
    return [tuple(devs[i : i + per_task]) for i in range(0, len(devs) - per_task + 1, per_task)] if per_task > 0 else []


class ParallelBackend:
    """A backend graded from many threads at once; see the module's docstring."""

    def __init__(self, inner: Backend, workers: int | None = None, gpu_devices: Iterable[int] | None = None,
                 retries: int = 1):
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1 (got {workers})")
        self.inner = inner
        self.name = inner.name
        self.workers = workers
        self.devices = tuple(gpu_devices) if gpu_devices is not None else None
        self.retries = retries
        self._cond = threading.Condition()
        self._busy: set[int] = set()
        self._busy_devices: set[int] = set()
        self._prepare_locks: dict[str, threading.Lock] = {}
        self._prepared: dict[str, Prepared] = {}
        # what the backend declares (its own, or its registry entry's), never guessed from its signature
        self.capabilities: Capabilities = capabilities_of(inner)
        self.peak = 0  # the most gradings that ran at once (for tests and benchmarks)

    # ------------------------------------------------------------------ slots
    def _devices(self) -> tuple[int, ...]:
        return self.devices if self.devices is not None else gpu_indices()

    def acquire(self, task: Task, on_cpu: bool = False) -> Slot:
        """Block until a worker slot (and, for a GPU task, that slot's GPUs) is free; take it.
        `on_cpu`: a GPU task checked on the CPU (--device cpu) needs no GPU. A backend whose
        gradings bring their own GPUs (Modal, Ray) is held to `workers` only: this machine's
        GPUs are not read, not required, and never handed to it."""
        gpus = 0 if on_cpu else task.gpus
        gpus_here = gpus > 0 and self.capabilities.gpus == "host"
        groups = device_groups(self._devices(), gpus) if gpus_here else []
        if gpus_here and not groups:
            raise InfraError(f"{task.name} needs {task.gpus} GPU(s) and only {len(self._devices())} are available "
                             "to pesflow here (evaluator.gpu_devices); grade it where it fits, "
                             "or check its correctness on the CPU: --device cpu of `pesflow "
                             "evaluate` or `pesflow tasks check`")
        with self._cond:
            while True:
                limit = self.workers if self.workers is not None else len(self._busy) + 1
                for i in range(limit):
                    if i in self._busy:
                        continue
                    devs = groups[i % len(groups)] if groups else ()
                    if self._busy_devices.intersection(devs):
                        continue
                    self._busy.add(i)
                    self._busy_devices.update(devs)
                    self.peak = max(self.peak, len(self._busy))
                    return Slot(i, devs, gpus)
                self._cond.wait()

    def release(self, slot: Slot) -> None:
        with self._cond:
            self._busy.discard(slot.index)
            self._busy_devices.difference_update(slot.devices)
            self._cond.notify_all()

    # ------------------------------------------------------------------ Backend
    def prepare(self, task: Task) -> Prepared:
        with self._cond:
            lock = self._prepare_locks.setdefault(task.content_hash, threading.Lock())
        with lock:  # two threads asking for the same package wait for one build
            if task.content_hash in self._prepared:
                return self._prepared[task.content_hash]
            for attempt in range(self.retries + 1):
                try:
                    prepared = self.inner.prepare(task)
                    break
                except InfraError as e:
                    if attempt == self.retries:
                        raise InfraError(f"{e} (tried {attempt + 1} times)" if attempt else str(e)) from None
            self._prepared[task.content_hash] = prepared
            return prepared

    def baseline_text(self, prepared: Prepared, rel: str) -> str | None:
        return self.inner.baseline_text(prepared, rel)

    def grade(self, prepared: Prepared, request: GradeRequest) -> GradeRun:
        slot = self.acquire(prepared.task, on_cpu=request.env.get("KERNELBENCH_DEVICE") == "cpu")
        try:
            run: GradeRun | None = None
            for attempt in range(self.retries + 1):
                run = self._grade_once(prepared, request, slot)
                if not run.infra_error:
                    return run
            assert run is not None
            if self.retries:
                run.infra_error = f"{run.infra_error} (tried {self.retries + 1} times)"
            return run
        finally:
            self.release(slot)

    def _grade_once(self, prepared: Prepared, request: GradeRequest, slot: Slot) -> GradeRun:
        try:
            if self.capabilities.slots:
                return self.inner.grade(prepared, request, slot=slot)  # type: ignore[call-arg]
            if slot.devices:
                # a backend without warm per-slot state: pin the grader to its GPUs by environment
                request = replace(request,
                                  env={**request.env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, slot.devices))})
            return self.inner.grade(prepared, request)
        except InfraError as e:
            return GradeRun(reward=None, returncode=-1, timed_out=False, seconds=0.0, output="", infra_error=str(e))

    def cancel_all(self) -> int:
        cancel = getattr(self.inner, "cancel_all", None)
        return int(cancel() or 0) if cancel is not None else 0

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            forget(self.inner)


def grade_all(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """fn over items with `workers` threads, results in the items' order (e.g. Evaluator.evaluate
    over candidates; the backend's slots decide how many really run at once)."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(fn, items))
