"""Stopping pesflow stops its gradings: nothing left behind, nothing running past its limit.

pesflow runs as a program here (`python -m agent.cli`, the handlers installed) grading an
endless loop; it is signalled once the grading runs. SIGTERM, SIGINT and SIGHUP tear down every
sandbox it started before it exits; after SIGKILL the sandbox dies with it (parent-death
signal), and the next command removes what was left on disk and says so in one line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO, needs_root

pytestmark = [needs_root, pytest.mark.slow]
LOOP = "def sum_squares(n):\n    while True:\n        pass\n"
LIMIT_SEC = 60  # the grading's own limit: everything must be gone long before it


def rooted_in(folder: Path) -> list[int]:
    """Host processes whose root is inside `folder` (a sandbox's chroot)."""
    out = []
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                if os.readlink(f"/proc/{e.name}/root").startswith(str(folder)):
                    out.append(int(e.name))
            except OSError:
                pass
    return out


def leftovers(cache: Path, pid: int) -> dict[str, list[str]]:
    return {
        "processes": [str(p) for p in rooted_in(cache)],
        "sandbox_folders": [str(p) for p in cache.glob("local/*/runs/*")],
        "cgroups": [str(p) for p in Path("/sys/fs/cgroup").glob(f"**/pesflow-{pid}-*")],
        "mounts": [ln for ln in Path("/proc/self/mountinfo").read_text().splitlines() if str(cache) in ln],
    }


def start(cache: Path, candidate: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "agent.cli", "evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES),
           "--candidate", str(candidate), "--grader", "hidden", "--set", f"evaluator.local.cache_dir={cache}",
           "--set", f"evaluator.timeout_sec={LIMIT_SEC}", "--out", str(candidate.parent / "logs")]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # preparing the package the first time takes a few seconds
    while not any(rooted_in(d) for d in cache.glob("local/*/runs/*")):  # a grading, not a build step
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the grading never started"
        time.sleep(0.1)
    time.sleep(1.0)  # well inside the endless loop
    return proc


@pytest.fixture
def endless(tmp_path) -> Path:
    (tmp_path / "cand/toy").mkdir(parents=True)
    (tmp_path / "cand/toy/kernel.py").write_text(LOOP)
    return tmp_path / "cand"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_tears_down_every_sandbox_before_pesflow_exits(sig, cache_dir, endless):
    proc = start(cache_dir, endless)
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 15 and proc.returncode == 130, (proc.returncode, err)
    assert "interrupted" in err and "Traceback" not in err
    # what is gone once pesflow has exited, not later
    assert leftovers(cache_dir, proc.pid) == {"processes": [], "sandbox_folders": [], "cgroups": [], "mounts": []}


def test_sigkill_leaves_no_grading_running_and_the_next_command_clears_the_rest(cache_dir, endless):
    proc = start(cache_dir, endless)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10  # far inside the grading's own limit
    while rooted_in(cache_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rooted_in(cache_dir) == [], "the grading outlived a killed pesflow"
    left = leftovers(cache_dir, proc.pid)
    assert left["sandbox_folders"]  # the killed process could not tidy up: the next command does
    again = subprocess.run([sys.executable, "-m", "agent.cli", "evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES),
                            "--mode", "noop", "--grader", "hidden", "--set", f"evaluator.local.cache_dir={cache_dir}",
                            "--out", str(endless.parent / "logs2")], cwd=REPO, capture_output=True, text=True, timeout=300)
    said = [ln for ln in again.stderr.splitlines() if "removed what an interrupted grading left behind" in ln]
    assert len(said) == 1 and "1 sandbox folder(s)" in said[0], again.stderr
    assert leftovers(cache_dir, proc.pid) == {"processes": [], "sandbox_folders": [], "cgroups": [], "mounts": []}
