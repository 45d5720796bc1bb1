"""Run a bash script in fresh mount (+ pid, optionally net) namespaces, killable as a whole.

`unshare --fork --pid --kill-child` makes the script's shell PID 1 of a new pid namespace
and ties it to unshare's life: killing unshare's process group kills PID 1, and the kernel
then kills every process left in the namespace (daemons, forks, sleepers included). So a
timeout always ends the whole tree, and nothing a candidate starts outlives its grading.

With `limits`, the whole tree also runs in cgroups (evaluator/limits.py) that are watched
while it runs: a broken limit stops it like a timeout does, and the result names the limit.
A script made with `supervised_command` stays PID 1 around the grader, so a stop can be
graceful (SIGUSR1: kill the rest of the namespace, copy the logs out, exit) before the hard
kill, and what outlived the grader is reported rather than silently reaped.

No sandbox outlives pesflow: each is started with a parent-death signal (SIGKILL to unshare
when the thread that started it dies, SIGKILL included), and `stop_all` (pesflow's SIGTERM,
SIGINT and SIGHUP handlers call it) kills every live one at once; a run that `stop_all`
ended raises `Interrupted` instead of returning a result, so no verdict is made of it.
"""

from __future__ import annotations

import os
import queue
import select
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from evaluator import isolation
from evaluator.isolation import Isolation
from evaluator.limits import OUTPUT_LIMIT, LimitError, Limits, Plan

POLL_SEC = 0.1  # how often the limits are looked at while a grading runs
# The follow-ups' pipes (evaluator/supervise.py): their descriptors' numbers, in the init's
# environment only (a grader's child closes both, and `env -i` starts the grader with none).
CTL_WRITE = "PESFLOW_CTL_W"  # init -> host: "graded RC", "ran RC"
CTL_READ = "PESFLOW_CTL_R"  # host -> init: "run" (the folder's `command`, then its `copy` list), or "end"
_live: dict[int, subprocess.Popen] = {}  # process group -> the sandbox's unshare
_live_lock = threading.Lock()
_stopping = threading.Event()


class Interrupted(BaseException):
    """pesflow is being stopped (a signal): the sandbox was killed, its result means nothing.
    A BaseException, like KeyboardInterrupt, so that no `except Exception` turns it into a verdict."""


def stop_all() -> int:
    """Kill every live sandbox's whole tree now (a signal handler's job); later runs refuse to
    start. Returns how many were killed."""
    _stopping.set()
    with _live_lock:
        groups = list(_live)
    for pgid in groups:
        _killpg(pgid)
    return len(groups)




class SandboxUnavailable(Exception):
    """The machine cannot make the namespaces (not root, no unshare): an infrastructure problem."""


@dataclass
class SandboxResult:
    returncode: int
    timed_out: bool
    seconds: float
    output: str  # head and tail of stdout+stderr, bounded
    killed: str | None = None  # the named reason it was stopped: timeout, out_of_memory, too_many_processes, ...
    usage: dict = field(default_factory=dict)  # peaks the limits saw (memory, processes, output bytes)
    warnings: list[str] = field(default_factory=list)  # limits that fell back to a weaker mechanism
    mechanisms: dict[str, str] = field(default_factory=dict)  # limit -> what held it (cgroup-v2, rlimit_nproc, ...)
    unenforced: list[str] = field(default_factory=list)  # limits nothing on this machine held


def check_available() -> Isolation:
    """How this process makes the namespaces (evaluator/isolation.py: root, or a user namespace)."""
    if shutil.which("unshare") is None:
        raise SandboxUnavailable("the local backend needs `unshare` (util-linux); install "
                                 "it (apt-get install util-linux)")
    try:
        return isolation.current()
    except isolation.IsolationError as e:
        raise SandboxUnavailable(str(e)) from None


class BoundedSink:
    """Keeps the first and last `limit/2` bytes of a stream: gigantic output cannot fill memory or disk."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1024)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                cut = len(self.tail) - self.half
                self.dropped += cut
                del self.tail[:cut]

    def since(self, mark: int) -> str:
        """What came after the first `mark` bytes, as far as it was kept."""
        if mark >= self.total:
            return ""
        if mark < len(self.head):
            return (bytes(self.head[mark:]) + self._gap() + bytes(self.tail)).decode(errors="replace")
        return bytes(self.tail[-(self.total - mark):]).decode(errors="replace")

    def text(self) -> str:
        return (bytes(self.head) + self._gap() + bytes(self.tail)).decode(errors="replace")

    def _gap(self) -> bytes:
        return f"\n[... {self.dropped} bytes of output dropped ...]\n".encode() if self.dropped else b""


def run(script: str, *, network: bool, timeout: float, env: dict[str, str] | None = None, max_output: int = 1 << 20,
        limits: Limits | None = None, watch: Callable[[int], str | None] | None = None, grace: float = 0.0,
        max_output_total: int | None = None,
        followups: "Callable[[SandboxResult, FollowUp], None] | None" = None) -> SandboxResult:
    """Run `script` (bash) as root (a mapped root in a user namespace, for an ordinary user) in new
    mount+pid namespaces (and a net namespace with only
    loopback unless `network`); stop it all at `timeout`, at a broken limit, when `watch`
    (given the namespace's init, as a host pid) names a reason, or past `max_output_total`
    bytes of output. A stop first sends SIGUSR1 to the namespace's init and waits `grace`
    seconds for it to finish (when `grace` > 0), then kills the whole tree.

    `followups` (for a script of evaluator/supervise.py made with `follow=`): called once the
    init says the grader is over and its results are out, with that phase's result and a
    FollowUp that runs further commands in the same sandbox; the sandbox ends when it returns."""
    iso = check_available()
    if _stopping.is_set():
        raise Interrupted()
    try:
        plan = Plan.make(limits) if limits is not None else None
    except LimitError as e:
        raise SandboxUnavailable(str(e)) from None
    argv = _argv(iso, network, plan, script, supervised=followups is not None)
    start = time.monotonic()
    env = dict(env if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    ctl = _Control() if followups is not None else None
    if ctl is not None:
        env.update(ctl.env())
    box = _Sandbox(argv, env, plan, ctl, start, max_output, _Stops(grace, watch, max_output_total))
    try:
        said = box.wait_for(start + timeout, "graded" if ctl is not None else None)
        if said is not None and followups is not None:
            box.follow(said, followups)
    finally:
        box.end()
    if _stopping.is_set() and not box.killed:
        raise Interrupted()
    return box.result()


def _argv(iso: Isolation, network: bool, plan: Plan | None, script: str, supervised: bool) -> list[str]:
    # limits held inside the namespace (rootless: RLIMIT_NPROC counts the namespace's own processes there)
    inner = plan.inner_lines() if plan is not None else ""
    if supervised:
        inner = _Control.REMAP + inner
    argv = [*iso.unshare(network), "bash", "-c", inner + script]
    if plan is not None:
        argv = plan.wrap(argv)
    # SIGKILL when the thread that started it dies, pesflow killed included (set in the child by
    # setpriv before its exec: no Python runs between fork and exec).
    return [_setpriv(), "--pdeathsig", "KILL", "--", *argv]


@dataclass
class _Stops:
    """What stops a sandbox besides its timeout and limits, and how gently."""
    grace: float
    watch: Callable[[int], str | None] | None
    max_output_total: int | None


class _Sandbox:
    """A started sandbox: its unshare, output, limits and pipes to the init; why it was stopped."""

    def __init__(self, argv: list[str], env: dict[str, str], plan: Plan | None, ctl: "_Control | None", start: float,
                 max_output: int, stops: _Stops):
        self.plan, self.ctl, self.start, self.stops = plan, ctl, start, stops
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so the kill below reaches unshare and its helpers
                env=env, pass_fds=ctl.inner if ctl is not None else (),
            )
        except OSError:
            if plan is not None:
                plan.remove()
            if ctl is not None:
                ctl.close()
            raise
        if ctl is not None:
            ctl.started()
        with _live_lock:
            _live[self.proc.pid] = self.proc
        self.sink = BoundedSink(max_output)
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()
        self.killed: str | None = None
        self.pid1: int | None = None
        self.usage: dict = {}

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            self.sink.feed(chunk)

    def wait_for(self, deadline: float, word: str | None) -> str | None:
        """Watch the limits until the sandbox ends, or (with `word`) until the init says it:
        the init's line, or None when the sandbox ended or was stopped first."""
        proc, ctl = self.proc, self.ctl
        while True:
            wait = max(0.0, min(POLL_SEC, deadline - time.monotonic()))
            if word is not None and ctl is not None:
                line = ctl.get(wait)
                if line is not None and line.split(" ", 1)[0] == word:
                    return line
                if proc.poll() is not None:
                    return None
            else:
                try:
                    proc.wait(timeout=wait)
                    return None
                except subprocess.TimeoutExpired:
                    pass
            self.pid1 = self.pid1 or _namespace_init(proc.pid)
            self.killed = self._stop_reason(deadline)
            if self.killed:
                _stop(proc, self.pid1, self.stops.grace)
                return None

    def _stop_reason(self, deadline: float) -> str | None:
        plan, watch, pid1 = self.plan, self.stops.watch, self.pid1
        if time.monotonic() >= deadline:
            return "timeout"
        if self.stops.max_output_total is not None and self.sink.total > self.stops.max_output_total:
            return OUTPUT_LIMIT
        return (plan.breach(pid1) if plan is not None else None) or (watch(pid1) if watch and pid1 else None)

    def follow(self, said: str, followups: "Callable[[SandboxResult, FollowUp], None]") -> None:
        """The grader is over: its phase's result handed to `followups` with a FollowUp, then the init told to end."""
        plan, ctl, sink = self.plan, self.ctl, self.sink
        assert ctl is not None
        phase = SandboxResult(returncode=_rc(said), timed_out=False, seconds=time.monotonic() - self.start,
                              killed=plan.breach(None) if plan is not None else None,
                              output=sink.text(), usage={"output_bytes": sink.total, **(plan.usage() if plan else {})},
                              warnings=list(plan.warnings) if plan else [],
                              mechanisms=dict(plan.mechanisms) if plan else {},
                              unenforced=list(plan.unenforced) if plan else [])
        try:
            followups(phase, FollowUp(ctl, sink, self.wait_for, lambda: self.killed))
        finally:
            ctl.say("end")
        try:  # the init exits once told: no limit is watched for that moment
            self.proc.wait(timeout=max(self.stops.grace, 5.0))
        except subprocess.TimeoutExpired:
            _killpg(self.proc.pid)

    def end(self) -> None:
        """Everything left killed and reaped, the output read; the limits' last look, then their removal."""
        if self.ctl is not None:
            self.ctl.close()
        if self.proc.poll() is None:
            _killpg(self.proc.pid)
        self.proc.wait()
        with _live_lock:
            _live.pop(self.proc.pid, None)
        self.reader.join(timeout=5)
        self.usage = {"output_bytes": self.sink.total}
        if self.plan is not None:
            # A limit broken in the last moments, the grading ending on its own anyway.
            self.killed = self.killed or self.plan.breach(None)
            self.usage.update(self.plan.usage())
            left = self.plan.remove()
            if left:
                self.usage["killed_after_exit"] = len(left)

    def result(self) -> SandboxResult:
        plan = self.plan
        return SandboxResult(
            returncode=self.proc.returncode, timed_out=self.killed == "timeout", seconds=time.monotonic() - self.start,
            output=self.sink.text(), killed=self.killed, usage=self.usage, warnings=plan.warnings if plan else [],
            mechanisms=plan.mechanisms if plan else {}, unenforced=plan.unenforced if plan else [],
        )


@dataclass
class FollowResult:
    returncode: int
    timed_out: bool
    seconds: float
    output: str  # what the follow-up printed (bounded like the rest)
    stopped: str | None = None  # why the sandbox was stopped during it (a limit): then it is over


class FollowUp:
    """Runs follow-up commands in a sandbox whose grader is over (evaluator/supervise.py):
    `run(limit)` has the init run its follow folder's `command` and waits for it."""

    def __init__(self, ctl: "_Control", sink: BoundedSink, wait_for: Callable[[float, str | None], str | None],
                 killed: Callable[[], str | None]):
        self._ctl, self._sink, self._wait_for, self._killed = ctl, sink, wait_for, killed

    def run(self, limit: float) -> FollowResult:
        start, mark = time.monotonic(), self._sink.total
        if self._killed() or not self._ctl.say("run"):
            return FollowResult(-1, False, 0.0, "", stopped=self._killed() or "the sandbox had ended")
        said = self._wait_for(start + limit, "ran")
        seconds, output = time.monotonic() - start, self._sink.since(mark)
        if said is None:
            why = self._killed()
            return FollowResult(-1, why == "timeout", seconds, output, stopped=why or "the sandbox had ended")
        return FollowResult(_rc(said), False, seconds, output)


class _Control:
    """The two pipes between the host and a supervised init (evaluator/supervise.py)."""

    # First thing in the sandbox's shell: the pipes moved to descriptors bash picks (10 and up,
    # free), the inherited numbers closed: a script's own `exec 9<>...` must never land on one.
    REMAP = (f'exec {{pf_w}}>&"${CTL_WRITE}" {{pf_r}}<&"${CTL_READ}" && exec {{{CTL_WRITE}}}>&- {{{CTL_READ}}}<&- '
             f'&& {CTL_WRITE}=$pf_w {CTL_READ}=$pf_r || exit 96\n')

    def __init__(self):
        self._up_r, self._up_w = os.pipe()  # init -> host
        self._down_r, self._down_w = os.pipe()  # host -> init
        self.inner = (self._up_w, self._down_r)
        self._lines: "queue.Queue[str]" = queue.Queue()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)

    def env(self) -> dict[str, str]:
        return {CTL_WRITE: str(self._up_w), CTL_READ: str(self._down_r)}

    def started(self) -> None:
        for fd in self.inner:  # the child holds them now: the host's copies would keep the pipes open
            os.close(fd)
        self.inner = ()
        self._reader.start()

    def _read(self) -> None:
        # This thread alone reads and closes the descriptor: closed under a reader, its number could
        # be reused by another grading's pipe, and this reader would take that grading's lines.
        buf = b""
        try:
            while not self._stop.is_set():
                if not select.select([self._up_r], [], [], 0.05)[0]:
                    continue
                chunk = os.read(self._up_r, 4096)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self._lines.put(line.decode(errors="replace").strip())
        finally:
            os.close(self._up_r)

    def get(self, timeout: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def say(self, word: str) -> bool:
        try:
            os.write(self._down_w, word.encode() + b"\n")
            return True
        except OSError:  # the init is gone
            return False

    def close(self) -> None:
        for fd in (*self.inner, self._down_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self.inner = ()
        self._stop.set()
        if self._reader.ident is not None:
            self._reader.join(timeout=2)  # it closes its descriptor as it ends
        else:  # never started (the sandbox did not start)
            os.close(self._up_r)


def _rc(line: str) -> int:
    try:
        return int(line.split(" ", 1)[1])
    except (IndexError, ValueError):
        return -1


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _namespace_init(unshare_pid: int) -> int | None:
    """The host pid of the new namespace's PID 1: the child `unshare --fork` made."""
    try:
        kids = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


def _stop(proc: subprocess.Popen, pid1: int | None, grace: float) -> None:
    """Ask the namespace's init to wind up (it kills the rest and copies the logs out);
    kill everything when it does not within `grace` seconds."""
    if grace > 0 and pid1:
        try:
            os.kill(pid1, signal.SIGUSR1)
            proc.wait(timeout=grace)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    _killpg(proc.pid)


def q(value: str | Path) -> str:
    return shlex.quote(str(value))


def scratch_script(scratch: Path, size_mb: int | None, seed: Path) -> str:
    """Shell lines that make the grading's scratch: one tmpfs of `size_mb` (None: a plain folder
    on the host's disk) holding the throwaway layer (seeded with the candidate's files from
    `seed`) and the folders for /tmp, /var/tmp and /dev/shm, so one cap covers every write."""
    lines = ["set -e"]
    if size_mb:
        # inodes capped too: a million empty files is a disk bomb as well
        lines.append(f"mount -t tmpfs -o size={int(size_mb)}m,nr_inodes="
                     f"{max(16384, int(size_mb) * 256)},mode=0700 tmpfs {q(scratch)}")
    lines.append(f"mkdir -p {q(scratch)}/upper {q(scratch)}/work {q(scratch)}/tmp {q(scratch)}/vartmp "
                 f"{q(scratch)}/shm {q(scratch)}/run")
    lines.append(f"chmod 1777 {q(scratch)}/tmp {q(scratch)}/vartmp {q(scratch)}/shm")
    lines.append(f"cp -a {q(seed)}/. {q(scratch)}/upper/")
    return checked(lines)


def checked(lines: list[str]) -> str:
    # `set -e` does not stop inside && lists: every line must succeed or the setup fails loudly.
    return "".join(f"{ln} || {{ echo '@@pesflow:setup-failed' >&2; exit 97; }}\n" if not ln.startswith("set ")
                   else ln + "\n" for ln in lines)


# The capabilities a grader keeps: Docker's default set less SYS_CHROOT (the chroot is the
# only wall between the grader and the host's files) and MKNOD (no device nodes). Without
# SYS_ADMIN nothing can be unmounted or remounted, so the hidden folders stay hidden and the
# read-only ones read-only; without SYS_PTRACE the unchrooted init is out of reach.
GRADER_CAPS = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
               "net_bind_service", "net_raw", "audit_write", "setfcap")


def chroot_command(root: Path, env: dict[str, str], cwd: str, command: str, shell: list[str] | None = None,
                   caps: tuple[str, ...] | None = None) -> str:
    """A shell line that runs `command` inside `root` with exactly `env` (nothing inherited),
    and, with `caps`, only those capabilities (the bounding set: nothing it runs regains more)."""
    shell = shell or ["/bin/sh", "-c"]
    inner = f"cd {q(cwd)} 2>/dev/null || cd /; {command}"
    env_args = " ".join(q(f"{k}={v}") for k, v in sorted(env.items()))
    drop = ""
    if caps is not None:
        # setpriv runs after chroot (which needs SYS_CHROOT): the host's binary, seen through the overlay
        drop = (f"{q(_setpriv())} --bounding-set -all{''.join(',+' + c for c in caps)} "
                "--inh-caps -all --ambient-caps -all -- ")
    return f"chroot {q(root)} {drop}/usr/bin/env -i {env_args} {' '.join(q(s) for s in shell)} {q(inner)}"


def _setpriv() -> str:
    path = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if path is None:
        raise SandboxUnavailable("the local backend needs `setpriv` (util-linux) to drop a grader's capabilities; "
                                 "install it (apt-get install util-linux)")
    return os.path.realpath(path)
