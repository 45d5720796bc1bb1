"""A tampered grading's figures are not figures: speedup and reward are null in the verdict,
and no prompt of a run that graded such a candidate carries the forged number.

A one-round search on kfc/wre-router-power-of-two-choices-loop16 whose executors answer with
the honest oracle plus a forger: one writes a perfect reward.json from `atexit`, the other
keeps rewriting the verdict from a detached daemon (the late forger). Both forge 1000.0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.rundir import journal
from agent.search.session import start_run
from evaluator.candidate import apply_diff
from evaluator.task import load_task
from tests.conftest import needs_root
from tests.llm_server import Reply, Request, ScriptedLLMServer
from tests.test_loop import config, fake_keys  # noqa: F401 - the keys fixture

pytestmark = [needs_root, pytest.mark.slow]
HERE = Path(__file__).resolve().parent
ROUTER = "kfc/wre-router-power-of-two-choices-loop16"
FORGERS = ["writes_verifier_atexit", "background_process_disguised"]


def test_forged_figures_are_withheld_from_verdicts_and_prompts(tmp_path, cache_dir):
    task = load_task(ROUTER)
    base = (task.root / "environment/repo/submission/kernel.py").read_text()
    oracle = apply_diff((task.root / "solution/oracle.patch").read_text(), {"submission/kernel.py": base})["submission/kernel.py"]
    forged = [oracle + "\n\n" + (HERE / "router" / f"{name}.py").read_text().replace("__TAG__", "pesflow-forger")
              for name in FORGERS]

    def answer(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            return Reply(text=json.dumps({"children": {}, "memory": ["forgers never pay"]}))
        if "You are the planner" in user:
            return Reply(text="Try power of two choices.")
        child = 1 if "You are executor 2 of" in user else 0
        return Reply(text=f"submission/kernel.py\n```python\n{forged[child]}```\n")

    with ScriptedLLMServer(answer) as server:
        cfg = config(tmp_path, cache_dir, server, **{"loop.rounds": 1, "evaluator.grader": "hidden"})
        run_dir, status = start_run(cfg, ROUTER, [])
        bodies = [json.dumps(r.body) for r in server.requests]
    assert status == "finished"
    verdicts = {e["data"]["content_hash"]: e["data"]["verdict"] for e in journal.read(run_dir / "journal.jsonl")
                if e["kind"] == "verdict" and e["data"]["label"] == ""}
    forgers = [v for v in verdicts.values() if v["hard_fail_reasons"] and v["mode"] == "candidate" and v["speedup"] is None]
    assert len(forgers) == 2, [(v["status"], v["hard_fail_reasons"], v["speedup"]) for v in verdicts.values()]
    assert all(v["reward"] is None and "withheld" in v["message"] for v in forgers)
    # the summarizer saw both verdicts: the forged number is in no verdict it was shown (the
    # forgers' own code, which holds the digits, is the model's text and stays)
    summary = json.loads(bodies[-1])["messages"][-1]["content"]
    heads = re.findall(r"^## (r01-c\d): (.*)$", summary, re.M)
    assert len(heads) == 2 and all("FAILED" in h and "1000" not in h and "speedup" not in h for _, h in heads), heads
    assert not re.search(r"speedup 1000", "".join(bodies))
    assert not any("1000" in p.read_text() for p in run_dir.glob("rounds/**/verdict.json"))
