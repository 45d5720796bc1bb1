"""A search that cannot use its model stops at once: no key, a key refused (401), no such model
(404) each end the real `pesflow run` within seconds, exit code 2, one line naming the fix, no
traceback; the run directory (when one was made) is resumable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, needs_root, toy_tasks_root
from tests.llm_server import Reply, ScriptedLLMServer, sequence

pytestmark = needs_root


def pesflow_run(base_url: str, tmp: Path, cache_dir: Path, key: str | None) -> tuple[subprocess.CompletedProcess, float]:
    root = tmp / "tasks"
    toy_tasks_root(root)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    args = [sys.executable, "-m", "agent.cli", "run", "kfc/toy-sum", "--tasks-root", str(root), "--llm", "openai:no-such-model",
            "--rounds", "16", "--out", str(tmp / "runs"), "--quiet", "--set", f"llm.base_url={base_url}",
            "--set", f"evaluator.local.cache_dir={cache_dir}", "--set", "llm.backoff_base_sec=0.01"]
    t0 = time.monotonic()
    r = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return r, time.monotonic() - t0


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr[-2000:]
    # besides the package's source note, one error line
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("pesflow run:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 2, r.stderr
    return lines[0]


def test_no_key_is_refused_before_anything_runs(tmp_path, cache_dir):
    with ScriptedLLMServer(sequence(Reply(text="never asked"))) as server:
        r, seconds = pesflow_run(server.openai_base_url, tmp_path, cache_dir, key=None)
        assert not server.requests
    line = one_line_error(r)
    assert "no API key" in line and "OPENAI_API_KEY" in line and seconds < 60
    assert not list((tmp_path / "runs").rglob("run.json"))  # nothing made, nothing to clean


@pytest.mark.parametrize("status,fix", [(401, "check OPENAI_API_KEY"), (404, "check the model name")])
def test_a_refused_key_or_an_unknown_model_stops_the_run_at_once(tmp_path, cache_dir, status, fix):
    with ScriptedLLMServer(sequence(Reply(status=status, text="refused"))) as server:
        r, seconds = pesflow_run(server.openai_base_url, tmp_path, cache_dir, key="sk-test-0123456789abcdefghij")
        asked = len(server.requests)
    line = one_line_error(r)
    assert fix in line and "pesflow resume" in line, line
    # the baseline is graded, then the first calls fail once each (not retried, not repeated for 16 rounds)
    assert asked <= 4 and seconds < 120
    run_dir = Path(line.rsplit("pesflow resume ", 1)[1])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "stopped" and fix in run["error"]
    assert (run_dir / "checkpoints").is_dir()  # resumable from its last checkpoint
