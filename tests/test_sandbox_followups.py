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


# The warm probe's part, stood in for: out of reach first (pesflow_probe_warm._shield), then its
# word on descriptor 3, its go a host file, its output on descriptor 4 (the sandbox's).
WARM = """
import os, sys, time
sys.path.insert(0, {inside!r})
from pesflow_probe_warm import _shield
say = os.fdopen(3, "w", buffering=1)
{shield}
say.write("ready 0 0\\n")
while not os.path.exists({go!r}):
    time.sleep(0.01)
say.write("run\\n")
say.close()
os.write(4, b"warm ran\\n")
sys.exit(7)
"""


def _warm_script(d: Path, grader: str, shield: bool = True, late: bool = False) -> str:
    from evaluator.trust.instrument import INSIDE
    (d / "scr").mkdir()
    (d / "proc").mkdir()
    (d / "follow").mkdir()
    (d / "warm.py").write_text(WARM.format(inside=str(INSIDE), go=str(d / "go"), shield='_shield(); say.write("shielded\\n")' if shield else ""))
    return f"mount -t proc proc {d}/proc\n" + supervise.supervised_command(
        grader, proc=d / "proc", status=d / "status", python=sys.executable, copy_out=[], max_file_bytes=1 << 20,
        max_total_bytes=1 << 20, follow=d / "follow", warm=f"{_capped()} {sys.executable} -I -S {d}/warm.py",
        warm_over=d / "over", warm_late=late)


def _capped() -> str:
    """What the local backend runs a grader and the warm process with: the capabilities a grader keeps."""
    caps = ",".join("+" + c for c in sandbox.GRADER_CAPS)
    return f"{sandbox._setpriv()} --bounding-set -all,{caps} --inh-caps -all --ambient-caps -all --"


def _warm_follow(d: Path, seen: dict):
    def followups(phase: sandbox.SandboxResult, more: sandbox.FollowUp) -> None:
        seen["status"] = supervise.read_status(d / "status")
        seen["over"] = (d / "over").stat().st_mtime if (d / "over").exists() else None
        (d / "follow" / "command").write_text(supervise.warm_go_lines(d / "follow", d / "go", d / "proc")
                                              + "echo cold; exit 3\n")
        (d / "follow" / "copy").write_text("")
        seen["first"] = more.run(30)
        seen["second"] = more.run(30)  # the warm process serves one follow-up: the next starts cold
    return followups


def test_the_warm_process_outlives_the_graders_reap_unnamed_and_runs_the_first_follow_up(tmp_path):
    d = tmp_path
    # the grader leaves a sleeper behind (a stray, reaped) and tries to stop the warm process
    grader = f"bash -c 'sleep 300 & read -r w _ < {d}/follow/warm.pid; kill -STOP $w; exit 0'"
    seen: dict = {}
    sandbox.run(_warm_script(d, grader), network=False, timeout=60, followups=_warm_follow(d, seen))
    assert "sleep" in seen["status"].get("strays", "") and "python" not in seen["status"].get("strays", ""), seen["status"]
    # the warm process is told once everything else is gone (it readies the GPU meanwhile)
    assert seen["over"] is not None and seen["over"] >= float(seen["status"]["grader_end"]), seen
    first, second = seen["first"], seen["second"]
    assert first.returncode == 0 and "warm ran" in first.output and "cold" not in first.output, first
    assert second.returncode == 3 and "cold" in second.output and "warm ran" not in second.output, second


def test_a_late_warm_process_starts_once_the_graders_processes_are_dead_and_runs_the_first_follow_up(tmp_path):
    d = tmp_path
    # the grader sees no warm process (none recorded, no other python), and leaves a sleeper behind
    grader = (f"bash -c 'ls {d}/follow > {d}/seen.txt; ls {d}/proc | grep -c \"^[0-9]\" >> {d}/seen.txt; "
              "sleep 300 & exit 0'")
    seen: dict = {}
    sandbox.run(_warm_script(d, grader, late=True), network=False, timeout=60, followups=_warm_follow(d, seen))
    listed = (d / "seen.txt").read_text().split()
    assert "warm.pid" not in listed and int(listed[-1]) <= 4, listed  # init, the grader's shells and ls: no warm process
    assert "sleep" in seen["status"].get("strays", ""), seen["status"]  # the grader's own stray, named and reaped
    assert seen["over"] is not None and seen["over"] >= float(seen["status"]["grader_end"]), seen
    first, second = seen["first"], seen["second"]
    assert first.returncode == 0 and "warm ran" in first.output and "cold" not in first.output, first
    assert second.returncode == 3 and "cold" in second.output and "warm ran" not in second.output, second


def test_a_warm_process_the_grader_killed_or_that_never_shielded_itself_leaves_the_probe_cold(tmp_path):
    for name, grader, shield in (("killed", "bash -c 'kill -9 -1; exit 0'", True), ("unshielded", "exit 0", False)):
        d = tmp_path / name
        d.mkdir()
        seen: dict = {}
        sandbox.run(_warm_script(d, grader, shield), network=False, timeout=60, followups=_warm_follow(d, seen))
        assert seen["first"].returncode == 3 and "cold" in seen["first"].output, (name, seen["first"])
        assert "warm ran" not in seen["first"].output, name


def test_the_grader_cannot_read_or_write_the_warm_process(tmp_path):
    """Non-dumpable, it is out of reach of a grader without CAP_SYS_PTRACE (the capabilities a
    grader keeps): its memory, environment and descriptors (its go, its word to the host)."""
    d = tmp_path
    probe = (f"read -r w _ < {d}/follow/warm.pid; for f in mem environ fd/3 fd/4; do "
             f"if (exec 5<> {d}/proc/$w/$f) 2>/dev/null || (exec 5< {d}/proc/$w/$f) 2>/dev/null; then echo reached $f; "
             f"else echo refused $f; fi; done > {d}/reach.txt")
    grader = f"{_capped()} bash -c {sandbox.q(probe)}"
    seen: dict = {}
    sandbox.run(_warm_script(d, grader), network=False, timeout=60, followups=_warm_follow(d, seen))
    assert (d / "reach.txt").read_text().split() == ["refused", "mem", "refused", "environ", "refused", "fd/3",
                                                     "refused", "fd/4"], (d / "reach.txt").read_text()
    assert seen["first"].returncode == 0 and "warm ran" in seen["first"].output, seen["first"]
