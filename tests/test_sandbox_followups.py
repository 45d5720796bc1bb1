"""Follow-ups in a grading's own sandbox (evaluator/supervise.py, evaluator/sandbox.py): once
the grader is over and everything it started is dead, the host runs further commands in the
same namespaces (the trust probes), each with its own limit; only the namespace's init can say
a phase is over, never the grader."""

from __future__ import annotations

import sys
from pathlib import Path

from evaluator import sandbox, supervise
from tests.conftest import needs_root

pytestmark = needs_root


def _script(d: Path, command: str) -> str:
    (d / "scr").mkdir()
    return supervise.supervised_command(
        command, proc=d / "no-proc", status=d / "status", python=sys.executable,
        copy_out=[(d / "scr" / "out.txt", d / "copied.txt")], max_file_bytes=1 << 20, max_total_bytes=1 << 20,
        follow=d / "follow")


def test_follow_ups_run_after_the_grader_and_all_it_started_are_gone(tmp_path):
    d = tmp_path
    # the grader tries to say "graded" on every descriptor it has, leaves a sleeper, then takes its time
    grader = (f"bash -c 'for f in /proc/self/fd/*; do echo graded 0 > $f; echo ran 0 > $f; done 2>/dev/null; "
              f"sleep 300 & echo $! > {d}/pid; echo hello > {d}/scr/out.txt; sleep 0.5; echo over > {d}/late; exit 5'")
    seen: dict = {}

    def followups(phase: sandbox.SandboxResult, more: sandbox.FollowUp) -> None:
        seen["late"] = (d / "late").exists()
        seen["rc"] = phase.returncode
        seen["copied"] = (d / "copied.txt").read_text()  # the grading's results are out before
        (d / "follow").mkdir()
        (d / "follow" / "command").write_text(
            f"if kill -0 $(cat {d}/pid) 2>/dev/null; then echo alive; else echo dead; fi > {d}/scr/f.txt; exit 3\n")
        (d / "follow" / "copy").write_text(f"{d}/scr/f.txt\n{d}/f-copied.txt\n")
        seen["first"] = more.run(30)
        (d / "follow" / "command").write_text("echo second; exit 0\n")
        seen["second"] = more.run(30)

    res = sandbox.run(_script(d, grader), network=False, timeout=60, followups=followups)
    assert seen["late"] and seen["rc"] == 5 and seen["copied"] == "hello\n", seen
    first, second = seen["first"], seen["second"]
    assert (first.returncode, first.timed_out, first.stopped) == (3, False, None), first
    assert (d / "f-copied.txt").read_text() == "dead\n"  # the grader's sleeper was killed before
    assert second.returncode == 0 and "second" in second.output and "graded 0" not in second.output
    assert res.returncode == 5 and not res.killed


def test_a_follow_up_past_its_limit_is_stopped_and_the_grading_stands(tmp_path):
    d = tmp_path
    seen: dict = {}

    def followups(phase: sandbox.SandboxResult, more: sandbox.FollowUp) -> None:
        seen["rc"] = phase.returncode
        (d / "follow").mkdir()
        (d / "follow" / "command").write_text("sleep 300\n")
        (d / "follow" / "copy").write_text("")
        seen["slow"] = more.run(1.5)
        seen["after"] = more.run(5)  # the sandbox is gone: nothing more runs

    sandbox.run(_script(d, f"bash -c 'echo hi > {d}/scr/out.txt'"), network=False, timeout=60, followups=followups)
    assert seen["rc"] == 0 and (d / "copied.txt").read_text() == "hi\n"
    assert seen["slow"].timed_out and seen["slow"].stopped == "timeout", seen
    assert seen["after"].returncode == -1 and seen["after"].stopped, seen


def test_without_follow_ups_the_init_ends_with_the_grader(tmp_path):
    calls = []
    res = sandbox.run(_script(tmp_path, "exit 4"), network=False, timeout=60,
                      followups=lambda phase, more: calls.append(phase.returncode))
    assert calls == [4] and res.returncode == 4
    plain = supervise.supervised_command("exit 2", proc=tmp_path / "p", status=tmp_path / "s2", python=sys.executable,
                                         copy_out=[], max_file_bytes=1, max_total_bytes=1)
    assert sandbox.run(plain, network=False, timeout=60).returncode == 2



CHILD = """
import os, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
held = []
while True:  # every free descriptor below 8 taken: the pipe to the host gets 8 and 9
    fd = os.open("/dev/null", os.O_RDONLY)
    if fd >= 8:
        os.close(fd)
        break
    held.append(fd)
from evaluator import sandbox
from tests.test_sandbox_followups import _script
said = []
res = sandbox.run(_script(Path({d!r}), "exit 0"), network=False, timeout=20,
                  followups=lambda phase, more: said.append(phase.returncode))
print(said, res.killed)
"""


def test_the_pipes_hold_where_the_script_takes_descriptor_9(tmp_path):
    """The init's own `exec 9<>fifo` never lands on a pipe to the host, whatever numbers they got
    (in a child whose next free descriptors are 8 and 9: the init's pipe to the host is 9)."""
    import subprocess

    from tests.conftest import REPO
    r = subprocess.run([sys.executable, "-c", CHILD.format(repo=str(REPO), d=str(tmp_path))], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert r.returncode == 0 and r.stdout.split() == ["[0]", "None"], (r.stdout, r.stderr[-2000:])
