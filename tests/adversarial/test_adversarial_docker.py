"""The toy attacks again, graded on the docker backend (podman's Docker API in CI): each ends
with reward 0 and a named reason, nothing reaches the host's loopback, and the next
candidate, graded in the same warm container after its reset, gets exactly a clean verdict.

The reasons are the container's own (its pids and memory limits, the engine's timeout), so
they are checked by family rather than by the local backend's exact names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.grading_policy import BACKGROUND_PROCESS
from evaluator.limits import OUT_OF_MEMORY
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.verdict import Status
from tests.adversarial.test_adversarial import FAST, HERE, Listener, fill, summary
from tests.conftest import REPO, needs_root, policy_gist, toy_tasks_root, scores_nothing
from tests.test_docker_backend import docker_config, engine_url  # noqa: F401 (fixture)
from tests.test_modal_backend import make_evaluator, rec  # noqa: F401 (the Modal SDK's fake sandbox, a fixture)

pytestmark = [needs_root, pytest.mark.slow]
# podman's socket on this machine (CI's case): the engine's containers are this host's processes
ENGINE_IS_LOCAL = os.path.exists("/run/podman/podman.sock")

PIDS, TIMEOUT = 128, 8
# attack -> reasons of which at least one must be named (or the status, for the time limit)
DOCKER_ATTACKS = {
    "infinite_loop": {"timeout"},
    "fork_bomb": {"too_many_processes"},
    "memory_bomb": {"out_of_memory", "import_failed", "candidate_crashed"},
    "background_process": {"background_process"},
    "network": {"import_failed"},
}


@pytest.fixture(scope="module")
def adv_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("adv-docker-tasks")
    pkg = toy_tasks_root(root)
    toml = pkg / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 1024", "memory_mb = 512"))
    return root


@pytest.fixture(scope="module")
def docker_toy(engine_url, adv_root, tmp_path_factory):  # noqa: F811
    base = docker_config(engine_url, tmp_path_factory.mktemp("adv-docker-cache"), pids_limit=PIDS)
    cfg = EvaluatorConfig.model_validate({**base.model_dump(), "timeout_sec": TIMEOUT})
    ev = Evaluator(cfg, tasks_roots=[adv_root], log_root=tmp_path_factory.mktemp("adv-docker-logs"))
    clean = summary(ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden"))
    assert clean["status"] == Status.ok, clean
    yield ev, clean
    ev.close()


@pytest.fixture(scope="module")
def listener():
    lst = Listener()
    yield lst
    lst.close()


@pytest.mark.parametrize("attack", list(DOCKER_ATTACKS))
def test_toy_attack_on_docker(attack, docker_toy, listener):
    ev, clean = docker_toy
    code = fill((HERE / "toy" / f"{attack}.py").read_text(), listener, hidden=REPO / "tests")
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST + "\n" + code}), grader="hidden")
    # (a fork bomb may break podman's exec stream; the pids cgroup's count of refused forks still names it)
    assert v.status in (Status.hard_fail, Status.timeout) and scores_nothing(v), (v.status, v.message)
    named = {r.split(":")[0] for r in v.hard_fail_reasons} | ({"timeout"} if v.status == Status.timeout else set())
    assert named & DOCKER_ATTACKS[attack], (v.status, v.hard_fail_reasons)
    if attack == "fork_bomb" and ENGINE_IS_LOCAL:
        # this host sees the container's pids cgroup: stopped at its first refused fork, not at the timeout
        limits = json.loads((Path(v.log_dir) / "limits.json").read_text())
        assert limits["stopped_at_first_refused_fork"] and limits["forks_refused"] > 0, limits
    assert not listener.hits, f"{attack} reached the host's loopback: {listener.hits}"
    # the harness keeps working and the next candidate sees nothing of the attack
    assert summary(ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")) == clean


def test_one_candidate_gets_one_verdict_on_local_docker_and_modal(docker_toy, adv_root, listener, tmp_path, rec):  # noqa: F811
    """Issue 41: an honest candidate, a memory hog, a leftover process and a timeout, graded by the
    local backend and by docker (podman), get the same status, reasons and wording; Modal, given the
    same observations at its SDK's boundary (the sandbox's OOM counter and peak, the grader's list
    of processes left running), says the same again."""
    ev, _ = docker_toy
    cfg = EvaluatorConfig(timeout_sec=TIMEOUT, local=LocalConfig(max_pids=PIDS, cache_dir=str(tmp_path / "cache")))
    local = Evaluator(cfg, tasks_roots=[adv_root], log_root=tmp_path / "local")
    graded: dict[str, tuple] = {}
    try:
        for name in ("honest", "memory_bomb", "background_process", "infinite_loop"):
            code = FAST if name == "honest" else FAST + "\n" + fill((HERE / "toy" / f"{name}.py").read_text(), listener, REPO / "tests")
            cand = CandidateSource(files={"toy/kernel.py": code})
            on_docker = ev.evaluate("kfc/toy-sum", candidate=cand, grader="hidden")
            here = local.evaluate("kfc/toy-sum", candidate=cand, grader="hidden")
            assert policy_gist(on_docker) == policy_gist(here), (name, on_docker.message, here.message)
            graded[name] = policy_gist(here)
    finally:
        local.close()
    assert graded["honest"][:2] == (Status.ok, []) and not graded["honest"][3]
    assert graded["memory_bomb"][1][0] == OUT_OF_MEMORY and "512 MiB" in graded["memory_bomb"][2][OUT_OF_MEMORY]
    assert graded["background_process"][1][0] == BACKGROUND_PROCESS and graded["infinite_loop"][:2] == (Status.timeout, ["timeout"])

    facts = {"memory_bomb": {"oom": True, "peak": 1024 << 20}, "background_process": {"strays": "41:python3", "forged": "/logs/verifier/reward.json"}}
    for name, seen in facts.items():
        rec.oom, rec.peak, rec.strays, rec.forged = seen.get("oom", False), seen.get("peak"), seen.get("strays", ""), seen.get("forged", "")
        v = make_evaluator(tmp_path / f"modal-{name}").evaluate(
            "kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
        # Modal's sandbox gets the bundled toy's 1024 MiB: the sentence is the same with its figure
        assert policy_gist(v) == (graded[name][0], graded[name][1],
                                  {r: t.replace("512 MiB", "1024 MiB") for r, t in graded[name][2].items()}, True), v.message
