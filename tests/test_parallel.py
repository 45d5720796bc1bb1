"""Parallel grading on the toy package: CPU gradings side by side, GPU gradings one per device,
infrastructure failures retried once and then reported, never blamed on the candidate.

Each candidate sleeps at import and reports, through the toy grader's PROBE, the wall-clock
interval it ran in and the GPUs it was given; overlaps are read from those real intervals.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from evaluator.backends.base import GradeRequest, InfraError
from evaluator.backends.local import LocalBackend
from evaluator.config import DockerConfig, EvaluatorConfig, LocalConfig, TrustConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.parallel import ParallelBackend, Slot, device_groups, grade_all
from evaluator.task import load_task
from evaluator.verdict import Status
from tests.conftest import FIXTURES, needs_root
from tests.test_docker_backend import engine_url  # noqa: F401  (the engine fixture, skipping without one)

KERNEL = "toy/kernel.py"
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"


def timed(i: int, sleep: float = 0.8) -> str:
    return (FAST + "import os, time\n_t0 = time.time()\n"
            f"time.sleep({sleep})\nPROBE = [{i}, _t0, time.time(), os.environ.get('CUDA_VISIBLE_DEVICES')]\n")


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def test_device_groups_are_disjoint_and_whole():
    assert device_groups([0, 1, 2, 3], 2) == [(0, 1), (2, 3)]
    assert device_groups([0, 1, 2], 2) == [(0, 1)]
    assert device_groups([0], 2) == []


def test_slots_for_gpu_tasks_keep_their_devices_and_wait_for_them(toy_package):
    toml = toy_package / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 0", "gpus = 1"))
    task = load_task(str(toy_package))
    pb = ParallelBackend(LocalBackend(), workers=4, gpu_devices=[0, 1])
    a, b = pb.acquire(task), pb.acquire(task)
    assert (a, b) == (Slot(0, (0,), 1), Slot(1, (1,), 1))
    got: list[Slot] = []
    t = threading.Thread(target=lambda: got.append(pb.acquire(task)))
    t.start()
    t.join(0.3)
    assert t.is_alive() and not got  # both GPUs busy: the third waits, whatever `workers` says
    pb.release(a)
    t.join(5)
    assert got == [Slot(0, (0,), 1)]  # the freed worker, with the GPU its container was made with
    assert pb.acquire(task, on_cpu=True) == Slot(2, (), 0)  # a GPU task checked on the CPU takes no GPU
    with pytest.raises(InfraError, match="needs 1 GPU.*only 0"):
        ParallelBackend(LocalBackend(), gpu_devices=[]).acquire(task)


@needs_root
@pytest.mark.parametrize("workers", [1, 2])
def test_cpu_gradings_run_side_by_side_with_workers(cache_dir, tmp_path, workers):
    cfg = EvaluatorConfig(workers=workers, local=LocalConfig(cache_dir=str(cache_dir)))
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path)
    ev.prepare(ev.task("kfc/toy-sum"))
    vs = grade_all(lambda i: ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: timed(i)}), grader="hidden"),
                   range(3), workers=3)
    assert [v.raw["probe"][0] for v in vs] == [0, 1, 2] and all(v.correct for v in vs)
    assert most_at_once([(v.raw["probe"][1], v.raw["probe"][2]) for v in vs]) == workers
    assert ev.backend.peak == workers


@needs_root
@pytest.mark.parametrize("devices,together", [([0], 1), ([0, 1], 2)])
def test_gpu_gradings_hold_their_device_for_the_whole_grading(cache_dir, tmp_path, devices, together):
    """A GPU task (the toy package, told it declares gpus = 1; its grader does not care) with 3 workers."""
    task = load_task("kfc/toy-sum", [FIXTURES]).model_copy(deep=True)
    task.toml.environment.gpus = 1  # same package content: the prepared layer is shared with the other tests
    pb = ParallelBackend(LocalBackend(LocalConfig(cache_dir=str(cache_dir))), workers=3, gpu_devices=devices)
    prepared = pb.prepare(task)

    def one(i: int):
        out = tmp_path / f"c{i}"
        out.mkdir()
        req = GradeRequest(files={KERNEL: timed(i, 0.6)}, grader="hidden", env={}, reviewer_files={}, timeout=60, out_dir=out)
        return pb.grade(prepared, req).reward["probe"]

    probes = grade_all(one, range(3), workers=3)
    assert most_at_once([(p[1], p[2]) for p in probes]) == together
    assert {p[3] for p in probes} == {str(d) for d in devices}  # each grading was pinned to its GPU


class Flaky:
    """The local backend failing its first `fail_grades` gradings and `fail_prepares` prepares
    the way a container engine does (an InfraError, or a run that reports infra_error)."""

    def __init__(self, inner: LocalBackend, fail_grades: int, fail_prepares: int = 0, as_run: bool = False):
        self.inner, self.name = inner, "flaky"
        self.fail_grades, self.fail_prepares, self.as_run = fail_grades, fail_prepares, as_run
        self.grades = self.prepares = 0

    def prepare(self, task):  # noqa: ANN001, ANN201
        self.prepares += 1
        if self.prepares <= self.fail_prepares:
            raise InfraError("image build failed: the engine went away")
        return self.inner.prepare(task)

    def baseline_text(self, prepared, rel):  # noqa: ANN001, ANN201
        return self.inner.baseline_text(prepared, rel)

    def grade(self, prepared, request):  # noqa: ANN001, ANN201
        self.grades += 1
        if self.grades <= self.fail_grades:
            if self.as_run:
                run = self.inner.grade(prepared, request)
                run.infra_error = "the grading container died while grading (the kernel's OOM killer)"
                return run
            raise InfraError("the container engine failed while grading: connection reset")
        return self.inner.grade(prepared, request)

    def close(self) -> None:
        pass


@needs_root
@pytest.mark.parametrize("as_run", [False, True])
def test_infrastructure_failures_are_retried_once_then_reported(cache_dir, tmp_path, as_run):
    local = LocalBackend(LocalConfig(cache_dir=str(cache_dir)))
    once = Flaky(local, fail_grades=1, fail_prepares=1, as_run=as_run)
    quiet = EvaluatorConfig(trust=TrustConfig(enabled=False))  # the gradings counted are the grader's alone (no probes)
    ev = Evaluator(quiet, tasks_roots=[FIXTURES], backend=ParallelBackend(once, retries=1), log_root=tmp_path)
    v = ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")
    assert v.status == Status.ok and v.correct and (once.prepares, once.grades) == (2, 2)
    always = Flaky(local, fail_grades=99, as_run=as_run)
    ev = Evaluator(quiet, tasks_roots=[FIXTURES], backend=ParallelBackend(always, retries=1), log_root=tmp_path)
    v = ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")
    assert v.status == Status.infra_error and v.reward == 0.0 and always.grades == 2
    assert "tried 2 times" in v.message and v.hard_fail_reasons == []  # never the candidate's failure


@pytest.mark.slow
def test_docker_workers_grade_in_their_own_warm_containers(engine_url, tmp_path):  # noqa: F811
    cfg = EvaluatorConfig(backend="docker", workers=2, docker=DockerConfig(base_url=engine_url, cache_dir=str(tmp_path / "c")))
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path / "logs")
    try:
        ev.prepare(ev.task("kfc/toy-sum"))
        vs = grade_all(lambda i: ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: timed(i, 1.5)}),
                                             grader="hidden"), range(4), workers=4)
        assert all(v.correct for v in vs), [v.message for v in vs]
        assert most_at_once([(v.raw["probe"][1], v.raw["probe"][2]) for v in vs]) == 2
        names = {(Path(v.log_dir) / "limits.json").read_text().split('"container": ')[1].split(",")[0] for v in vs}
        assert len(names) == 2  # one warm container per worker, each reused
    finally:
        ev.close()
