"""A deferred grading's probes, run later on what the grading kept (evaluator/trust/later.py).

Where the guard is inside the one grading (a timed figure), a child under the search's best has
its probes deferred; picked as a parent, its probes run alone in a fresh sandbox on the calls the
grading kept, instead of a second grading. What they find must be what they would have found at
once: a cheat that answers the timed calls otherwise than anyone else is suspect, an honest one is
not, and a kept input changed in between is the candidate's doing, not a pass. The toy package
graded for real; the plausibility line is lifted so that a cheat's figure can be deferred at all
(a figure held for a person never is)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.candidate import CandidateSource
from evaluator.trust.later import KEPT_FILE
from tests.conftest import FIXTURES, needs_root
from tests.test_docker_backend import docker_config, engine_url  # noqa: F401 (fixture)
from tests.test_trust_invariants import HONEST, TIMED

pytestmark = needs_root

BAR = 1e9  # every correct figure is under the search's best: each grading's probes wait


@pytest.fixture(scope="module")
def deferring(cache_dir, tmp_path_factory):
    from evaluator.config import EvaluatorConfig, LocalConfig, TrustConfig
    from evaluator.evaluation import Evaluator

    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir)),
                                   trust=TrustConfig(defer_below_best="always", plausibility_ratio=1e6, review_at_reward_cap=False)),
                   tasks_roots=[FIXTURES], log_root=tmp_path_factory.mktemp("later"))
    yield ev
    ev.close()


def graded(ev, code: str, **kw):
    return ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": code}), grader="hidden", **kw)


def deferred(ev, code: str):
    v = graded(ev, code, result_bar=BAR)
    shown = (v.status, v.speedup, v.trust.reasons, v.trust.checks.get("probes"))
    assert v.correct and v.trust.deferred and not v.trust.suspect, shown
    assert v.trust.checks["probes"] == {**v.trust.checks["probes"], "ran": False, "deferred": True}, shown
    assert (Path(v.log_dir) / KEPT_FILE).is_file()
    return v


def later(ev, code: str, scored):
    v = graded(ev, code, scored=scored)
    probes = v.trust.checks.get("probes") or {}
    # the probes alone, in a fresh sandbox, on the grading's kept calls: no second grading
    assert v.trust.checks["later"] == {"scored": scored.log_dir}, v.trust.checks
    assert probes.get("ran") and probes.get("sandbox") == "fresh", probes
    assert not (Path(v.log_dir) / "logs" / "verifier" / "reward.json").exists()
    # the figures are the scored grading's, exactly
    assert (v.speedup, v.reward, v.grader_seconds, v.correct) == (scored.speedup, scored.reward, scored.grader_seconds, True)
    assert not v.trust.deferred
    return v


@pytest.mark.parametrize("spelling", ["calls_counted", "caller_by_warnings"])
def test_a_cheat_whose_probes_waited_is_suspect_when_they_run_later(deferring, spelling):
    v = later(deferring, TIMED[spelling], deferred(deferring, TIMED[spelling]))
    assert v.trust.suspect and "knows_who_asks" in v.trust.families, (v.trust.reasons, v.trust.checks.get("probes"))


@pytest.mark.parametrize("name", ["closed_form", "joined_pool"])
def test_an_honest_child_whose_probes_waited_passes_them_later(deferring, name):
    v = later(deferring, HONEST[name], deferred(deferring, HONEST[name]))
    assert not v.trust.suspect and not v.trust.needs_review, v.trust.reasons
    assert v.trust.checks["probes"].get("asked", 0) >= 1 and v.trust.checks["probes"].get("compared", 0) >= 1


def test_a_kept_input_changed_before_the_later_probes_is_suspect_and_nothing_kept_is_a_whole_grading(deferring):
    code = HONEST["closed_form"]
    scored = deferred(deferring, code)
    kept = json.loads((Path(scored.log_dir) / KEPT_FILE).read_text())
    paths = {Path(str(r.get("path"))).name for e in kept["trust_events"] if e.get("kind") == "end" for r in e.get("records") or []}
    blobs = [Path(scored.log_dir) / "trust" / p for p in paths if (Path(scored.log_dir) / "trust" / p).stat().st_size]
    assert blobs, paths
    for b in blobs:  # every kept call's last byte changed (an input's or the answer the grader got), the length kept
        data = bytearray(b.read_bytes())
        data[-1] ^= 0xFF
        b.write_bytes(bytes(data))
    v = later(deferring, code, scored)
    assert v.trust.suspect and {"probe.input_rewritten", "probe.answer_rewritten"} & set(v.trust.rules), v.trust.reasons
    # a grading that kept nothing (its folder gone, another machine) is graded again, whole
    (Path(scored.log_dir) / KEPT_FILE).unlink()
    again = graded(deferring, code, scored=scored)
    assert "later" not in again.trust.checks and (Path(again.log_dir) / "logs" / "verifier" / "reward.json").is_file()
    assert again.correct and again.trust.checks["probes"].get("ran") and not again.trust.suspect



@needs_root
def test_a_stopped_search_s_waiting_children_are_screened_on_what_they_kept_when_it_goes_on(tmp_path, cache_dir, monkeypatch):
    """The children whose probes waited at a stop are known again from the journal (what a resume
    reads): picked by the search that goes on, each is screened on what its own grading kept."""
    from agent.rundir import journal
    from agent.rundir.store import RunStore
    from agent.search.grading import Grading
    from agent.search.session import load_run, start_run
    from evaluator.evaluation import Evaluator
    from tests.conftest import toy_tasks_root
    from tests.llm_server import ScriptedLLMServer
    from tests.test_trust_search import deferring_engineer, search_config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    root = tmp_path / "tasks"
    toy_tasks_root(root)
    with ScriptedLLMServer(deferring_engineer) as server:
        cfg = search_config(tmp_path, cache_dir, server, **{"loop.rounds": 2, "loop.children": 2})
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
    assert status == "finished"
    events = journal.read(run_dir / "journal.jsonl")
    scored = {e["data"]["content_hash"]: e["data"]["verdict"] for e in events if e["kind"] == "verdict" and e["data"]["label"] == ""
              and e["data"]["verdict"]["trust"].get("deferred")}
    checked = {e["data"]["content_hash"] for e in events if e["kind"] == "verdict" and e["data"]["label"] == "parent-check"}
    state = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    sols = {s["content_hash"]: s for s in state["population"]["solutions"]}
    waiting = [h for h in scored if h not in checked and h in sols]
    assert waiting, "no child's probes were still waiting at the stop"
    _, run_cfg, task = load_run(run_dir)
    ev = Evaluator(run_cfg.evaluator, tasks_roots=[root], log_root=tmp_path / "evaluations")
    try:  # a new process's grading, as a resume makes it
        grading = Grading(ev, task, RunStore(run_dir), run_cfg.evaluator.grader)
        grading.baseline_files = dict(next(s for s in sols.values() if s["id"] == "baseline")["files"])
        grading.count_recorded(events)
        for h in waiting:
            v = grading.grade(sols[h]["files"], label="parent-check")
            assert v.trust.checks["later"] == {"scored": scored[h]["log_dir"]}, v.trust.checks
            assert v.trust.checks["probes"]["ran"] and not v.trust.suspect and v.speedup == scored[h]["speedup"]
    finally:
        ev.close()


def test_the_later_probes_run_in_a_fresh_container_on_the_docker_backend(engine_url, tmp_path_factory):  # noqa: F811
    """The same on a container engine: the probes later are a grading of their own there too."""
    from evaluator.config import TrustConfig
    from evaluator.evaluation import Evaluator

    cfg = docker_config(engine_url, tmp_path_factory.mktemp("docker-cache")).model_copy(
        update={"trust": TrustConfig(defer_below_best="always", plausibility_ratio=1e6, review_at_reward_cap=False)})
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path_factory.mktemp("docker-later"))
    try:
        cheat = later(ev, TIMED["calls_counted"], deferred(ev, TIMED["calls_counted"]))
        assert cheat.trust.suspect and "knows_who_asks" in cheat.trust.families, cheat.trust.reasons
        honest = later(ev, HONEST["closed_form"], deferred(ev, HONEST["closed_form"]))
        assert not honest.trust.suspect, honest.trust.reasons
    finally:
        ev.close()
