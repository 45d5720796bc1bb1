"""Durable runs: SIGKILL at any moment then resume reaches the uninterrupted result; replay
makes no network call; audit catches a tampered journal, a swapped candidate and a planted key.

Runs are real `pesflow` processes talking to the scripted server; the toy grader's metric is
deterministic (traced events), so whole populations can be compared exactly.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.rundir import journal
from agent.readers.audit import audit
from tests.conftest import REPO, needs_root, toy_tasks_root
from tests.llm_server import Reply, Request, ScriptedLLMServer, commenting_children
from tests.test_loop import kernel_engineer, population_of, toy_root  # noqa: F401 (fixture)

pytestmark = needs_root
KEYS = {"OPENAI_API_KEY": "sk-test-0123456789abcdefghij"}


def run_args(base_url: str, out: Path, cache_dir: Path, toy: Path) -> list[str]:
    return ["run", "kfc/toy-sum", "--tasks-root", str(toy), "--llm", "openai:test-model", "--rounds", "3",
            "--children", "2", "--seed", "7", "--out", str(out), "--quiet",
            "--set", f"llm.base_url={base_url}", "--set", f"evaluator.local.cache_dir={cache_dir}",
            "--set", "llm.backoff_base_sec=0.01", "--set", "llm.max_usd=null",
            # engineer's prompts hold the parent's profile, measured times: a candidate graded again
            # after a kill is measured again. The benchmark protocol's prompts are the toy's
            # deterministic figures alone, so the two runs can be compared to the token.
            "--set", "search.feedback=benchmark"]


def pesflow(*args: str, env_extra: dict | None = None, **kw) -> subprocess.Popen:
    env = {**os.environ, **KEYS, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-m", "agent.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def finish(p: subprocess.Popen, timeout: float = 240) -> str:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-2000:]
    return out.strip().splitlines()[-1].removeprefix("run: ")


def summary(run_dir: Path) -> dict:
    run = json.loads((run_dir / "run.json").read_text())
    t = run["totals"]
    return {"population": population_of(run_dir), "best": run["best"]["id"], "status": run["status"],
            "totals": {k: t[k] for k in ("llm_calls", "input_tokens", "output_tokens", "evaluations", "scorings")}}


class SlowWhen:
    """The scripted model, made slow on one kind of request so a kill can land inside it."""

    def __init__(self, needle: str | None, delay: float):
        self.needle, self.delay, self.arrived = needle, delay, threading.Event()

    def __call__(self, req: Request) -> Reply:
        reply = kernel_engineer(req)
        if self.needle and self.needle in req.messages[-1]["content"] and "executor 1 of" in req.messages[-1]["content"]:
            self.arrived.set()
            reply.delay_s = self.delay
        return reply


def make_toy(tmp: Path) -> Path:
    root = tmp / "tasks"
    toy_tasks_root(root)
    return root


def wait_for(predicate, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("the awaited moment never came")


def found(root: Path, name: str) -> Path | None:
    """The first file called `name` under root. os.walk skips folders that vanish while it reads
    (a checkpoint's temporary folder is renamed away at any moment); rglob raises on them."""
    for folder, _, files in os.walk(root):
        if name in files:
            return Path(folder) / name
    return None


def journal_has(run_root: Path, kind: str, **match) -> bool:
    for folder, _, files in os.walk(run_root):
        if "journal.jsonl" not in files:
            continue
        j = Path(folder) / "journal.jsonl"
        for e in journal.read(j):
            if e["kind"] == kind and all(e["data"].get(k) == v for k, v in match.items()):
                return True
    return False


@pytest.mark.slow
def test_sigkill_anywhere_then_resume_gives_the_uninterrupted_result(tmp_path, cache_dir):
    toy = make_toy(tmp_path)
    with ScriptedLLMServer(kernel_engineer) as server:
        ref_dir = Path(finish(pesflow(*run_args(server.openai_base_url, tmp_path / "ref", cache_dir, toy))))
    expected = summary(ref_dir)
    assert expected["status"] == "finished" and expected["totals"]["llm_calls"] > 0

    rng = random.Random(1234)
    kill_points = [
        ("during an LLM call", "llm"),
        ("during grading", "grading"),
        ("during a checkpoint write", "checkpoint"),
        ("at a random moment", "random"),
        ("at another random moment", "random"),
    ]
    for label, how in kill_points:
        out = tmp_path / f"kill-{how}-{len(label)}"
        slow = SlowWhen("toy/kernel.py" if how == "llm" else None, delay=3.0)
        env_extra = {}
        if how == "checkpoint":
            env_extra["PESFLOW_FAULT_PAUSE"] = "checkpoint:2:3.0"  # sleep 3 s inside round 2's checkpoint write
        if how == "grading":
            env_extra["PESFLOW_FAULT_PAUSE"] = "grading:*:3.0"  # sleep 3 s inside every search grading
        with ScriptedLLMServer(slow) as server:
            p = pesflow(*run_args(server.openai_base_url, out, cache_dir, toy), env_extra=env_extra)
            if how == "llm":
                assert slow.arrived.wait(120), "the slow request never came"
                time.sleep(0.3)
            elif how in ("checkpoint", "grading"):
                wait_for(lambda: found(out, f"PAUSED-{how}") is not None, 120)
            else:  # a random moment of the run (before its folder exists there is nothing to resume)
                wait_for(lambda: any(out.glob("kfc/toy-sum/[!.]*/run.json")), 120)
                time.sleep(rng.uniform(0.0, 6.0))
            p.send_signal(signal.SIGKILL)
            p.wait()
            run_dirs = [d for d in out.glob("kfc/toy-sum/[!.]*") if d.is_dir()]
            assert len(run_dirs) == 1, label
            r = pesflow("resume", str(run_dirs[0]), "--quiet")
            resumed = Path(finish(r))
        got = summary(resumed)
        assert got == expected, f"resume after a kill {label} differs"
        assert journal.verify(resumed / "journal.jsonl") == []


@pytest.mark.slow
def test_replay_makes_no_network_call_and_regrade_agrees(tmp_path, cache_dir):
    toy = make_toy(tmp_path)
    with ScriptedLLMServer(kernel_engineer) as server:
        run_dir = Path(finish(pesflow(*run_args(server.openai_base_url, tmp_path / "runs", cache_dir, toy))))
    # the server is gone: any network call would fail the replay
    p = pesflow("replay", str(run_dir), "--regrade", "--out", str(tmp_path / "replay"), "--quiet")
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err[-2000:]
    replay_dir = Path(out.strip().splitlines()[-1].removeprefix("run: "))
    assert population_of(replay_dir) == population_of(run_dir)
    calls = [e["data"] for e in journal.read(replay_dir / "journal.jsonl") if e["kind"] == "llm_call"]
    assert calls and all(c.get("replayed") for c in calls)
    comparisons = json.loads((replay_dir / "regrade.json").read_text())
    assert comparisons and all(c["correctness_agrees"] for c in comparisons)
    assert "correctness agrees" in out


def test_audit_catches_tampering_swaps_and_keys(toy_root, tmp_path, cache_dir):  # noqa: F811
    from agent.config import load_config
    from agent.search.session import start_run

    with ScriptedLLMServer(kernel_engineer) as server:
        cfg = load_config(sets=["llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}",
                                "loop.rounds=2", f"run.out={tmp_path / 'traces'}", "run.quiet=true",
                                f"evaluator.local.cache_dir={cache_dir}"])
        os.environ.update(KEYS)
        try:
            run_dir, _ = start_run(cfg, "kfc/toy-sum", [str(toy_root)])
        finally:
            os.environ.pop("OPENAI_API_KEY", None)
    clean = audit(run_dir)
    assert clean.ok, clean.violations
    r = subprocess.run([sys.executable, "-m", "agent.cli", "audit", str(run_dir)], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0 and "0 violation(s)" in r.stdout

    import shutil

    def tampered(name: str, change) -> list[str]:
        copy = tmp_path / name
        shutil.copytree(run_dir, copy)
        change(copy)
        return audit(copy).violations

    def edit_journal(d: Path) -> None:
        lines = (d / "journal.jsonl").read_text().splitlines()
        e = json.loads(lines[3])
        e["data"]["tampered"] = True
        lines[3] = json.dumps(e)
        (d / "journal.jsonl").write_text("\n".join(lines) + "\n")

    assert any("edited" in v for v in tampered("journal", edit_journal))

    def swap_candidate(d: Path) -> None:
        state_path = sorted(d.glob("checkpoints/round-*"))[-1] / "pesflow_state.json"
        state = json.loads(state_path.read_text())
        sol = next(s for s in state["population"]["solutions"] if s["id"] == "r01-c0")
        sol["files"]["toy/kernel.py"] = "def sum_squares(n):\n    return 0\n"
        state_path.write_text(json.dumps(state))

    assert any("does not match its hash" in v for v in tampered("swap", swap_candidate))

    def plant_key(d: Path) -> None:
        (d / "rounds" / "01" / "planner" / "notes.md").write_text("debug: key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx\n")

    assert any("holds a secret" in v for v in tampered("key", plant_key))
    r = subprocess.run([sys.executable, "-m", "agent.cli", "audit", str(tmp_path / "key")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 1 and "FAIL" in r.stdout


@pytest.mark.slow
def test_sigkill_with_two_graders_busy_then_resume_and_replay_end_as_uninterrupted(tmp_path, cache_dir):
    """Two graders, rounds in flight: a kill while both grade loses nothing that was
    recorded, re-grades only what has no verdict, and ends where an uninterrupted run with one
    grader ends (the number of graders never changes the result); its replay ends there too."""
    toy = make_toy(tmp_path)
    two = ["--set", "loop.grading_workers=2", "--set", "evaluator.workers=2"]
    with ScriptedLLMServer(commenting_children) as server:
        ref_dir = Path(finish(pesflow(*run_args(server.openai_base_url, tmp_path / "ref", cache_dir, toy))))
    expected = summary(ref_dir)
    assert expected["status"] == "finished" and len(expected["population"]) >= 5
    out = tmp_path / "killed"
    with ScriptedLLMServer(commenting_children) as server:
        p = pesflow(*run_args(server.openai_base_url, out, cache_dir, toy), *two,
                    env_extra={"PESFLOW_FAULT_PAUSE": "grading:*:4.0"})  # every search grading lasts 4 s more
        marker = lambda: found(out, "PAUSED-grading")  # noqa: E731
        wait_for(lambda: marker() is not None and len(marker().read_text().splitlines()) == 2, 120)
        p.send_signal(signal.SIGKILL)  # both graders are inside a grading
        p.wait()
        run_dir = next(d for d in out.glob("kfc/toy-sum/[!.]*") if d.is_dir())
        before = [e for e in journal.read(run_dir / "journal.jsonl") if e["kind"] == "verdict"]
        resumed = Path(finish(pesflow("resume", str(run_dir), "--quiet")))
    assert summary(resumed) == expected
    # the same folder: every grading of the run, before and after the kill, is in one journal;
    # what had a verdict was served again (reused), so no code was graded twice for one purpose
    graded = [(e["data"]["content_hash"], e["data"]["label"]) for e in journal.read(resumed / "journal.jsonl")
              if e["kind"] == "verdict" and not e["data"].get("reused")]
    assert len(graded) == len(set(graded)) and len(before) >= 1
    p = pesflow("replay", str(resumed), "--out", str(tmp_path / "replay"), "--quiet")
    rout, rerr = p.communicate(timeout=240)
    assert p.returncode == 0, rerr[-2000:]
    replay_dir = Path(rout.strip().splitlines()[-1].removeprefix("run: "))
    assert population_of(replay_dir) == expected["population"]
    assert json.loads((replay_dir / "run.json").read_text())["best"]["id"] == expected["best"]
