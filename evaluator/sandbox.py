"""Run a bash script in fresh mount (+ pid, optionally net) namespaces, killable as a whole.

`unshare --fork --pid --kill-child` makes the script's shell PID 1 of a new pid namespace
and ties it to unshare's life: killing unshare's process group kills PID 1, and the kernel
then kills every process left in the namespace (daemons, forks, sleepers included). So a
timeout always ends the whole tree, and nothing a candidate starts outlives its grading.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


class SandboxUnavailable(Exception):
    """The machine cannot make the namespaces (not root, no unshare): an infrastructure problem."""


@dataclass
class SandboxResult:
    returncode: int
    timed_out: bool
    seconds: float
    output: str  # head and tail of stdout+stderr, bounded


def check_available() -> None:
    if shutil.which("unshare") is None:
        raise SandboxUnavailable("the local backend needs `unshare` (util-linux); install it (apt-get install util-linux)")
    if os.geteuid() != 0:
        raise SandboxUnavailable("the local backend needs root for mount and pid namespaces; run as root or use --backend docker")


class _BoundedSink:
    """Keeps the first and last `limit/2` bytes of a stream: gigantic output cannot fill memory or disk."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1024)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
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


def run(script: str, *, network: bool, timeout: float, env: dict[str, str] | None = None, max_output: int = 1 << 20) -> SandboxResult:
    """Run `script` (bash) as root in new mount+pid namespaces (and a net namespace with only
    loopback unless `network`); kill it all at `timeout`."""
    check_available()
    argv = ["unshare", "--mount", "--pid", "--fork", "--kill-child=SIGKILL", "--propagation", "private"]
    if not network:
        argv.append("--net")
    argv += ["bash", "-c", script]
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so the kill below reaches unshare and its helpers
        env=env if env is not None else {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    sink = _BoundedSink(max_output)

    def pump() -> None:
        assert proc.stdout is not None
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            sink.feed(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if proc.poll() is None or timed_out:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        reader.join(timeout=5)
    return SandboxResult(
        returncode=proc.returncode, timed_out=timed_out, seconds=time.monotonic() - start, output=sink.text()
    )


def q(value: str | Path) -> str:
    return shlex.quote(str(value))


def mount_root_script(
    *,
    lower: str | Path,
    upper: Path,
    work: Path,
    root: Path,
    ro: bool = False,
    hide: list[str] = (),  # type: ignore[assignment]
    binds_ro: list[tuple[Path, str]] = (),  # type: ignore[assignment]
) -> str:
    """Shell lines that mount an overlay root at `root` with /proc, /dev, /sys, a fresh /tmp,
    empty read-only tmpfs over each path of `hide`, and host folders bound read-only."""
    opts = f"lowerdir={lower},upperdir={upper},workdir={work}" + (",ro" if ro else "")
    lines = [
        "set -e",
        f"mount -t overlay overlay -o {q(opts)} {q(root)}",
        f"mount -t proc proc {q(root)}/proc",
        f"mount --rbind /dev {q(root)}/dev",
        f"mount -t tmpfs -o mode=1777 tmpfs {q(root)}/dev/shm",
        f"mount --rbind /sys {q(root)}/sys",
        f"mount -t tmpfs -o mode=1777 tmpfs {q(root)}/tmp",
        f"mkdir -p {q(root)}/var/tmp && mount -t tmpfs -o mode=1777 tmpfs {q(root)}/var/tmp",
    ]
    for h in hide:
        target = f"{root}{h}"
        lines.append(f"if [ -d {q(target)} ]; then mount -t tmpfs -o ro,size=4k,mode=0555 tmpfs {q(target)}; fi")
    for src, dest in binds_ro:
        target = f"{root}{dest}"
        make = f"mkdir -p {q(target)}" if Path(src).is_dir() else f"mkdir -p {q(Path(target).parent)} && touch {q(target)}"
        lines.append(f"{make} && mount --bind {q(src)} {q(target)} && mount -o remount,bind,ro {q(target)}")
    # `set -e` does not stop inside && lists: every line must succeed or the setup fails loudly.
    return "".join(f"{ln} || {{ echo '@@pesflow:setup-failed' >&2; exit 97; }}\n" if not ln.startswith("set ") else ln + "\n" for ln in lines)


def chroot_command(root: Path, env: dict[str, str], cwd: str, command: str, shell: list[str] | None = None) -> str:
    """A shell line that runs `command` inside `root` with exactly `env` (nothing inherited)."""
    shell = shell or ["/bin/sh", "-c"]
    inner = f"cd {q(cwd)} 2>/dev/null || cd /; {command}"
    env_args = " ".join(q(f"{k}={v}") for k, v in sorted(env.items()))
    return f"chroot {q(root)} /usr/bin/env -i {env_args} {' '.join(q(s) for s in shell)} {q(inner)}"
