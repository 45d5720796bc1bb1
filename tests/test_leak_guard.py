"""A leak guard that looks for leaks: hidden-test material pesflow would copy into a prompt is
withheld (and journaled), a line the model wrote itself or the public package holds is not.

Whole searches here run the real OpenAI SDK against the scripted server on the toy package.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent.rundir import journal
from agent.readers.audit import audit
from agent.llm.leak_guard import WITHHELD, LeakGuard
from agent.search.session import start_run
from evaluator.task import load_task
from tests.conftest import FIXTURES, needs_root, toy_tasks_root
from tests.llm_server import Reply, Request, ScriptedLLMServer
from tests.test_loop import V_CLOSED, V_WRONG, config, fake_keys  # noqa: F401 - the keys fixture

SHARED = "    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0"  # the reference's line, also in tests/
CANARY = "PESFLOW-CANARY-b41e-reason-copied-from-the-hidden-grader"


@pytest.fixture
def toy_pkg(tmp_path) -> Path:
    pkg = tmp_path / "tasks/kfc/toy-sum/task"
    shutil.copytree(FIXTURES / "kfc/toy-sum/task", pkg)
    return pkg


def test_screen_withholds_secret_lines_and_the_anchor_but_not_the_models_own(toy_pkg):
    (toy_pkg / "tests/ref_speedup.txt").write_text("3.85\n")
    (toy_pkg / "tests/secret.txt").write_text(f"{CANARY}\n{SHARED}\n")
    guard = LeakGuard(load_task(str(toy_pkg)))
    prompt = f"intro\n- r01-c1: FAILED: {CANARY}\n```python\n{SHARED}\n```\nspeedup 3.85x\nspeedup 3.850x and 13.85\n"
    s = guard.screen(prompt)
    assert CANARY not in s.text and SHARED not in s.text and "3.85x" not in s.text
    assert "speedup 3.850x and 13.85" in s.text  # other numbers that merely contain the digits
    assert [w["what"] for w in s.withheld] == ["a line of the hidden tests/", "a line of the hidden tests/", "the task's anchor"]
    assert all(w["source"] in ("tests/secret.txt", "tests/ref_speedup.txt") and len(w["line_sha256"]) == 64 for w in s.withheld)
    assert s.text.count(WITHHELD) == 3
    guard.learn(f"Here is the code:\n{SHARED}\n")  # the model wrote the line itself
    again = guard.screen(prompt)
    assert SHARED in again.text and CANARY not in again.text


def test_public_lines_are_never_secret(toy_pkg):
    public = (toy_pkg / "environment/repo/toy/kernel.py").read_text().splitlines()
    line = max(public, key=len)
    (toy_pkg / "tests/copy.txt").write_text(line + "\n")
    assert LeakGuard(load_task(str(toy_pkg))).screen(line).withheld == []


def engineer(req: Request) -> Reply:
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        return Reply(text=json.dumps({"children": {}, "memory": ["closed forms beat loops"]}))
    if "You are the planner" in user:
        return Reply(text="Find the closed form.")
    child = 1 if "You are executor 2 of" in user else 0
    return Reply(text=f"toy/kernel.py\n```python\n{V_WRONG if child else V_CLOSED}```\n")


@needs_root
def test_a_reference_sharing_a_line_with_tests_is_found_and_the_audit_is_clean(tmp_path, cache_dir):
    root = tmp_path / "tasks"
    pkg = toy_tasks_root(root)
    grade = pkg / "tests/grade.py"
    grade.write_text(grade.read_text() + f"\n\ndef _reference(n):\n    n -= 1\n{SHARED}\n")
    with ScriptedLLMServer(engineer) as server:
        run_dir, status = start_run(config(tmp_path, cache_dir, server, **{"loop.rounds": 2}), "kfc/toy-sum", [str(root)])
        bodies = [json.dumps(r.body) for r in server.requests]
    assert status == "finished"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["best"]["id"] == "r01-c0" and run["best"]["reward"] > 0  # the reference, found and kept
    # round 2 shows the model its own best code, the shared line included, and nothing was withheld
    assert any(SHARED.strip() in b for b in bodies[3:])
    events = journal.read(run_dir / "journal.jsonl")
    assert not [e for e in events if e["kind"] == "withheld"]
    rep = audit(run_dir)
    assert rep.violations == [], rep.violations


@needs_root
def test_hidden_material_pesflow_would_copy_into_a_prompt_is_withheld(tmp_path, cache_dir):
    root = tmp_path / "tasks"
    pkg = toy_tasks_root(root)
    (pkg / "tests/canary.txt").write_text(CANARY + "\n")
    grade = pkg / "tests/grade.py"
    # a grader that names its failures with a line of its own hidden files
    grade.write_text(grade.read_text().replace('hard.append("correctness_failed")', f'hard.append({CANARY!r})'))
    with ScriptedLLMServer(engineer) as server:
        run_dir, status = start_run(config(tmp_path, cache_dir, server, **{"loop.rounds": 2, "evaluator.grader": "hidden"}),
                                    "kfc/toy-sum", [str(root)])
        bodies = [json.dumps(r.body) for r in server.requests]
    assert status == "finished"
    assert bodies and not any(CANARY in b for b in bodies)  # never sent
    events = journal.read(run_dir / "journal.jsonl")
    withheld = [e["data"] for e in events if e["kind"] == "withheld"]
    assert withheld and all(i["source"] == "tests/canary.txt" for w in withheld for i in w["items"])
    calls = [e["data"] for e in events if e["kind"] == "llm_call"]
    assert all(c.get("text") is not None for c in calls)  # the calls went ahead, without the line
    assert any(WITHHELD in m["content"] for c in calls for m in c.get("messages") or [])
    assert not any(CANARY in p.read_text() for p in run_dir.glob("rounds/**/*prompt.md"))
    rep = audit(run_dir)
    assert rep.violations == [] and any("withheld" in f for f in rep.findings), rep
