"""Hostile inputs, met as a user meets them: `pesflow` run as a subprocess.

Broken task packages and configs must give one line naming the problem (exit 2) or a recorded
failure, never a traceback; hostile LLM answers and a misbehaving LLM server must end the run
cleanly with every failure recorded in the journal, retried where retrying makes sense.

Covered elsewhere, not repeated here: the loader's errors as exceptions (test_task_loader.py),
config validation in-process (test_config.py), an unknown task and an unknown key through
`pesflow evaluate` (test_cli.py), each provider's retry rules (test_llm.py), empty and
code-less answers and 429/500 inside a run (test_loop.py), the edit parser on garbage
(test_edits.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO, needs_root
from tests.llm_server import Reply, Request, ScriptedLLMServer

pytestmark = pytest.mark.slow

CLOSED = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"


def pesflow(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-0123456789abcdefghij", **kw.pop("env", {})}
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env, **kw)


def one_line(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def package(tmp_path) -> Path:
    """A private copy of the toy package to break; returns its task folder."""
    shutil.copytree(FIXTURES / "kfc" / "toy-sum", tmp_path / "tasks" / "kfc" / "toy-sum")
    return tmp_path / "tasks" / "kfc" / "toy-sum" / "task"


BREAKS = {
    # name -> (how to break the package, what the one line must name)
    "task_toml_malformed": (lambda p: (p / "task.toml").write_text("[task\nid = 1\n"), ["task.toml", "not valid TOML"]),
    "task_toml_ill_typed": (lambda p: (p / "task.toml").write_text(
        (p / "task.toml").read_text().replace("timeout_sec = 60", 'timeout_sec = "a minute"')), ["task.toml", "timeout_sec"]),
    "task_toml_missing": (lambda p: (p / "task.toml").unlink(), ["kfc/toy-sum", "not found"]),
    "instruction_missing": (lambda p: (p / "instruction.md").unlink(), ["instruction.md", "does not exist"]),
    "anchor_malformed": (lambda p: (p / "tests" / "ref_speedup.txt").write_text("fast\n"), ["ref_speedup.txt", "no number"]),
}


@pytest.mark.parametrize("broken, command", [(b, "evaluate") for b in sorted(BREAKS)] + [("task_toml_ill_typed", "run")])
def test_broken_package_is_one_line_naming_the_file(broken, command, package):
    brk, needles = BREAKS[broken]
    brk(package)
    extra = ["--mode", "noop"] if command == "evaluate" else ["--llm", "openai:test-model", "--rounds", "1"]
    r = pesflow(command, "kfc/toy-sum", "--tasks-root", str(package.parent.parent.parent), *extra, timeout=60)
    one_line(r, *needles)


def test_unknown_task_for_a_run_names_the_fix():
    one_line(pesflow("run", "kfc/no-such-task", "--llm", "openai:test-model", timeout=60), "kfc/no-such-task", "--tasks-root")


def test_bad_config_is_one_line_naming_the_key(tmp_path):
    # test_config.py checks load_config itself; here the user's view, with the sandbox's knobs
    cases = [
        ("evaluator:\n  local:\n    max_pids: lots\n", ["evaluator.local.max_pids"]),
        ("evaluator:\n  local:\n    stray_processes: ignore\n", ["evaluator.local.stray_processes"]),
        ("loop: [\n", ["not valid YAML"]),
    ]
    for i, (text, needles) in enumerate(cases):
        (tmp_path / f"bad{i}.yaml").write_text(text)
        one_line(pesflow("tasks", "--config", str(tmp_path / f"bad{i}.yaml"), timeout=60), *needles)
    one_line(pesflow("tasks", "--config", str(tmp_path / "nope.yaml"), timeout=60), "nope.yaml")
    one_line(pesflow("tasks", "--set", "evaluator.local.memory_mb=-1", timeout=60), "evaluator.local.memory_mb")


@needs_root
def test_missing_anchor_is_a_recorded_grader_error(package, cache_dir):
    """No anchor anywhere (tests/ref_speedup.txt, manifest, task.toml): the toy's grader cannot
    score; pesflow records that as the grader's failure, with its reason, not a crash."""
    (package / "tests" / "ref_speedup.txt").unlink()
    toml = package / "task.toml"
    toml.write_text(re.sub(r"(?m)^ref_speedup = .*\n", "", toml.read_text()))
    r = pesflow("evaluate", "kfc/toy-sum", "--tasks-root", str(package.parent.parent.parent), "--mode", "oracle",
                "--grader", "hidden", "--json", "--set", f"evaluator.local.cache_dir={cache_dir}")
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    v = json.loads(r.stdout)
    assert v["status"] == "grader_error" and v["ref_speedup"] is None and "ref_speedup.txt" in v["message"]


# ---------------------------------------------------------------- the LLM side, through `pesflow run`
def run_with(responder, tmp_path: Path, cache_dir: Path, children: int, *sets: str) -> tuple[subprocess.CompletedProcess, Path, float]:
    with ScriptedLLMServer(responder) as server:
        start = time.monotonic()
        r = pesflow("run", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--llm", "openai:test-model", "--rounds", "1",
                    "--children", str(children), "--quiet", "--out", str(tmp_path / "runs"),
                    "--set", f"llm.base_url={server.openai_base_url}", "--set", f"evaluator.local.cache_dir={cache_dir}",
                    "--set", "llm.backoff_base_sec=0.01", "--set", "llm.backoff_max_sec=0.05",
                    "--set", "loop.final_regrade_top=1", "--set", "loop.score_final_with_hidden=false", *sets)
        seconds = time.monotonic() - start
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    m = re.search(r"^run: (.+)$", r.stdout, re.M)
    assert m, (r.stdout, r.stderr)
    return r, Path(m.group(1)), seconds


def journal(run_dir: Path, kind: str) -> list[dict]:
    out = []
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["kind"] == kind:
            out.append(e["data"])
    return out


def graded(run_dir: Path) -> dict[str, dict]:
    """The population as checkpointed after the last round: id -> solution."""
    last = sorted(run_dir.glob("checkpoints/round-*"))[-1]
    state = json.loads((last / "pesflow_state.json").read_text())
    return {s["id"]: s for s in state["population"]["solutions"]}


def who(req: Request) -> str:
    user = req.messages[-1]["content"]
    for role in ("planner", "summarizer"):
        if f"You are the {role}" in user:
            return role
    m = re.search(r"You are executor (\d+) of", user)
    return f"executor{m.group(1)}" if m else "?"


@needs_root
def test_hostile_answers_are_recorded_failures_never_applied_half(tmp_path, cache_dir):
    answers = {
        "executor1": Reply(text="toy/kernel.py\n<<<<<<< SEARCH\n    total = 0\n    for i in range(n):\n=======\n    total = sum(",
                           finish_reason="length"),  # truncated mid-block by the output limit
        "executor2": Reply(text="toy/kernel.py\n=======\n    return 0\n>>>>>>> REPLACE\n<<<<<<< SEARCH\n"),  # markers out of order
        "executor3": Reply(text="toy/kernel.py\n```rust\nfn sum_squares(n: u64) -> u64 {\n    (0..n).map(|i| i * i).sum()\n}\n```\n"),
        "executor4": Reply(text="toy/kernel.py\n```cpp\n#include <cstdint>\nuint64_t sum_squares(uint64_t n) { return n; }\n```\n"),
        "summarizer": Reply(text='{"children": {"r01-c0": "cut'),  # truncated JSON
        "planner": Reply(text="Use a closed form."),
    }
    r, run_dir, _ = run_with(lambda req: answers.get(who(req), Reply(text="?")), tmp_path, cache_dir, 4,
                             "--set", "loop.repair_attempts=0")
    assert r.returncode == 0, r.stderr
    cands = {c["id"]: c for c in journal(run_dir, "candidate")}
    pop = graded(run_dir)
    assert pop["r01-c0"]["status"] == "no_code" and "truncated" in cands["r01-c0"]["detail"]
    assert pop["r01-c1"]["status"] == "no_code" and cands["r01-c1"]["detail"]
    # code in another language is applied as asked, then fails the task's own import gate
    for cid in ("r01-c2", "r01-c3"):
        assert pop[cid]["status"] == "hard_fail" and pop[cid]["hard_fail_reasons"] == ["import_failed"], pop[cid]
    lessons = json.loads((run_dir / "rounds/01/summarizer/lessons.json").read_text())
    assert lessons["ok"] is False
    run = json.loads((run_dir / "run.json").read_text())
    assert run["best"]["id"] == "baseline"


@needs_root
def test_llm_server_failures_are_retried_recorded_and_bounded(tmp_path, cache_dir):
    """One run meets every failure of the server at once; each call retries what is worth
    retrying (429, 5xx, resets, hangs, garbage); what no retry cures (401, 404) stops the run,
    pinned by tests/test_model_errors.py."""
    seen: Counter = Counter()
    lock = threading.Lock()
    good = Reply(text=f"toy/kernel.py\n```python\n{CLOSED}```\n")
    script = {
        "planner": [Reply(status=429, headers={"retry-after": "0"}, text="slow down"), Reply(text="Use a closed form.")],
        "executor1": [Reply(status=500, text="oops"), Reply(status=503, text="busy")],
        "executor2": [Reply(reset=True), good],
        "executor3": [Reply(hang=True), Reply(hang=True)],
        "executor4": [Reply(status=529, text="overloaded"), good],
        "executor5": [Reply(raw_body=b"{not json at all"), good],
        "summarizer": [Reply(trickle=True), Reply(trickle=True)],
    }

    def responder(req: Request) -> Reply:
        key = who(req)
        with lock:
            n = seen[key]
            seen[key] += 1
        replies = script.get(key, [Reply(text="?")])
        return replies[min(n, len(replies) - 1)]

    r, run_dir, seconds = run_with(responder, tmp_path, cache_dir, 5, "--set", "llm.max_attempts=2",
                                   "--set", "llm.timeout_sec=2", "--set", "loop.repair_attempts=0")
    assert r.returncode == 0, r.stderr
    assert seconds < 120  # hangs and trickles are cut per attempt; nothing waits forever
    calls = {c["tag"]: c for c in journal(run_dir, "llm_call")}
    assert calls["r1/plan"]["attempts"] == 2 and calls["r1/plan"].get("error") is None
    assert calls["r1/c0"]["error_kind"] == "server" and calls["r1/c0"]["attempts"] == 2
    assert calls["r1/c1"].get("error") is None and calls["r1/c1"]["attempts"] == 2
    assert calls["r1/c2"]["error_kind"] == "timeout" and calls["r1/c2"]["attempts"] == 2
    assert calls["r1/c3"].get("error") is None and calls["r1/c3"]["attempts"] == 2
    assert calls["r1/c4"].get("error") is None and calls["r1/c4"]["attempts"] == 2
    assert calls["r1/summary"]["error_kind"] == "timeout"
    cands = {c["id"]: c for c in journal(run_dir, "candidate")}
    assert {cands[i]["status"] for i in ("r01-c0", "r01-c2")} == {"llm_error"}
    pop = graded(run_dir)
    assert pop["r01-c1"]["status"] == "ok" and pop["r01-c1"]["speedup"] > 10
    assert pop["r01-c4"]["status"] == "ok" or pop["r01-c4"]["duplicate_of"] == "r01-c1"
    assert pop["r01-c3"]["status"] == "ok" or pop["r01-c3"]["duplicate_of"] == "r01-c1"
    for cid in ("r01-c0", "r01-c2"):
        assert "\n" not in cands[cid]["detail"] and "test-model" in cands[cid]["detail"]
