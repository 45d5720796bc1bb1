"""Faults of the machine, not of the input (issue 19): a full disk, a read-only run folder or cache,
a journal whose last line a crash tore. Each is one line naming the path and the way on, exit 3,
and the run directory stays resumable; a resumed run finishes with a clean audit.

Real `pesflow` processes on the toy package (deterministic metric), against the scripted model,
with the run directory on a small tmpfs that fills up (root: mount).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.readers.audit import audit
from tests.conftest import needs_root
from tests.llm_server import ScriptedLLMServer
from tests.test_durable import KEYS, make_toy, pesflow
from tests.test_first_hour import in_process, one_line_error
from tests.test_loop import kernel_engineer

pytestmark = needs_root


@contextmanager
def tmpfs(where: Path, size: str, *opts: str):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *opts]), "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def run_cmd(srv: ScriptedLLMServer, toy: Path, out: Path, cache_dir: Path) -> list[str]:
    return ["run", "kfc/toy-sum", "--tasks-root", str(toy), "--llm", "openai:test-model", "--rounds", "2", "--children", "1",
            "--seed", "7", "--out", str(out), "--quiet", "--set", f"llm.base_url={srv.openai_base_url}",
            "--set", f"evaluator.local.cache_dir={cache_dir}", "--set", "llm.backoff_base_sec=0.01", "--set", "llm.max_usd=null"]


def done(p: subprocess.Popen, timeout: float = 240) -> subprocess.CompletedProcess:
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@pytest.mark.slow  # three toy searches (about 30 s with the toy prepared)
def test_a_full_disk_is_one_line_then_resume_finishes_and_a_torn_journal_tail_is_dropped(tmp_path, cache_dir):
    toy = make_toy(tmp_path)
    with ScriptedLLMServer(kernel_engineer) as srv, tmpfs(tmp_path / "full", "256k") as full:
        # A toy search writes about 500 KiB; this file system holds 256.
        p = done(pesflow(*run_cmd(srv, toy, full, cache_dir)))
        last = one_line_error(p, 3, "No space left on device", "then: pesflow resume ")
        run_dir = Path(p.stdout.strip().splitlines()[-1].removeprefix("run: "))
        assert run_dir.is_dir() and f"pesflow resume {run_dir}" in last and str(full) in last
        assert audit(run_dir).violations == []  # nothing half-written: the journal audits clean as it stands
        subprocess.run(["mount", "-o", "remount,size=64m", str(full)], check=True)  # space freed
        r = done(pesflow("resume", str(run_dir), "--quiet"))
        assert r.returncode == 0, r.stderr[-2000:]
        run = json.loads((run_dir / "run.json").read_text())
        assert run["status"] == "finished" and audit(run_dir).violations == []
        best = run["best"]["id"]

        # The same run as a kill during round 2 leaves it: round 1's checkpoint folder on disk, its
        # journal event the torn last line (half written), nothing after it.
        lines = (run_dir / "journal.jsonl").read_bytes().split(b"\n")
        cut = next(i for i, ln in enumerate(lines) if ln and json.loads(ln)["kind"] == "checkpoint"
                   and json.loads(ln)["data"]["round"] == 1)
        (run_dir / "journal.jsonl").write_bytes(b"\n".join(lines[:cut]) + b"\n" + lines[cut][: len(lines[cut]) // 2])
        shutil.rmtree(run_dir / "checkpoints" / "round-02")
        shutil.rmtree(run_dir / "final", ignore_errors=True)
        run["status"] = "running"
        (run_dir / "run.json").write_text(json.dumps(run))
        r = done(pesflow("resume", str(run_dir), "--quiet"))
        assert r.returncode == 0, r.stderr[-2000:]
        warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("pesflow resume: warning:")]
        assert len(warnings) == 2 and "torn last line" in warnings[0] and "round-01" in warnings[1]
        rep = audit(run_dir)
        assert rep.violations == [], rep.violations
        again = json.loads((run_dir / "run.json").read_text())
        assert again["status"] == "finished" and again["best"]["id"] == best


def test_a_read_only_run_folder_or_cache_is_one_line_exit_3(tmp_path, cache_dir, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["OPENAI_API_KEY"])
    toy = make_toy(tmp_path)
    with ScriptedLLMServer(kernel_engineer) as srv, tmpfs(tmp_path / "ro", "1m", "ro") as ro:
        p = in_process(capsys, *run_cmd(srv, toy, ro, cache_dir))
        one_line_error(p, 3, f"cannot write {ro}", "Read-only file system", "run the command again")
        assert not any(ro.iterdir())
        p = in_process(capsys, "evaluate", "kfc/toy-sum", "--tasks-root", str(toy), "--mode", "noop",
                       "--set", f"evaluator.local.cache_dir={ro / 'cache'}")
        one_line_error(p, 3, f"cannot write {ro}", "Read-only file system")
