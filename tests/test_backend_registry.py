"""Backends found by name in one registry, and scheduled by what they declare (issue 21, B).

The backends here are small real implementations of the protocol (they grade by answering
from the request, nothing runs); what is checked is the scheduler's reading of their
declarations: the slot only to one that asks for it (never guessed from grade's signature),
no host GPU read or handed to one whose gradings bring their own, cancel_all reached from a
signal's handler.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from evaluator.backends import base, registry
from evaluator.backends.base import Capabilities, GradeRequest, GradeRun, Prepared, Slot
from evaluator.config import EvaluatorConfig
from evaluator.evaluation import make_backend
from evaluator.parallel import ParallelBackend
from evaluator.task import load_task
from tests.conftest import FIXTURES


class Answering:
    """Grades by answering: the reward is 1 and the output says what the grading was given."""

    name = "answering"

    def __init__(self, capabilities: Capabilities):
        self.capabilities = capabilities
        self.seen: list[tuple[Slot | None, dict[str, str]]] = []
        self.cancelled = 0
        self.closed = False
        self.hold: threading.Barrier | None = None  # every grading waits until all are in: they run at once

    def prepare(self, task):  # noqa: ANN001, ANN201
        return Prepared(task=task, key="k", seconds=0.0, cached=False)

    def baseline_text(self, prepared, rel):  # noqa: ANN001, ANN201
        return None

    def grade(self, prepared, request, slot=None):  # noqa: ANN001, ANN201
        self.seen.append((slot, dict(request.env)))
        if self.hold is not None:
            self.hold.wait(10)
        return GradeRun(reward={"reward": 1.0}, returncode=0, timed_out=False, seconds=0.0, output="")

    def cancel_all(self) -> int:
        self.cancelled += 1
        return 2

    def close(self) -> None:
        self.closed = True


def _request(tmp_path: Path) -> GradeRequest:
    return GradeRequest(files={}, grader="dev", env={}, reviewer_files={}, timeout=10, out_dir=tmp_path)


@pytest.fixture
def gpu_task():  # noqa: ANN201
    task = load_task("kfc/toy-sum", [FIXTURES]).model_copy(deep=True)
    task.toml.environment.gpus = 1
    return task


def test_the_built_ins_are_registered_and_an_unknown_name_lists_them():
    assert {"local", "docker", "modal", "ray"} <= set(registry.names())
    assert registry.entry("docker").capabilities.slots and registry.entry("modal").capabilities.gpus == "remote"
    with pytest.raises(ValueError, match="unknown backend 'nope'; known: local, docker, modal, ray"):
        make_backend(EvaluatorConfig(backend="nope"))


def test_the_slot_goes_only_to_a_backend_that_declares_it(tmp_path, gpu_task):
    """Both grade() signatures take `slot`: only the declaration decides (no inspect.signature)."""
    wants = Answering(Capabilities(slots=True))
    ParallelBackend(wants, gpu_devices=[5]).grade(wants.prepare(gpu_task), _request(tmp_path))
    assert wants.seen[-1][0] == Slot(0, (5,), 1) and "CUDA_VISIBLE_DEVICES" not in wants.seen[-1][1]
    plain = Answering(Capabilities())
    ParallelBackend(plain, gpu_devices=[5]).grade(plain.prepare(gpu_task), _request(tmp_path))
    assert plain.seen[-1][0] is None and plain.seen[-1][1]["CUDA_VISIBLE_DEVICES"] == "5"  # pinned by environment


def test_remote_gpus_are_neither_required_here_nor_pinned(tmp_path, gpu_task):
    remote = Answering(Capabilities(gpus="remote", slots=True))
    pb = ParallelBackend(remote, workers=3, gpu_devices=[])  # a driver without any GPU
    remote.hold, out = threading.Barrier(3), []  # three GPU gradings at once, with no GPU here

    def one() -> None:
        out.append(pb.grade(remote.prepare(gpu_task), _request(tmp_path)))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(out) == 3 and all(r.reward == {"reward": 1.0} for r in out)
    assert sorted(s.index for s, _ in remote.seen) == [0, 1, 2] and all(s.devices == () and s.gpus == 1 for s, _ in remote.seen)
    assert all("CUDA_VISIBLE_DEVICES" not in env for _, env in remote.seen)
    host = ParallelBackend(Answering(Capabilities()), gpu_devices=[])
    with pytest.raises(Exception, match="needs 1 GPU"):
        host.acquire(gpu_task)  # a host backend still needs this machine's GPUs


def test_a_registered_backend_is_made_by_name_and_cancelled_by_a_signal(tmp_path):
    made: list[Answering] = []

    @registry.register("answering-test", capabilities=Capabilities(cancel=True))
    def _make(config, hidden):  # noqa: ANN001, ANN202
        made.append(Answering(Capabilities(cancel=True)))
        return made[-1]

    try:
        pb = make_backend(EvaluatorConfig(backend="answering-test"))
        assert isinstance(pb, ParallelBackend) and pb.inner is made[0] and pb.capabilities.cancel
        assert base.cancel_all_live() >= 2 and made[0].cancelled == 1  # what the cli's signal handler calls
        pb.close()
        assert made[0].closed and base.cancel_all_live() == 0 and made[0].cancelled == 1  # closed: forgotten
    finally:
        registry._REGISTRY.pop("answering-test", None)
