"""No figure computed from the anchor reaches a model (issue 49): the package loop's best-so-far is
the dev engine's own reward and speedup, as the package's submit.sh keeps them; two searches on
packages that differ only in the anchor send the same requests; `pesflow audit` fails a run whose
prompt holds a figure that depends on the anchor. Real openai SDK against the scripted server, the
toy package graded in the sandbox (its deterministic 'trace' cost: same code, same figures)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.config import load_config
from agent.llm.leak_guard import AnchorFigures, renderings
from agent.readers.audit import audit_run
from agent.search.grading import Grading
from agent.search.session import start_run
from evaluator.trust import watch
from evaluator.scoring import DevFigure, benchmark_reward, dev_figure, loop_figures
from evaluator.verdict import Verdict
from tests.conftest import needs_root
from tests.llm_server import Request, ScriptedLLMServer, scripted_search
from tests.test_feedback_search import loop_package

# the toy's loop in the benchmark's form, printing the dev reward and the best-so-far's as the
# real packages' sanitizers do (compile-cache-key-canonicalize's)
SANITIZER = '''#!/usr/bin/env python3
import json
from pathlib import Path

LOOP = Path("/logs/loop")


def read(p, default):
    try:
        return json.loads(p.read_text())
    except Exception:
        return default


k = int((LOOP / "count").read_text().strip() or 0)
state, reward = read(LOOP / "dev" / "verifier_state.json", {}), read(LOOP / "dev" / "reward.json", {})
best = read(LOOP / "best.json", None)
print("submission %d/16" % k)
print("correctness: " + ("PASS" if state.get("correctness_ok") else "FAIL"))
print("dev_speedup: %.4g" % float(reward.get("speedup") or 0))
print("dev_reward: %.4g" % float(reward.get("reward") or 0))
if best:
    print("best_so_far: submission %s, dev_speedup %.4g, dev_reward %.4g" % (best["submission"], best["speedup"], best["reward"]))
else:
    print("best_so_far: none")
'''

# three squares a step: a traced cost 2.98x under the baseline's, between both anchors and their squares
V_THREE = """def sum_squares(n):
    total = 0
    m = n - n % 3
    for i in range(0, m, 3):
        total += i * i + (i + 1) * (i + 1) + (i + 2) * (i + 2)
    for i in range(m, n):
        total += i * i
    return total
"""
V_TWO = """def sum_squares(n):
    total = 0
    for i in range(0, n - 1, 2):
        total += i * i + (i + 1) * (i + 1)
    if n % 2:
        total += (n - 1) * (n - 1)
    return total
"""


def anchored_package(root: Path, anchor: float) -> Path:
    """The toy with the benchmark's loop, its anchor (tests/ref_speedup.txt and task.toml) set;
    the dev engine's own files untouched."""
    pkg = loop_package(root)
    (pkg / "environment" / "loop" / "sanitize_feedback.py").write_text(SANITIZER)
    (pkg / "tests" / "ref_speedup.txt").write_text(f"{anchor}\n")
    toml = pkg / "task.toml"
    toml.write_text(re.sub(r"(?m)^ref_speedup = .*$", f"ref_speedup = {anchor}", toml.read_text()))
    return pkg


def _child(n: int, user: str) -> str:
    """Round 1's child is 2.98x (the best), round 2's 2x: its feedback prints the best-so-far."""
    code = V_TWO if "r01-c0" in user or "unrolling helps" in user else V_THREE
    return f"toy/kernel.py\n```python\n{code}```\n"


model = scripted_search(_child, plan="Unroll the loop.", memory=("unrolling helps",))


def search(root: Path, out: Path, cache_dir: Path) -> tuple[Path, list[Request]]:
    with ScriptedLLMServer(model) as server:
        cfg = load_config(sets=["llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}", "loop.rounds=2",
                                "loop.fix_turns=0", "loop.children=1", "loop.pipeline_depth=1", f"run.out={out}",
                                "run.quiet=true", f"evaluator.local.cache_dir={cache_dir}", "llm.timeout_sec=20",
                                "search.feedback=benchmark", "loop.score_final_with_hidden=false"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
        requests = list(server.requests)
    assert status == "finished"
    return run_dir, requests


def _feedback_lines(requests: list[Request]) -> set[str]:
    return {ln.strip() for r in requests for m in r.messages for ln in m["content"].splitlines() if "best_so_far" in ln}


@pytest.fixture(autouse=True)
def fake_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")


ANCHORS = (2.0, 1.8)  # 2.98x: above both, under both squares (no review at the reward's cap)


@pytest.fixture(scope="module")
def two_searches(tmp_path_factory, cache_dir) -> dict[float, tuple[Path, list[Request]]]:
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
        for a in ANCHORS:
            base = tmp_path_factory.mktemp(f"anchor-{a}")
            anchored_package(base / "tasks", a)
            out[a] = search(base / "tasks", base / "traces", cache_dir)
    return out


@needs_root
def test_two_searches_that_differ_only_in_the_anchor_send_the_same_requests(two_searches):
    (run_a, ra), (_, rb) = two_searches[ANCHORS[0]], two_searches[ANCHORS[1]]
    best = _feedback_lines(ra)
    # the dev engine's own figures (its reward.json), as submit.sh keeps them: the best line names
    # the highest speedup any official dev grading's engine wrote (the screen's own gradings, in
    # watched/ and diagnosed/, are no submission), with the engine's reward, never one over the anchor
    engine = [json.loads(p.read_text()).get("raw") for p in run_a.rglob("verdict.json")
              if p.parent.name not in (watch.WATCHED, watch.DIAGNOSED)]
    top = max((r for r in engine if r and r.get("speedup") is not None and r.get("mode", "candidate") != "noop"),
              key=lambda r: r["speedup"])
    said = [ln for ln in best if ln.startswith("best_so_far: submission 2, dev_speedup ")]
    assert said == ["best_so_far: submission 2, dev_speedup %.4g, dev_reward %.4g" % (top["speedup"], top["reward"])], (
        best, top)
    assert [r.body for r in ra] == [r.body for r in rb]  # byte for byte: the trace cost is deterministic


@needs_root
def test_audit_passes_the_clean_runs(two_searches):
    for a in ANCHORS:
        rep = audit_run(two_searches[a][0])
        assert rep.ok, rep.violations
        assert any("no figure computed from the anchor" in f for f in rep.findings), rep.findings


def _child_speedup(run_dir: Path, cid: str) -> float:
    state = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    return next(s["speedup"] for s in state["population"]["solutions"] if s["id"] == cid)


@needs_root
def test_audit_fails_a_run_whose_prompt_holds_the_anchored_reward(two_searches, tmp_path, cache_dir, monkeypatch):
    """The old behaviour (the best-so-far of the verdict's anchored reward): its requests move with
    the anchor, and the run it makes fails the audit."""
    def old(self, loop, v):  # noqa: ANN001 - what Grading._submitted did before issue 49
        if loop is not None and v.correct and (self.dev_best is None or float(v.reward or 0) > self.dev_best["reward"]):
            self.dev_best = {"submission": loop["count"], "reward": float(v.reward or 0), "speedup": float(v.speedup or 0), "tree": ""}

    monkeypatch.setattr(Grading, "_submitted", old)
    anchored_package(tmp_path / "tasks", ANCHORS[1])
    run_dir, requests = search(tmp_path / "tasks", tmp_path / "traces", cache_dir)
    assert [r.body for r in requests] != [r.body for r in two_searches[ANCHORS[1]][1]]
    reward = benchmark_reward(_child_speedup(run_dir, "r01-c0"), ANCHORS[1], True, False)
    assert 0 < reward < 1 and f"dev_reward {reward:.4g}" in "\n".join(_feedback_lines(requests))
    rep = audit_run(run_dir)
    assert any(f"{reward:.4g} (the benchmark reward" in x for x in rep.violations), rep.violations


# ---------------------------------------------------------------- the pure pieces
def test_the_loop_keeps_the_engine_s_own_figures_and_old_journals_still_load():
    fig = dev_figure({"reward": 4.0, "speedup": 4.0}, {"reward": 1.0, "speedup": 1.0})
    assert (fig.engine_reward, fig.engine_speedup) == (4.0, 4.0) and loop_figures(fig) == (4.0, 4.0)
    # absent fields are 0.0, as submit.sh's float(x or 0.0); none at all: no DevFigure, 0.0 each
    assert loop_figures(dev_figure({"dev_score": 3.0}, None)) == (0.0, 0.0) and loop_figures(None) == (0.0, 0.0)
    old = DevFigure.model_validate({"kind": "vs_baseline", "key": "speedup", "value": 2.5, "baseline": 1.0})
    assert loop_figures(old) == (0.0, 2.5)  # a journal from before: the engine's one figure, nothing anchored

    def event(reward: float, engine: float, ok: bool = True) -> dict:
        v = Verdict(task="t", mode="candidate", backend="local", grader="dev", status="ok" if ok else "hard_fail",
                    hard_fail_reasons=[] if ok else ["correctness_failed"], reward=reward, speedup=engine,
                    dev=DevFigure(kind="vs_baseline", key="speedup", value=engine, baseline=1.0,
                                  engine_reward=engine, engine_speedup=engine))
        return {"kind": "verdict", "data": {"grader": "dev", "verdict": v.model_dump(mode="json", exclude={"raw"})}}

    g = Grading(None, None, None, "dev")  # type: ignore[arg-type]
    # the anchored reward (first field) would pick submission 1; the engine's own picks submission 2
    g.count_recorded([event(0.9, 3.0), event(0.1, 4.0), event(0.0, 9.0, ok=False)])
    assert g.dev_best == {"submission": 2, "reward": 4.0, "speedup": 4.0, "tree": ""}


def test_anchored_figures_are_those_that_differ_between_two_anchors():
    af = AnchorFigures(anchors=[2.5])
    af.add(4.0)  # reward ln(1.6)/ln(2.5) = 0.5129; over the anchor 1.6
    af.add(2.0)  # under the anchor: a reward of 0 says nothing of it
    af.add(100.0)  # past the cap: a reward of 1 neither
    got = af.find("best_so_far: submission 2, dev_speedup 4, dev_reward 0.5129")
    assert got and got[0].startswith("0.5129"), got
    assert af.find("dev_reward 0.513 and 0.51293 and repr %r" % benchmark_reward(4.0, 2.5, True, False))
    for clean in ("dev_reward 0 and 1 and 0.0", "speedup 4.000x over the baseline", "dev_reward 0.51", "x = 0.51290001",
                  "speedup 1.6x", "a rate of 1.600"):
        assert af.find(clean) == [], clean
    # a figure the package's own engine printed is its own, whatever its value
    af.own(0.5129)
    assert af.find("dev_reward 0.5129") == []
    assert "0.5129" in renderings(0.512925) and "0.513" in renderings(0.512925)
