"""The feedback protocols in gradings and searches (issue 38): the package's own loop feedback is
its sanitizer's lines over the dev engine's products, with the count and best-so-far the search
keeps; under `engineer` a model whose only right answer depends on the candidate's own error
message fixes its child, under `benchmark` (the package's lines alone) it never sees that
message. Real openai SDK against the scripted server, the toy package graded in the sandbox."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.config import load_config
from agent.search.session import replay_run, start_run
from evaluator.candidate import CandidateSource
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import Evaluator
from tests.conftest import needs_root, toy_tasks_root
from tests.llm_server import Reply, Request, ScriptedLLMServer

pytestmark = needs_root

CANARY = "hidden workload 77: n = 424242 must give 25446960908960 exactly"

# The benchmark's form of a package loop: submit.sh names its cap, the sanitizer reads /logs/loop
# (its count, best.json, dev/) and prints a fixed set of lines. Written here for the toy.
SUBMIT = "#!/usr/bin/env bash\n# the toy's loop, in the benchmark's form\nMAX_SUBMISSIONS=16\npython3 \"$HERE/sanitize_feedback.py\"\n"
SANITIZER = '''#!/usr/bin/env python3
"""The toy's in-session feedback in the benchmark's form: reads /logs/loop, prints fixed lines."""
import json
from pathlib import Path

LOOP = Path("/logs/loop")
MAX = 16


def read(p, default):
    try:
        return json.loads(p.read_text())
    except Exception:
        return default


try:
    k = int((LOOP / "count").read_text().strip())
except Exception:
    k = 0
state = read(LOOP / "dev" / "verifier_state.json", {})
reward = read(LOOP / "dev" / "reward.json", {})
best = read(LOOP / "best.json", None)
print("submission %d/%d" % (k, MAX))
print("correctness: " + ("PASS" if state.get("correctness_ok") else "FAIL"))
if not state.get("correctness_ok"):
    print("failing_invariant: output_matches_reference")
print("dev_speedup: %.4g" % float(reward.get("speedup") or 0))
print("best_so_far: " + ("submission %s, dev_speedup %.4g" % (best["submission"], best["speedup"]) if best else "none"))
print("remaining: %d" % (MAX - k))
'''


def loop_package(root: Path, plant: bool = False, check_message: str | None = None) -> Path:
    """The toy with a loop in the benchmark's form, its dev engine made to print the candidate's
    traceback and keep a verifier state (as the benchmark's engines do); `plant`: a failing check
    whose message quotes a line of tests/ too."""
    pkg = toy_tasks_root(root)
    loop = pkg / "environment" / "loop"
    (loop / "submit.sh").write_text(SUBMIT)
    (loop / "sanitize_feedback.py").write_text(SANITIZER)
    grade = loop / "private" / "dev_tests" / "grade.py"
    src = grade.read_text()
    src = src.replace('    hard.append("import_failed")\n', '    hard.append("import_failed")\n    import traceback; traceback.print_exc()\n')
    extra = ('json.dump({"correctness_ok": not [h for h in hard if h != "speedup_not_above_baseline"]}, '
             'open(os.path.join(log, "verifier_state.json"), "w"))\n')
    if plant or check_message:
        extra += ('if hard:\n    json.dump({"cases": [{"name": "dev_case_7", "passed": False, "message": %r}]}, '
                  'open(os.path.join(log, "correctness_results.json"), "w"))\n' % (check_message or CANARY))
    grade.write_text(src + extra)
    (pkg / "tests" / "hidden_workloads.txt").write_text(CANARY + "\n")
    return pkg


# its message is built at run time: the code the model sees never holds BLOCK=64 nor K9Q
V_TABLE = """def _table(n):
    raise RuntimeError("the table must be built with BLOCK=%d (code %s)" % (8 * 8, "K" + str(9) + "Q"))


def sum_squares(n):
    return _table(n)
"""
V_CLOSED = """def sum_squares(n):
    n -= 1
    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0
"""


@pytest.fixture(scope="module")
def loop_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("loop-tasks")
    loop_package(root)
    return root


def test_the_package_loop_feedback_is_its_sanitizer_s_lines_with_the_search_s_count(loop_root, tmp_path, cache_dir):
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[str(loop_root)], log_root=tmp_path)
    try:
        task = ev.task("kfc/toy-sum")
        assert task.loop_cap == 16
        best = {"submission": 2, "reward": 0.0, "speedup": 1.5, "tree": ""}
        bad = ev.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": V_TABLE}), grader="dev",
                          loop={"count": 3, "best": best})
        assert bad.feedback == ("submission 3/16\ncorrectness: FAIL\nfailing_invariant: output_matches_reference\n"
                                "dev_speedup: 0\nbest_so_far: submission 2, dev_speedup 1.5\nremaining: 13"), bad.feedback
        assert any("toy/kernel.py" in ln for ln in bad.diagnostics)
        assert bad.diagnostics[-1] == "RuntimeError: the table must be built with BLOCK=64 (code K9Q)", bad.diagnostics
        good = ev.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": V_CLOSED}), grader="dev",
                           loop={"count": 4, "best": best})
        # correct and a greater dev reward than the best so far: it is the best, as submit.sh keeps it
        assert good.correct and "correctness: PASS" in good.feedback and "submission 4/16" in good.feedback
        assert ("best_so_far: submission 4" in good.feedback) == (float(good.reward or 0) > 0), good.feedback
        # the hidden grader tells the model nothing of its own
        hidden = ev.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": V_TABLE}), grader="hidden")
        assert hidden.feedback is None and hidden.diagnostics == [] and hidden.dev_details == []
    finally:
        ev.close()


V_OFF_BY_ONE = """def sum_squares(n):
    return n * (n + 1) * (2 * n + 1) // 6
"""


def fixer(req: Request) -> Reply:
    """A model whose only right answer depends on the error's text: BLOCK=64 is said nowhere else."""
    user = req.messages[-1]["content"]
    if "Your code was graded" in user:  # a fix turn: what it was shown decides
        return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED if 'BLOCK=64' in user else V_OFF_BY_ONE}```\n")
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: "tried" for i in ids}, "memory": ["tried a table"]}))
    if "You are the planner" in user:
        return Reply(text="Build the table with BLOCK=64, exactly as the error said." if "BLOCK=64" in user else "Build a table.")
    return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED if 'BLOCK=64, exactly' in user else V_TABLE}```\n")


def _search(root: Path, tmp_path: Path, cache_dir: Path, protocol: str, answer=fixer, rounds: int = 2, fix_turns: int = 0):
    with ScriptedLLMServer(answer) as server:
        cfg = load_config(sets=[f"llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}", f"loop.rounds={rounds}", f"loop.fix_turns={fix_turns}",
                                "loop.children=1", "loop.pipeline_depth=1", f"run.out={tmp_path / 'traces'}", "run.quiet=true",
                                f"evaluator.local.cache_dir={cache_dir}", "llm.timeout_sec=20", f"search.feedback={protocol}",
                                "loop.score_final_with_hidden=false"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
        requests = list(server.requests)
    assert status == "finished"
    return run_dir, requests


def _population(run_dir: Path) -> dict[str, dict]:
    state = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    return {s["id"]: s for s in state["population"]["solutions"]}


def _planner_prompt(run_dir: Path, k: int) -> str:
    return (run_dir / f"rounds/{k:02d}/planner/prompt.md").read_text()


@pytest.fixture(autouse=True)
def fake_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")


@pytest.mark.parametrize("protocol", ["engineer", "benchmark"])
def test_the_child_is_fixed_only_where_the_protocol_shows_the_error(loop_root, tmp_path, cache_dir, protocol):
    run_dir, requests = _search(loop_root, tmp_path, cache_dir, protocol)
    pop = _population(run_dir)
    first, second = pop["r01-c0"], pop["r02-c0"]
    assert first["status"] == "hard_fail" and first["feedback"].startswith("submission 2/16\n")  # the baseline was the first
    prompt = _planner_prompt(run_dir, 2)
    assert "\n".join("    " + ln for ln in first["feedback"].splitlines()) in prompt  # the package's lines as printed
    run = json.loads((run_dir / "run.json").read_text())
    assert run["config"]["search"]["feedback"] == protocol
    assert run["totals"]["scorings"]["dev_cap"] == 16 and run["totals"]["scorings"]["dev_over_cap"] is False
    assert ("# The machine the grader runs on" in prompt) == (protocol == "engineer")  # its measured ceilings
    assert (run["machine"] == "") == (protocol == "benchmark") and ("GB/s" in run["machine"]) == (protocol == "engineer")
    # the parent's profile (the baseline's loop: its own Python), engineer only
    assert ("# Where the time goes" in prompt) == (protocol == "engineer")
    assert ("limiter: python" in prompt) == (protocol == "engineer")
    if protocol == "engineer":
        assert "K9Q" in prompt and "toy/kernel.py" in prompt
        assert second["status"] == "ok" and second["speedup"] and second["speedup"] > 10
    else:
        assert "K9Q" not in json.dumps([r.body for r in requests])  # never shown
        assert "its own errors" not in prompt and "the dev engine's details" not in prompt
        assert second["status"] == "hard_fail"
    # a replay serves the same answers and verdicts: the same search
    dest, again, _ = replay_run(run_dir, out=tmp_path / "replay")
    assert again == "finished"
    assert {i: (s["content_hash"], s["status"], s["feedback"]) for i, s in _population(dest).items()} == \
        {i: (s["content_hash"], s["status"], s["feedback"]) for i, s in pop.items()}


def test_a_tests_line_in_a_failing_check_s_message_is_withheld_and_journaled(tmp_path, cache_dir):
    root = tmp_path / "planted"
    loop_package(root, plant=True)
    run_dir, requests = _search(root, tmp_path, cache_dir, "engineer")
    assert any("dev_case_7" in s.get("dev_details", [""])[0] for s in _population(run_dir).values() if s.get("dev_details"))
    assert CANARY not in json.dumps([r.body for r in requests])
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "withheld" for e in events)


@pytest.mark.parametrize("protocol", ["engineer", "benchmark"])
def test_a_failing_child_gets_a_fix_turn_with_its_own_feedback(loop_root, tmp_path, cache_dir, protocol):
    run_dir, requests = _search(loop_root, tmp_path, cache_dir, protocol, rounds=1, fix_turns=1)
    pop = _population(run_dir)
    assert pop["r01-c0"]["status"] == "hard_fail" and pop["r01-c0-f1"]["parent_id"] == "r01-c0"
    fix_prompt = (run_dir / "rounds/01/executor/r01-c0-f1/prompt.md").read_text()
    assert "Your code was graded, and it failed" in fix_prompt and "_table" in fix_prompt  # its own code, fixed
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines()]
    fixed = [e["data"] for e in events if e["kind"] == "candidate" and e["data"]["id"] == "r01-c0-f1"]
    assert fixed and fixed[0]["parent_id"] == "r01-c0"
    run = json.loads((run_dir / "run.json").read_text())
    searched = [e["data"] for e in events if e["kind"] == "verdict" and e["data"].get("label") in ("", "baseline")]
    assert len(searched) == 3 and all(d["grader"] == "dev" for d in searched)  # the baseline, the child, its fix
    assert searched[-1]["verdict"]["feedback"].startswith("submission 3/16")  # each a submission of the package's loop
    if protocol == "engineer":
        assert pop["r01-c0-f1"]["status"] == "ok" and run["best"]["id"] == "r01-c0-f1"
    else:
        assert pop["r01-c0-f1"]["status"] == "hard_fail" and "K9Q" not in fix_prompt
        assert "\n".join("    " + ln for ln in pop["r01-c0"]["feedback"].splitlines()) in fix_prompt
    dest, again, _ = replay_run(run_dir, out=tmp_path / "replay")
    assert again == "finished" and sorted(_population(dest)) == sorted(pop)


def closed_at_once(req: Request) -> Reply:
    """A model whose every child is the closed form (a 396x child in round 1)."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: "fast" for i in ids}, "memory": ["closed form"]}))
    if "You are the planner" in user:
        return Reply(text="Use the closed form.")
    return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED}```\n")


def test_a_search_that_reaches_its_target_stops_and_says_so(loop_root, tmp_path, cache_dir, capsys):
    from agent.cli import _say_stop

    with ScriptedLLMServer(closed_at_once) as server:
        cfg = load_config(sets=[f"llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}", "loop.rounds=4",
                                "loop.children=1", "loop.pipeline_depth=1", f"run.out={tmp_path / 'traces'}", "run.quiet=true",
                                f"evaluator.local.cache_dir={cache_dir}", "llm.timeout_sec=20", "loop.target=50",
                                "loop.score_final_with_hidden=false"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(loop_root)])
        calls = len(server.requests)
    run = json.loads((run_dir / "run.json").read_text())
    assert status == "finished" and run["stopped_by"] == "target_reached" and run["rounds_done"] == 1
    assert calls == 3  # planner, executor, summarizer of round 1: rounds 2-4's nine calls saved
    capsys.readouterr()
    _say_stop("run", run_dir)
    assert capsys.readouterr().err.strip() == "pesflow run: stopped by loop.target: the best reached 50.0 after round 1 of 4"


@pytest.mark.parametrize("protocol", ["engineer", "benchmark"])
def test_a_failing_dev_check_s_message_fixes_the_child_where_it_is_shown(tmp_path, cache_dir, protocol):
    """The dev engine's own message on a failing check (not an exception: a wrong answer) is what
    the fix needs: engineer shows it (the dev engine's details), the toy's loop lines do not."""
    root = tmp_path / "checks"
    loop_package(root, check_message="sum_squares(7) must be 91: the sum runs over range(n), not range(n + 1) (hint H3X)")

    def model(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            return Reply(text=json.dumps({"children": {}, "memory": []}))
        if "You are the planner" in user:
            return Reply(text="Use a closed form.")
        fixed = "Your code was graded" in user and "H3X" in user
        return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED if fixed else V_OFF_BY_ONE}```\n")

    run_dir, requests = _search(root, tmp_path, cache_dir, protocol, answer=model, rounds=1, fix_turns=1)
    pop = _population(run_dir)
    assert pop["r01-c0"]["status"] == "hard_fail"
    if protocol == "engineer":
        assert pop["r01-c0-f1"]["status"] == "ok"
    else:  # shown nothing new, the model answers the same code: no change, so nothing to grade
        assert pop["r01-c0-f1"]["status"] == "no_code" and "H3X" not in json.dumps([r.body for r in requests])


V_NATIVE = """def sum_squares(n):
    return sum(map(int.__mul__, range(n), range(n)))
"""


def test_a_dev_grading_asked_for_a_profile_says_where_the_candidate_s_time_goes(loop_root, tmp_path, cache_dir):
    """The probe's profile of the candidate on a dev input: what bounds it (native calls here, the
    baseline's own Python loop), the frozen baseline's time beside it; one line why where there is none."""
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[str(loop_root)], log_root=tmp_path)
    try:
        task = ev.task("kfc/toy-sum")
        native = ev.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": V_NATIVE}), grader="dev", profile={})
        assert native.correct and native.profile["limiter"] == "native", native.profile
        assert any(ln.startswith("the frozen baseline on the same input: ") for ln in native.profile["lines"])
        base = ev.evaluate(task, candidate=CandidateSource(files={}), grader="dev", profile={})
        assert base.profile["limiter"] == "python" and not any("frozen baseline" in ln for ln in base.profile["lines"])
        bad = ev.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": V_TABLE}), grader="dev", profile={})
        assert bad.profile["lines"] == ["(no profile: it did not pass (hard_fail): there is nothing to profile)"]
        hidden = ev.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": V_NATIVE}), grader="hidden", profile={})
        assert hidden.profile is None  # never on the hidden grader
        unasked = ev.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": V_NATIVE}), grader="dev")
        assert unasked.profile is None and unasked.dev == native.dev  # the profile moves no figure
    finally:
        ev.close()


def by_the_limiter(req: Request) -> Reply:
    """A model that plans from the profile's limiter: the closed form for a parent bound by its
    own Python, fewer calls for one bound by native calls, and a guess (a table) without a profile."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        return Reply(text=json.dumps({"children": {}, "memory": []}))
    if "You are the planner" in user:
        if "limiter: python" in user:
            return Reply(text="The parent is bound by its own Python loop: replace the loop by the closed form.")
        if "limiter: native" in user:
            return Reply(text="The parent is bound by native calls: call them less.")
        return Reply(text="No profile: guess that a table helps.")
    if "own Python loop" in user:
        return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED}```\n")
    return Reply(text=f"toy/kernel.py\n```python\n{V_NATIVE if 'native calls' in user else V_TABLE}```\n")


@pytest.mark.parametrize("protocol", ["engineer", "benchmark"])
def test_a_model_that_branches_on_the_profile_s_limiter_takes_the_right_branch(loop_root, tmp_path, cache_dir, protocol):
    run_dir, requests = _search(loop_root, tmp_path, cache_dir, protocol, answer=by_the_limiter, rounds=1)
    child = _population(run_dir)["r01-c0"]
    if protocol == "engineer":
        assert "replace the loop by the closed form" in (run_dir / "rounds/01/planner/response.md").read_text()
        assert child["status"] == "ok" and child["speedup"] > 10 and child["profile"]["limiter"] == "python"
    else:
        assert child["status"] == "hard_fail" and child["profile"] == {}
        assert "Where the time goes" not in json.dumps([r.body for r in requests])
    dest, again, _ = replay_run(run_dir, out=tmp_path / "replay")
    assert again == "finished"
    assert {i: (s["content_hash"], s["profile"]) for i, s in _population(dest).items()} == \
        {i: (s["content_hash"], s["profile"]) for i, s in _population(run_dir).items()}
