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
        raise SandboxUnavailable("the local backend needs `unshare` (util-linux); install it (apt-get install util-linux)")
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

    def text(self) -> str:
        mid = f"\n[... {self.dropped} bytes of output dropped ...]\n" if self.dropped else ""
        return (bytes(self.head) + mid.encode() + bytes(self.tail)).decode(errors="replace")


def run(script: str, *, network: bool, timeout: float, env: dict[str, str] | None = None, max_output: int = 1 << 20,
        limits: Limits | None = None, watch: Callable[[int], str | None] | None = None, grace: float = 0.0,
        max_output_total: int | None = None) -> SandboxResult:
    """Run `script` (bash) as root (a mapped root in a user namespace, for an ordinary user) in new mount+pid namespaces (and a net namespace with only
    loopback unless `network`); stop it all at `timeout`, at a broken limit, when `watch`
    (given the namespace's init, as a host pid) names a reason, or past `max_output_total`
    bytes of output. A stop first sends SIGUSR1 to the namespace's init and waits `grace`
    seconds for it to finish (when `grace` > 0), then kills the whole tree."""
    iso = check_available()
    if _stopping.is_set():
        raise Interrupted()
    try:
        plan = Plan.make(limits) if limits is not None else None
    except LimitError as e:
        raise SandboxUnavailable(str(e)) from None
    # limits held inside the namespace (rootless: RLIMIT_NPROC counts the namespace's own processes there)
    inner = plan.inner_lines() if plan is not None else ""
    argv = [*iso.unshare(network), "bash", "-c", inner + script]
    if plan is not None:
        argv = plan.wrap(argv)
    # SIGKILL when the thread that started it dies, pesflow killed included (set in the child by
    # setpriv before its exec: no Python runs between fork and exec).
    argv = [_setpriv(), "--pdeathsig", "KILL", "--", *argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the kill below reaches unshare and its helpers
            env=env if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
    except OSError:
        if plan is not None:
            plan.remove()
        raise
    with _live_lock:
        _live[proc.pid] = proc
    sink = BoundedSink(max_output)

    def pump() -> None:
        assert proc.stdout is not None
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            sink.feed(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    killed: str | None = None
    pid1: int | None = None
    try:
        deadline = start + timeout
        while True:
            try:
                proc.wait(timeout=max(0.0, min(POLL_SEC, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                pass
            pid1 = pid1 or _namespace_init(proc.pid)
            if time.monotonic() >= deadline:
                killed = "timeout"
            elif max_output_total is not None and sink.total > max_output_total:
                killed = OUTPUT_LIMIT
            else:
                killed = (plan.breach(pid1) if plan is not None else None) or (watch(pid1) if watch and pid1 else None)
            if killed:
                _stop(proc, pid1, grace)
                break
    finally:
        if proc.poll() is None:
            _killpg(proc.pid)
        proc.wait()
        with _live_lock:
            _live.pop(proc.pid, None)
        reader.join(timeout=5)
        usage: dict = {"output_bytes": sink.total}
        warnings: list[str] = []
        mechanisms: dict[str, str] = {}
        unenforced: list[str] = []
        if plan is not None:
            # A limit broken in the last moments, the grading ending on its own anyway.
            killed = killed or plan.breach(None)
            usage.update(plan.usage())
            warnings, mechanisms, unenforced = plan.warnings, plan.mechanisms, plan.unenforced
            left = plan.remove()
            if left:
                usage["killed_after_exit"] = len(left)
    if _stopping.is_set() and not killed:
        raise Interrupted()
    return SandboxResult(
        returncode=proc.returncode, timed_out=killed == "timeout", seconds=time.monotonic() - start,
        output=sink.text(), killed=killed, usage=usage, warnings=warnings, mechanisms=mechanisms, unenforced=unenforced,
    )


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
        lines.append(f"mount -t tmpfs -o size={int(size_mb)}m,nr_inodes={max(16384, int(size_mb) * 256)},mode=0700 tmpfs {q(scratch)}")
    lines.append(f"mkdir -p {q(scratch)}/upper {q(scratch)}/work {q(scratch)}/tmp {q(scratch)}/vartmp {q(scratch)}/shm {q(scratch)}/run")
    lines.append(f"chmod 1777 {q(scratch)}/tmp {q(scratch)}/vartmp {q(scratch)}/shm")
    lines.append(f"cp -a {q(seed)}/. {q(scratch)}/upper/")
    return checked(lines)


def checked(lines: list[str]) -> str:
    # `set -e` does not stop inside && lists: every line must succeed or the setup fails loudly.
    return "".join(f"{ln} || {{ echo '@@pesflow:setup-failed' >&2; exit 97; }}\n" if not ln.startswith("set ") else ln + "\n" for ln in lines)


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


# Run by the namespace's init after every other process of the grading is dead (nothing can
# swap a file for a link meanwhile): copies regular files only, never through a symlink,
# each cut at a byte limit, within a total, and notes how full the scratch got.
_COPY_OUT = r"""
import os, stat, sys
status, scratch, per_file, budget, results = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
pairs = list(zip(sys.argv[6::2], sys.argv[7::2]))
# A result file whose inode changed after the grader returned (ctime: no candidate can set it
# back) was forged by something that outlived the grader.
end = None
for line in open(status, errors="replace"):
    if line.startswith("grader_end="):
        end = float(line.split("=", 1)[1] or 0)
forged = []
for r in [r for r in results.split("\n") if r] if end else []:
    try:
        if os.lstat(r).st_ctime > end + 0.02:
            forged.append(r)
    except (OSError, ValueError):
        pass
files = 0
def one(src, dest):
    global budget, files
    if budget <= 0 or files >= 5000:
        return
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        data = f.read(min(per_file, budget))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "wb") as out:
        out.write(data)
    budget -= len(data)
    files += 1
for src, dest in pairs:
    try:
        st = os.lstat(src)
    except OSError:
        continue
    if stat.S_ISDIR(st.st_mode):
        for top, dirs, names in os.walk(src, followlinks=False):
            dirs.sort()
            for n in sorted(names):
                one(os.path.join(top, n), os.path.join(dest, os.path.relpath(os.path.join(top, n), src)))
    else:
        one(src, dest)
with open(status, "a") as f:
    if scratch:
        v = os.statvfs(scratch)
        f.write("scratch_used=%d\nscratch_total=%d\ninodes_free=%d\n" % ((v.f_blocks - v.f_bfree) * v.f_frsize, v.f_blocks * v.f_frsize, v.f_ffree))
    f.write("copied_files=%d\n" % files)
    if forged:
        f.write("forged=%s\n" % " ".join(forged))
"""


def supervised_command(command: str, *, proc: Path, status: Path, python: str, copy_out: list[tuple[Path, Path]],
                       max_file_bytes: int, max_total_bytes: int, scratch: Path | None = None,
                       stray_grace: float = 2.0, results: list[Path] = (),  # type: ignore[assignment]
                       bulk_copy: list[tuple[Path, Path]] = (), bulk_bytes: tuple[int, int] = (64 << 20, 256 << 20)) -> str:  # type: ignore[assignment]
    """Shell lines that run `command` (a chroot line) as the child of the namespace's init,
    which stays to: note the grader's exit and time in `status` (a host file the grader
    cannot see), name the processes that outlived it by more than `stray_grace` seconds
    (`strays=`; helpers still exiting, e.g. a compile pool, get that long), kill everything
    left, and copy `copy_out` (src, dest) pairs to the host before the namespace, and any
    tmpfs scratch with it, is gone (`bulk_copy` pairs too, with the larger per-file and total
    limits `bulk_bytes`: the trust screen's kept inputs), noting `forged=` for any of `results` (host paths of the
    grader's result files) changed after the grader returned. SIGUSR1 does the same at once (a
    stop); other signals are noted (`signalled=`) and change nothing."""
    proc_glob = f"{q(proc)}/[0-9]*"
    pairs = " ".join(f"{q(a)} {q(b)}" for a, b in copy_out)
    tick = q(status.with_name(status.name + ".tick"))
    bulk_pairs = " ".join(f"{q(a)} {q(b)}" for a, b in bulk_copy)
    bulk = (f"{q(python)} -I -S -c {q(_COPY_OUT)} /dev/null '' {int(bulk_bytes[0])} {int(bulk_bytes[1])} '' {bulk_pairs}"
            if bulk_copy else ":")
    return f"""set +e
S={q(status)}
note() {{ printf '%s\\n' "$@" >> "$S"; }}
# a fifo nobody writes: `read -t` on it is a sleep that starts no process (which would count)
mkfifo {tick} && exec 9<>{tick}
alive() {{
  local p st
  for p in {proc_glob}; do
    [ "${{p##*/}}" = 1 ] && continue
    st=""; read -r st 2>/dev/null < "$p/stat"; st=${{st##*) }}; st=${{st%% *}}
    [ -n "$st" ] && [ "$st" != Z ] && return 0
  done
  return 1
}}
finish() {{
  trap '' USR1
  kill -9 -1 2>/dev/null
  local i=0 left
  while :; do
    left=( {proc_glob} )
    [ "${{#left[@]}}" -le 1 ] && break
    i=$((i+1)); [ "$i" -gt 2000 ] && {{ note "unreaped=${{#left[@]}}"; break; }}
    wait 2>/dev/null
  done
  {q(python)} -I -S -c {q(_COPY_OUT)} "$S" {q(scratch or '')} {int(max_file_bytes)} {int(max_total_bytes)} {q(chr(10).join(map(str, results)))} {pairs}
  {bulk}
  exit "$1"
}}
trap 'note stopped=1; finish 137' USR1
# Only the grading itself can signal this init (the host sends USR1 alone): noted as tampering,
# and the grader is waited for all the same. Caught, not ignored, so the grader gets defaults.
for s in INT TERM HUP QUIT USR2 ALRM; do trap "note signalled=$s" "$s"; done
note "grader_start=$EPOCHREALTIME"
( exec 9>&-; {command} ) &
g=$!
wait "$g"
rc=$?
while kill -0 "$g" 2>/dev/null; do wait "$g"; rc=$?; done
note "grader_end=$EPOCHREALTIME" "grader_rc=$rc"
i=0
while alive && [ "$i" -lt {max(1, int(stray_grace / 0.05))} ]; do i=$((i+1)); read -r -t 0.05 -u 9 _; done
strays=()
for p in {proc_glob}; do
  n=${{p##*/}}
  [ "$n" = 1 ] && continue
  st=""; c="?"
  read -r st 2>/dev/null < "$p/stat"; st=${{st##*) }}; st=${{st%% *}}
  [ -z "$st" ] || [ "$st" = Z ] && continue
  read -r c 2>/dev/null < "$p/comm"
  strays+=("$n:${{c//[^A-Za-z0-9._-]/_}}")
done
[ "${{#strays[@]}}" -gt 0 ] && note "strays=${{strays[*]:0:20}}"
finish "$rc"
"""


def read_status(path: Path) -> dict[str, str]:
    """The notes of supervised_command (last value of each key wins)."""
    out: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out
