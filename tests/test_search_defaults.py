"""The search's defaults put every failure in front of the model that can fix it (issue 49): with no
loop setting at all, a child that raises gets its own fix turn (its error and its code as a diff
against the parent in the executor's request), a child that repeats a program the search has is
asked again instead of taking its slot, the planner of a round selected before the last one was
graded sees that round's plan in flight, and later planners see every attempt in one table. Real
openai SDK against the scripted server, the toy package with its loop graded in the sandbox; and
the pure pieces (history, inspirations, fix rules, prompt words) on their own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.config import load_config
from agent.population.database import Solution
from agent.search import history
from agent.search.fixes import needs_fix
from agent.search.prompts import verdict_text
from agent.search.protocol import ENGINEER, LINE
from agent.search.roles import Context, default_lesson, executor_prompt
from agent.search.session import replay_run, start_run
from agent.search.steps import inspirations_for, with_default_lessons
from evaluator.verdict import Status, Verdict
from tests.conftest import needs_root
from tests.llm_server import Reply, Request, ScriptedLLMServer
from tests.test_feedback_search import V_CLOSED, V_TABLE, loop_package

V_GENERATOR = "def sum_squares(n):\n    return sum(i * i for i in range(n))\n"
PLAN_A = "Plan A: precompute a table of the squares."
PLAN_B = "Plan B: a closed form, since a table is already being tried."


def _scope_code(text: str) -> str:
    m = re.search(r"### toy/kernel.py\n```python\n(.*?)\n```", text, re.S)
    return m.group(1) if m else ""


def engineer(req: Request) -> Reply:
    """Acts only on what it is shown: its own error (a fix turn), a plan in flight (another plan),
    a duplicate named (another program)."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+(?:-f\d)?):", user, re.M)
        return Reply(text=json.dumps({"children": {i: "tried" for i in ids}, "memory": ["tables raise"]}))
    if "You are the planner" in user:
        flying = user.split("# Plans already in flight", 1)[1].split("\n# ", 1)[0]
        return Reply(text=PLAN_B if PLAN_A in flying else PLAN_A)
    if "is the same program as baseline" in user:
        return Reply(text=f"toy/kernel.py\n```python\n{V_GENERATOR}```\n")
    if "Your code was graded, and it failed" in user:
        fixed = "BLOCK=64" in user and "```diff" in user
        return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED if fixed else V_TABLE}```\n")
    if "You are executor 2 of" in user:  # the second executor writes the parent again, re-spelt
        return Reply(text=f"toy/kernel.py\n```python\n# the same loop, commented\n{_scope_code(user)}\n```\n")
    return Reply(text=f"toy/kernel.py\n```python\n{V_TABLE}```\n")


@pytest.fixture(autouse=True)
def fake_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines()]


def _population(run_dir: Path) -> dict[str, dict]:
    state = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    return {s["id"]: s for s in state["population"]["solutions"]}


@needs_root
def test_with_no_setting_a_failing_child_is_fixed_and_planners_see_what_is_in_flight(tmp_path, cache_dir):
    root = tmp_path / "tasks"
    loop_package(root)
    with ScriptedLLMServer(engineer) as server:
        cfg = load_config(sets=["llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}", "loop.rounds=3",
                                f"run.out={tmp_path / 'traces'}", "run.quiet=true", f"evaluator.local.cache_dir={cache_dir}",
                                "llm.timeout_sec=20", "loop.score_final_with_hidden=false"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
        requests = [r.body for r in server.requests]
    assert status == "finished"
    pop, events = _population(run_dir), _events(run_dir)
    # the child that raised got its own turn: the error and its code as a diff in an executor's request
    assert pop["r01-c0"]["status"] == "hard_fail" and pop["r01-c0-f1"]["parent_id"] == "r01-c0"
    assert pop["r01-c0-f1"]["status"] == "ok"
    fix_prompt = (run_dir / "rounds/01/executor/r01-c0-f1/prompt.md").read_text()
    assert "BLOCK=64" in fix_prompt and "```diff" in fix_prompt and "+def _table(n):" in fix_prompt
    executor_asks = [json.dumps(b) for b in requests if "You are executor" in json.dumps(b)]
    assert any("BLOCK=64" in a for a in executor_asks)
    # the child that repeated its parent was asked again, named the program it repeats, and took its slot with new code
    tags = [e["data"]["tag"] for e in events if e["kind"] == "llm_call"]
    assert "r1/c1/resample1" in tags
    assert pop["r01-c1"]["duplicate_of"] is None and "sum(i * i for i in range(n))" in pop["r01-c1"]["files"]["toy/kernel.py"]
    assert "is the same program as baseline" in (run_dir / "rounds/01/executor/r01-c1/repair_1_prompt.md").read_text()
    # round 2 was selected before round 1 was graded: its planner saw round 1's plan in flight, and planned otherwise
    p1, p2 = (run_dir / "rounds/01/planner/prompt.md").read_text(), (run_dir / "rounds/02/planner/prompt.md").read_text()
    assert p1 != p2 and PLAN_A in p2.split("# Plans already in flight", 1)[1]
    plans = {e["data"]["round"]: e["data"]["plan"] for e in events if e["kind"] == "plan"}
    assert plans[1] == PLAN_A and plans[2] == PLAN_B
    # round 3's planner sees round 1's attempts in the table, each against its parent
    p3 = (run_dir / "rounds/03/planner/prompt.md").read_text()
    table = p3.split("# Every attempt so far", 1)[1].split("\n# ", 1)[0]
    assert "- r01-c0 (from baseline): FAILED" in table and "- r01-c0-f1 (from r01-c0): correct" in table
    assert "Plan A: precompute a table of the squares." in table
    # and it all replays, the same population from the journal alone
    dest, again, _ = replay_run(run_dir, out=tmp_path / "replay")
    assert again == "finished" and _population(dest).keys() == pop.keys()


def _sol(id_: str, parent: str | None, round_: int, **kw) -> Solution:
    return Solution(id=id_, parent_id=parent, island=0, round=round_, files={"a.py": id_}, content_hash=id_,
                    status=kw.pop("status", "ok"), **kw)


def test_the_history_table_says_each_attempt_against_its_parent_newest_first():
    attempts = [_sol("r01-c0", "baseline", 1, speedup=1.333, plan="## Plan\n1. **Tile** the loop by 4 rows."),
                _sol("r01-c1", "baseline", 1, status="hard_fail", hard_fail_reasons=["correctness_failed"], plan="x"),
                _sol("r02-c0", "r01-c0", 2, status="no_code", plan="Vectorize the inner product."),
                _sol("r02-c1", "r01-c0", 2, duplicate_of="r01-c0", plan="Vectorize the inner product.")]
    rows = history.table(attempts, 3).splitlines()
    assert rows[0].startswith("- r02-c1 (from r01-c0): same program as r01-c0")
    assert rows[1] == "- r02-c0 (from r01-c0): no usable code; plan: Vectorize the inner product."
    assert rows[2] == "- r01-c1 (from baseline): FAILED: correctness_failed; plan: (no plan)"
    assert rows[3] == "- ... and 1 older attempt(s)"
    assert history.table(attempts, 8).splitlines()[-1] == "- r01-c0 (from baseline): correct, 1.333x; plan: Tile the loop by 4 rows."
    assert history.applied_before(attempts, 3, 2) == attempts[:2]  # round 3 is selected once round 1 is applied
    assert history.table(attempts, 0) == ""


def test_an_anchor_gate_is_never_named_to_a_model():
    s = _sol("r01-c0", "baseline", 1, status="hard_fail", hard_fail_reasons=["speedup_not_above_anchor", "correctness_failed"])
    said = verdict_text(s, LINE) + history.outcome(s)
    assert "anchor" not in said and "correctness_failed" in said
    from evaluator.trust.findings import AT_REWARD_CAP, Trust

    held = Trust(needs_review=True, reasons=[f"{AT_REWARD_CAP}: 7.0 >= 6.25"])
    for trust in (held, held.model_copy(update={"review": {"decision": "reject", "why": "unsure"}})):
        words = verdict_text(_sol("r02-c0", "r01-c0", 2, speedup=7.0, trust=trust), ENGINEER)
        assert "cap" not in words and "6.25" not in words, words
    assert "held for a person's review" in words and "7.0" not in words


def test_inspirations_leave_out_the_parent_s_own_line_and_put_the_best_first():
    from agent.population.database import Population, PopulationConfig

    pop = Population(PopulationConfig(), {"a.py": "base"})
    pop.add(_sol("baseline", None, 0, speedup=1.0))
    for s in (_sol("r01-c0", "baseline", 1, speedup=1.2), _sol("r02-c0", "r01-c0", 2, speedup=1.5),
              _sol("r02-c1", "baseline", 2, speedup=1.1), _sol("r03-c0", "baseline", 3, speedup=2.0)):
        pop.add(s)
    chosen = [pop.get(i) for i in ("baseline", "r01-c0", "r02-c1", "r03-c0")]
    assert [s.id for s in inspirations_for(pop, pop.get("r02-c0"), chosen)] == ["r03-c0", "r02-c1"]


def test_fix_turns_go_to_failures_by_default_and_to_slow_children_only_when_asked():
    parent = _sol("r01-c0", "baseline", 1, speedup=2.0)
    slow = Verdict(task="t", mode="candidate", backend="local", grader="dev", status=Status.ok, speedup=1.5)
    failed = Verdict(task="t", mode="candidate", backend="local", grader="dev", status=Status.hard_fail, hard_fail_reasons=["correctness_failed"])
    assert needs_fix(failed, parent, ["failed"]) == "it failed" and needs_fix(slow, parent, ["failed"]) is None
    assert needs_fix(slow, parent, ["failed", "slower"]) == "it is not faster than its parent"
    assert needs_fix(failed, parent, ["slower"]) is None
    assert load_config().loop.fix_turns == 1 and load_config().loop.fix_on == ["failed"] and load_config().loop.patience


def test_a_child_without_code_says_so_once():
    s = _sol("r01-c1", "baseline", 1, status="no_code", lessons="the SEARCH text was not found")
    assert default_lesson(s) == ""
    (kept,), _ = with_default_lessons([s])  # the lessons a round without a summarizer keeps
    assert verdict_text(kept, ENGINEER) == "no usable code: the SEARCH text was not found"
    # a summarizer's lesson that repeats the words is not said twice either
    again = kept.model_copy(update={"lessons": "no usable code: " + kept.lessons})
    assert verdict_text(again, ENGINEER) == "no usable code: the SEARCH text was not found"


def test_the_executor_sees_its_parent_s_grading_and_the_best_s_figures_per_workload():
    ctx = Context(instruction="do it", title="t", scope=["a.py"])
    parent = _sol("r01-c0", "baseline", 1, speedup=1.2, dev_details=["workload n=64: baseline 2 ms, candidate 1 ms (2x)"])
    best = _sol("r02-c0", "r01-c0", 2, speedup=3.0, dev_details=["workload n=64: baseline 2 ms, candidate 0.5 ms (4x)"])
    prompt = executor_prompt(ctx, parent, "a plan", 0, 2, [], best)
    assert "# The parent's grading (r01-c0)" in prompt and "candidate 1 ms (2x)" in prompt
    assert "the best so far (r02-c0), per workload:" in prompt and "candidate 0.5 ms (4x)" in prompt
