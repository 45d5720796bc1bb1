"""The whole search loop, driven by the real OpenAI and Anthropic SDK clients talking HTTP to a
scripted server on 127.0.0.1, grading on the toy package in the local sandbox.

The toy grader here measures a deterministic cost (traced Python events), so the same seed
and the same script must give the same population, speedups included.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent.rundir import journal
from agent.config import load_config
from agent.search.session import NoLLMConfigured, replay_run, resume_run, start_run
from tests.conftest import REPO, needs_root, toy_tasks_root
from tests.llm_server import Reply, Request, ScriptedLLMServer

pytestmark = needs_root
ANCHOR = "2.71828"

# A ladder of ever faster sum_squares; each exact.
V_UNROLL2 = """def sum_squares(n):
    total = 0
    i = 0
    while i + 1 < n:
        total += i * i + (i + 1) * (i + 1)
        i += 2
    if i < n:
        total += i * i
    return total
"""
V_CLOSED = """def sum_squares(n):
    n -= 1
    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0
"""
V_WRONG = """def sum_squares(n):
    # a plausible but wrong closed form
    return n * n * n // 3
"""


@pytest.fixture()
def toy_root(tmp_path) -> Path:
    """The toy package with a deterministic metric, a planted canary in tests/ and an odd anchor."""
    root = tmp_path / "tasks"
    pkg = toy_tasks_root(root)
    canary = "PESFLOW-CANARY-7f3a9c-hidden-workload-never-in-a-prompt"
    (pkg / "tests" / "hidden_workloads.txt").write_text(f"{canary}\nn = 123456789 # secret size\n")
    (pkg / "tests" / "test.sh").write_text((pkg / "tests" / "test.sh").read_text() + f"\n# {canary}\n")
    (pkg / "tests" / "ref_speedup.txt").write_text(ANCHOR + "\n")
    return root


def scope_code(prompt: str) -> str:
    m = re.search(r"### toy/kernel.py\n```python\n(.*?)\n```", prompt, re.S)
    return m.group(1) if m else ""


def kernel_engineer(req: Request) -> Reply:
    """Answers as a model would, depending only on what it is asked (never on arrival order)."""
    system_and_user = "\n".join(m["content"] for m in req.messages)
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: f"lesson on {i}" for i in ids},
                                      "memory": ["closed forms beat loops", "keep results exact"]}))
    if "You are the planner" in user:
        return Reply(text="Unroll the loop, then look for a closed form.")
    if "could not be applied" in user:  # a repair: answer correctly this time
        return Reply(text=f"toy/kernel.py\n```python\n{V_UNROLL2}```\n")
    if "You are an expert performance engineer" in system_and_user or "executor" in user:
        child = int(re.search(r"You are executor (\d+) of", user).group(1)) - 1
        code = scope_code(user)
        if child == 1:  # the second executor is a weak model: wrong code, or edits that do not apply
            if "while" in code:
                return Reply(text=f"```python\n{V_WRONG}```")
            return Reply(text="toy/kernel.py\n<<<<<<< SEARCH\nthis line is not in the file\n=======\nx = 1\n>>>>>>> REPLACE\n")
        if "// 6" in code:
            return Reply(text="")  # nothing left to improve: an empty answer
        if "while" in code:
            return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED}```\n")
        old = "    for i in range(n):\n        total += i * i\n"
        new = "    i = 0\n    while i + 1 < n:\n        total += i * i + (i + 1) * (i + 1)\n        i += 2\n    if i < n:\n        total += i * i\n"
        return Reply(text=f"toy/kernel.py\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n")
    return Reply(text="?")


def config(tmp_path: Path, cache_dir: Path, server: ScriptedLLMServer, provider: str = "openai", **sets: object):
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    items = [f"llm.default={provider}:test-model", f"llm.base_url={base}", "loop.rounds=3", "loop.children=2",
             f"run.out={tmp_path / 'traces'}", "run.quiet=true", f"evaluator.local.cache_dir={cache_dir}",
             "llm.backoff_base_sec=0.01", "llm.backoff_max_sec=0.05", "llm.timeout_sec=20",
             # these tests count the children of one answer each; the defaults' fix turns and second
             # asks are pinned by tests/test_search_defaults.py
             "loop.fix_turns=0", "loop.resample_duplicates=0"]
    items += [f"{k}={v}" for k, v in sets.items()]
    return load_config(sets=items)


@pytest.fixture(autouse=True)
def fake_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdefghij")


def population_of(run_dir: Path) -> list[dict]:
    state = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    return [{k: s[k] for k in ("id", "parent_id", "island", "round", "content_hash", "status", "speedup", "duplicate_of")}
            for s in state["population"]["solutions"]]


def test_three_rounds_improve_record_failures_and_leak_nothing(toy_root, tmp_path, cache_dir):
    with ScriptedLLMServer(kernel_engineer) as server:
        run_dir, status = start_run(config(tmp_path, cache_dir, server), "kfc/toy-sum", [str(toy_root)])
        requests = list(server.requests)
    assert status == "finished"
    run = json.loads((run_dir / "run.json").read_text())
    assert list(run)[-2:] == ["status", "best"] and run["status"] == "finished"
    # the best improves as the answers improve: 1x -> unrolled (fewer traced events) -> closed form
    speedups = [b["speedup"] for b in run["best_by_round"]]
    assert speedups == sorted(speedups) and speedups[1] > 1.2 and speedups[-1] > 100 * speedups[1]
    assert run["best"]["grader"] == "hidden" and run["best"]["reward"] > 0 and run["best"]["dev_speedup"] > 100
    # failures are recorded, not lost: wrong code is a hard fail; an edit that does not apply goes
    # back to the model once, and its repaired answer (equal to child 0's) is not graded again
    pop = {s["id"]: s for s in population_of(run_dir)}
    assert len(pop) == 7 and any(s["status"] == "hard_fail" for s in pop.values())
    assert (run_dir / "rounds/01/executor/r01-c1/repair_1_prompt.md").is_file()
    assert pop["r01-c1"]["duplicate_of"] == "r01-c0"
    # a checkpoint per round, in LoongFlow's layout, and a hash chain that verifies
    for k in range(4):
        cp = run_dir / f"checkpoints/round-{k:02d}"
        assert (cp / "metadata.json").is_file() and (cp / "solutions").is_dir() and (cp / "pesflow_state.json").is_file()
    assert (run_dir / "checkpoints/round-03/best_solution.json").is_file()
    assert journal.verify(run_dir / "journal.jsonl") == []
    assert (run_dir / "final/candidate.patch").read_text().count("// 6") == 1
    assert (run_dir / "final/hidden_verdict.json").is_file()
    # nothing of tests/ nor the anchor reached any prompt
    assert requests and all("PESFLOW-CANARY" not in json.dumps(r.body) for r in requests)
    assert all("123456789" not in json.dumps(r.body) and ANCHOR not in json.dumps(r.body) for r in requests)
    # no key on disk
    for p in run_dir.rglob("*"):
        if p.is_file():
            text = p.read_text(errors="replace")
            assert "sk-test-0123456789" not in text and "sk-ant-test" not in text, p
    # the hidden grader was used once (the final score), the dev engine for the search
    assert run["totals"]["scorings"]["hidden"] == 1 and run["totals"]["scorings"]["dev"] >= 4


def test_same_seed_and_script_give_the_same_population(toy_root, tmp_path, cache_dir):
    pops = []
    for i in range(2):
        with ScriptedLLMServer(kernel_engineer) as server:
            run_dir, _ = start_run(config(tmp_path / str(i), cache_dir, server, **{"population.exploration_ratio": 0.5}),
                                   "kfc/toy-sum", [str(toy_root)])
        pops.append(population_of(run_dir))
    assert pops[0] == pops[1] and len(pops[0]) == 7


def test_anthropic_with_429_and_500_retried(toy_root, tmp_path, cache_dir):
    failures = {"n": 0}
    lock = threading.Lock()

    def flaky(req: Request) -> Reply:
        with lock:
            failures["n"] += 1
            n = failures["n"]
        if n == 1:
            return Reply(status=429, headers={"retry-after": "0"}, text="slow down")
        if n == 2:
            return Reply(status=500, text="oops")
        return kernel_engineer(req)

    with ScriptedLLMServer(flaky) as server:
        run_dir, status = start_run(config(tmp_path, cache_dir, server, provider="anthropic", **{"loop.rounds": 1}),
                                    "kfc/toy-sum", [str(toy_root)])
    assert status == "finished"
    calls = [e["data"] for e in journal.read(run_dir / "journal.jsonl") if e["kind"] == "llm_call"]
    assert calls[0]["role"] == "planner" and calls[0]["attempts"] == 3 and calls[0]["provider"] == "anthropic"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["best"]["id"] == "r01-c0"


def test_broken_and_empty_answers_are_recorded_failures(toy_root, tmp_path, cache_dir):
    def useless(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            return Reply(text="not json at all")
        if "You are the planner" in user:
            return Reply(text="")
        return Reply(text="I would rewrite it in Rust, but here is no code.")

    with ScriptedLLMServer(useless) as server:
        run_dir, status = start_run(config(tmp_path, cache_dir, server, **{"loop.rounds": 2}), "kfc/toy-sum", [str(toy_root)])
    assert status == "finished"
    pop = population_of(run_dir)
    assert [s["status"] for s in pop if s["round"] > 0] == ["no_code"] * 4
    lessons = json.loads((run_dir / "rounds/01/summarizer/lessons.json").read_text())
    assert lessons["ok"] is False and set(lessons["children"]) == {"r01-c0", "r01-c1"}
    run = json.loads((run_dir / "run.json").read_text())
    assert run["best"]["id"] == "baseline"


def test_usd_cap_ends_the_run_cleanly(toy_root, tmp_path, cache_dir):
    with ScriptedLLMServer(kernel_engineer) as server:
        cfg = config(tmp_path, cache_dir, server, **{"llm.default": "openai:gpt-4o", "llm.max_usd": 0.0001})
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(toy_root)])
        sent = len(server.requests)
    assert status == "budget_exhausted"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "budget_exhausted" and run["totals"]["usd"] >= 0.0001
    # the calls the cap refused were never sent, and are not counted as calls
    assert run["totals"]["llm_calls"] == sent <= 3
    # a replay meets the cap where the run did, and stops there too
    dest, again, _ = replay_run(run_dir, out=tmp_path / "replay")
    assert again == "budget_exhausted" and population_of(dest) == population_of(run_dir)


def test_the_usd_cap_counts_the_whole_run_across_resumes(toy_root, tmp_path, cache_dir):
    with ScriptedLLMServer(kernel_engineer) as server:
        cfg = config(tmp_path, cache_dir, server, **{"llm.default": "openai:gpt-4o", "llm.max_usd": 0.0001})
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(toy_root)])
        sent = len(server.requests)
        paid = json.loads((run_dir / "run.json").read_text())["totals"]["usd"]
        assert status == "budget_exhausted" and paid >= 0.0001
        # resumed with the same cap: what was paid before counts, so nothing more is asked, and
        # the command says how to go on
        again = subprocess.run([sys.executable, "-m", "agent.cli", "resume", str(run_dir), "--quiet"], cwd=REPO,
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and len(server.requests) == sent, again.stderr
        said = again.stderr.strip().splitlines()
        assert len(said) == 1 and "USD cap (llm.max_usd = 0.0001) was reached" in said[0], again.stderr
        assert f"pesflow resume {run_dir} --max-usd USD" in said[0]
        assert json.loads((run_dir / "run.json").read_text())["status"] == "budget_exhausted"
        # a raised cap lets it go on, to the end of its rounds
        _, status = resume_run(run_dir, max_usd=1.0)
        assert status == "finished" and len(server.requests) > sent
    run = json.loads((run_dir / "run.json").read_text())
    assert run["totals"]["usd"] > paid and run["config"]["llm"]["max_usd"] == 1.0
    # its replay meets the cap's refusals where the run did, and goes on past them as the resume did
    dest, again, _ = replay_run(run_dir, out=tmp_path / "replay")
    assert again == "finished" and population_of(dest) == population_of(run_dir)


def test_usd_cap_reached_among_the_executors_keeps_the_child_already_written(toy_root, tmp_path, cache_dir):
    # Each answer costs 1000 output tokens of gpt-4o ($0.01); the cap lets the plan and the two
    # executors through (checked at $0.01) and refuses the second executor's repair (at >= $0.02).
    def priced(req: Request) -> Reply:
        r = kernel_engineer(req)
        r.input_tokens, r.output_tokens = 0, 1000
        return r

    with ScriptedLLMServer(priced) as server:
        cfg = config(tmp_path, cache_dir, server, **{"llm.default": "openai:gpt-4o", "llm.max_usd": 0.015,
                                                     "loop.pipeline_depth": 1})
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(toy_root)])
        sent = [r.messages[-1]["content"] for r in server.requests]
    assert status == "budget_exhausted" and len(sent) == 3  # plan, executor 1, executor 2; no repair, no summary
    pop = {s["id"]: s for s in population_of(run_dir)}
    assert pop["r01-c0"]["status"] == "ok" and pop["r01-c0"]["speedup"]  # graded and kept
    assert pop["r01-c1"]["status"] == "no_code"
    kinds = [e["kind"] for e in journal.read(run_dir / "journal.jsonl")]
    assert kinds.count("verdict") >= 2  # the baseline's and the kept child's


def test_no_llm_grades_the_baseline_then_says_how(toy_root, tmp_path, cache_dir):
    cfg = load_config(sets=[f"run.out={tmp_path}", "run.quiet=true", f"evaluator.local.cache_dir={cache_dir}"])
    with pytest.raises(NoLLMConfigured) as e:
        start_run(cfg, "kfc/toy-sum", [str(toy_root)])
    assert "--llm openai:MODEL" in str(e.value) and "\n" not in str(e.value)
    run = json.loads((e.value.run_dir / "run.json").read_text())
    assert run["status"] == "no_llm" and (e.value.run_dir / "checkpoints/round-00/pesflow_state.json").is_file()


ROUTER = "kfc/wre-router-power-of-two-choices-loop16"


@pytest.mark.slow
def test_bundled_router_search_improves_with_the_answers(tmp_path, cache_dir):
    """On a bundled CPU task with its real, timed dev engine: a partial rewrite, then the oracle's."""
    from evaluator.candidate import apply_diff
    from evaluator.task import load_task

    task = load_task(ROUTER)
    base = (task.root / "environment/repo/submission/kernel.py").read_text()
    oracle = apply_diff((task.root / "solution/oracle.patch").read_text(), {"submission/kernel.py": base})["submission/kernel.py"]
    partial_old = "    loads = start_loads.copy()\n"
    partial_new = "    loads = start_loads.tolist()\n    cost = cost.tolist()\n"
    final_old = "    return choices, loads\n"
    final_new = "    return choices, np.array(loads, dtype=np.int64)\n"

    def engineer(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            return Reply(text='{"children": {}, "memory": ["python lists beat numpy scalar access in serial loops"]}')
        if "You are the planner" in user:
            return Reply(text="Move the serial loop off numpy scalars.")
        code = re.search(r"### submission/kernel.py\n```python\n(.*?)\n```", user, re.S).group(1)
        if "tolist" in code:
            return Reply(text=f"submission/kernel.py\n```python\n{oracle}```\n")
        return Reply(text=f"submission/kernel.py\n<<<<<<< SEARCH\n{partial_old}=======\n{partial_new}>>>>>>> REPLACE\n"
                          f"submission/kernel.py\n<<<<<<< SEARCH\n{final_old}=======\n{final_new}>>>>>>> REPLACE\n")

    with ScriptedLLMServer(engineer) as server:
        cfg = config(tmp_path, cache_dir, server, **{"population.islands": 1, "population.exploitation_ratio": 1.0,
                                                        "population.exploration_ratio": 0.0, "loop.final_regrade_top": 1})
        run_dir, status = start_run(cfg, ROUTER, [])
    assert status == "finished"
    run = json.loads((run_dir / "run.json").read_text())
    speedups = [b["speedup"] for b in run["best_by_round"]]
    assert speedups[1] > 1.1 and speedups[-1] > 1.3 * speedups[1], speedups
    assert run["best"]["status"] == "ok" and run["best"]["speedup"] > 2


def test_single_shot_ablation_makes_one_executor_call(toy_root, tmp_path, cache_dir):
    with ScriptedLLMServer(kernel_engineer) as server:
        cfg = config(tmp_path, cache_dir, server, **{"loop.rounds": 1, "loop.children": 1, "loop.use_planner": "false",
                                                        "loop.use_summarizer": "false", "loop.edit_format": "whole_file"})
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(toy_root)])
        roles_called = [("planner" if "You are the planner" in r.messages[-1]["content"] else
                         "summarizer" if "You are the summarizer" in r.messages[-1]["content"] else "executor")
                        for r in server.requests]
        prompts = [r.messages[-1]["content"] for r in server.requests]
    assert status == "finished" and roles_called == ["executor"]
    assert "complete new text of every file" in prompts[0] and "<<<<<<< SEARCH" not in prompts[0]
    assert json.loads((run_dir / "run.json").read_text())["totals"]["llm_calls"] == 1


def test_each_role_may_use_its_own_provider_and_model(toy_root, tmp_path, cache_dir):
    with ScriptedLLMServer(kernel_engineer) as server:
        cfg = config(tmp_path, cache_dir, server, **{"loop.rounds": 1, "llm.summarizer": "anthropic:summary-model",
                                                        "llm.anthropic_base_url": server.anthropic_base_url})
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(toy_root)])
        seen = {(r.api, r.model, "summarizer" if "You are the summarizer" in r.messages[-1]["content"] else "other")
                for r in server.requests}
    assert status == "finished"
    assert seen == {("openai", "test-model", "other"), ("anthropic", "summary-model", "summarizer")}
