"""How the local sandbox gets its namespaces: as real root, or as an ordinary user in a user namespace.

The sandbox is the same either way (evaluator/backends/local_root.py lays out one root); what
differs is owned here, chosen once per process and named in every verdict (`sandbox: root` or
`rootless`) and in the prepared layer's cache key (a layer written as a mapped root carries
overlay's user.* xattrs, one written as root trusted.* ones: they do not mix):

- the unshare arguments: rootless adds `--user --map-root-user` (the user is root inside, nobody
  else is mapped), so mounts, chroot and the capability drop work as they do for root;
- overlay options: rootless overlays keep their whiteouts' and opaque folders' marks in user.*
  xattrs (`userxattr`, kernel 5.11+), which a mapped root may write;
- whiteouts: overlay's 0:0 character device, which the kernel lets anyone make (5.8+), so both
  modes make them the same way, outside the namespace;
- the hostname: root writes /proc/sys (the host's sysctl files, this UTS namespace's value);
  a mapped root may not write there, but may call sethostname in its own UTS namespace;
- the cgroup parent: root makes groups beside its own; a user only where a cgroup was handed
  to it (evaluator/limits.py asks `cgroup_parents`), else limits fall back to rlimits.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = "root"
ROOTLESS = "rootless"
# The settings that turn unprivileged user namespaces off, where each kernel keeps it.
_SWITCHES = (
    ("/proc/sys/kernel/unprivileged_userns_clone", "0", "sysctl kernel.unprivileged_userns_clone=1"),
    ("/proc/sys/user/max_user_namespaces", "0", "sysctl user.max_user_namespaces=15000"),
    ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
     "sysctl kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile allowing userns for python)"),
)
ALTERNATIVES = ("run pesflow as root, or grade through rootless podman: --backend docker with "
                "DOCKER_HOST=unix://$XDG_RUNTIME_DIR/podman/podman.sock (systemctl --user start podman.socket)")


class IsolationError(Exception):
    """The kernel will not give this user the namespaces: one line naming the setting and the ways out."""


@dataclass(frozen=True)
class Isolation:
    mode: str  # ROOT or ROOTLESS

    @property
    def rootless(self) -> bool:
        return self.mode == ROOTLESS

    @property
    def key(self) -> str:
        """What a prepared layer made this way is keyed on."""
        return "rootless-userxattr" if self.rootless else "root"

    def unshare(self, network: bool) -> list[str]:
        argv = ["unshare"]
        if self.rootless:
            argv += ["--user", "--map-root-user"]
        argv += ["--mount", "--pid", "--fork", "--kill-child=SIGKILL", "--propagation", "private"]
        if not network:
            argv.append("--net")
        return argv + ["--uts", "--ipc"]  # host name and SysV IPC stay the host's own

    @property
    def overlay_options(self) -> str:
        """Appended to every overlay mount's options."""
        return ",userxattr" if self.rootless else ""

    def hostname_line(self, name: str, python: str) -> str:
        if not self.rootless:
            return f"echo {name} > /proc/sys/kernel/hostname\n"
        # hostname(1) where the host has it (no interpreter to start), else the stand-in python
        return (f"hostname {name} 2>/dev/null || {python} -I -S -c 'import socket; socket.sethostname(\"{name}\")'\n")


def whiteout(path: Path) -> None:
    """Overlay's whiteout (a 0:0 character device) at `path`: hides what the lower layers hold there."""
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(0, 0))


@lru_cache(maxsize=1)
def current() -> Isolation:
    """The isolation this process grades with: root when it is root, else a user namespace
    (checked to work once; IsolationError, one line, when the kernel refuses)."""
    if os.geteuid() == 0:
        return Isolation(ROOT)
    refused = _probe()
    if refused is not None:
        raise IsolationError(refused)
    return Isolation(ROOTLESS)


def _probe() -> str | None:
    """None when this user can make the sandbox's namespaces, else why not (one line)."""
    try:
        r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "--net", "true"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return f"the local backend as an ordinary user could not run unshare ({type(e).__name__}); {ALTERNATIVES}"
    if r.returncode == 0:
        return None
    said = (r.stderr.strip().splitlines() or ["no output"])[-1][:200]
    off = [fix for path, bad, fix in _SWITCHES if _read(path) == bad]
    setting = ("it is off here: " + "; ".join(off)) if off else \
        "allow them (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, " \
        "kernel.apparmor_restrict_unprivileged_userns=0)"
    return (f"the local backend as an ordinary user needs unprivileged user namespaces, and this kernel refused one "
            f"({said}); {setting}; or {ALTERNATIVES}")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def readable_devices(paths: list[str]) -> list[str]:
    """The device nodes (a GPU's) this process may open: rootless, the others would only fail later."""
    if current().rootless:
        return [p for p in paths if os.path.isdir(p) or os.access(p, os.R_OK | os.W_OK)]
    return paths
