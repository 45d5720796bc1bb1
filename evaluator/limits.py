"""Resource limits of one grading: memory, processes, and the names of the kills they cause.

A grading's processes are put in a cgroup of their own before anything runs (a shell joins
it, then execs the sandbox), so every fork, thread and daemon inherits it and cannot leave.
cgroup v1 (one hierarchy per controller) and v2 (the unified hierarchy) are both used, each
only where this process may create a child group with that controller; where neither works
the fallbacks are weaker and say so in `Plan.warnings`:

- memory: RLIMIT_AS (address space, not resident memory; skipped for GPU tasks, whose
  drivers reserve far more address space than they use);
- processes: the sandbox's pid namespace is counted by polling /proc. Root ignores
  RLIMIT_NPROC, so that limit would protect nothing; an ordinary user's sandbox (a user
  namespace, evaluator/isolation.py) gets RLIMIT_NPROC set inside its namespace, where it
  counts that namespace's own processes and threads only, and the count is polled to name it.

An ordinary user makes groups only under a cgroup handed to it (`Limits.cgroup_parents`: a
folder it owns, e.g. under systemd's user manager), or under its own cgroup where that is
writable by it; `Plan.mechanisms` says which mechanism holds each limit (limits.json keeps
it), and `Plan.unenforced` names a limit nothing holds (a rootless GPU grading's memory).

The checks return the names a verdict carries: `out_of_memory`, `too_many_processes`
(and `host_out_of_memory`, which is the machine's trouble, not the candidate's).
"""

from __future__ import annotations

import os
import shlex
import signal
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
OUT_OF_MEMORY = "out_of_memory"
HOST_OUT_OF_MEMORY = "host_out_of_memory"  # the machine's OOM killer, the grading well under its limit: infra
TOO_MANY_PROCESSES = "too_many_processes"
DISK_QUOTA = "disk_quota"
OUTPUT_LIMIT = "output_limit"


def unenforced_note(names: list[str], what: str, ways: str) -> str:
    """The verdict's line for limits a grading took and nothing held (never dropped silently)."""
    return (f"unenforced_limit: {what} held the grading's {', '.join(names)} "
            f"limit{'s' if len(names) > 1 else ''}; {ways}")


@dataclass(frozen=True)
class Limits:
    memory_mb: int | None = None  # resident memory (page cache and tmpfs files included)
    pids: int | None = None  # processes + threads at once
    gpu: bool = False  # no RLIMIT_AS fallback for GPU work
    cgroup_parents: tuple[str, ...] = ()  # cgroups handed to an ordinary user (v2 groups, or v1 per controller)


def cgroups_of(pid: int | str = "self") -> dict[str, str]:
    """controller (or "" for v2) -> the cgroup path of a process, from /proc/<pid>/cgroup."""
    out: dict[str, str] = {}
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _v1_dir(controller: str) -> Path | None:
    own = cgroups_of()
    base = CGROUP_ROOT / controller
    if controller not in own or not (base / "cgroup.procs").exists():
        return None
    return base / own[controller].lstrip("/")


def _v2_dir() -> Path | None:
    own = cgroups_of()
    for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        if "" in own and (base / "cgroup.controllers").exists() and not (base / "memory" / "cgroup.procs").exists():
            return base / own[""].lstrip("/")
    return None


def _probe(parent: Path, files: tuple[str, ...]) -> bool:
    """Can a child group be made under `parent` and does it have `files`?"""
    probe = parent / f"pesflow-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return all((probe / f).exists() for f in files)
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


def _v2_enable(parent: Path, controller: str) -> bool:
    """v2 hands a controller to children only when the parent enables it (and holds no
    processes itself, unless it is the root): try, and report whether it is on."""
    try:
        if controller in (parent / "cgroup.subtree_control").read_text().split():
            return True
        (parent / "cgroup.subtree_control").write_text(f"+{controller}")
        return True
    except OSError:
        return False


@dataclass
class Support:
    """Where each controller can be used on this machine (None: not usable)."""

    memory: tuple[str, Path] | None  # ("v1" | "v2", parent group)
    pids: tuple[str, Path] | None


def _owned(parent: Path) -> bool:
    """May this (non-root) process make a group under `parent` and move itself into it?"""
    return os.access(parent, os.W_OK | os.X_OK) and os.access(parent / "cgroup.procs", os.W_OK)


def _given(parents: tuple[str, ...], controller: str, v1_files: tuple[str, ...],
           v2_files: tuple[str, ...]) -> tuple[str, Path] | None:
    """The first of `parents` (cgroups handed to a user) that gives `controller`."""
    for raw in parents:
        d = Path(raw)
        if not _owned(d):
            continue
        if (d / "cgroup.controllers").exists():  # v2
            if (controller in _read(d / "cgroup.controllers").split() and _v2_enable(d, controller)
                and _probe(d, v2_files)):
                return ("v2", d)
        elif _probe(d, v1_files):  # a v1 group of this controller's own hierarchy
            return ("v1", d)
    return None


@lru_cache(maxsize=8)
def detect(parents: tuple[str, ...] = ()) -> Support:
    def find(controller: str, v1_files: tuple[str, ...], v2_files: tuple[str, ...]) -> tuple[str, Path] | None:
        d = _v1_dir(controller)
        if d is not None and _probe(d, v1_files):
            return ("v1", d)
        d = _v2_dir()
        if (d is not None and controller in (d / "cgroup.controllers").read_text().split()
                and _v2_enable(d, controller) and _probe(d, v2_files)):
            return ("v2", d)
        return None

    if os.geteuid() != 0:
        # An ordinary user: only groups handed to it, then its own cgroup where it owns it.
        def given(controller: str, v1_files: tuple[str, ...], v2_files: tuple[str, ...]) -> tuple[str, Path] | None:
            own = [d for d in (_v1_dir(controller), _v2_dir()) if d is not None]
            return _given((*parents, *map(str, own)), controller, v1_files, v2_files)

        return Support(memory=given("memory", ("memory.limit_in_bytes", "memory.oom_control"),
                                    ("memory.max", "memory.events")),
                       pids=given("pids", ("pids.max",), ("pids.max", "pids.events")))
    return Support(
        memory=find("memory", ("memory.limit_in_bytes", "memory.oom_control"), ("memory.max", "memory.events")),
        pids=find("pids", ("pids.max",), ("pids.max", "pids.events")),
    )


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cgroup_count(path: Path | None, key: str) -> int:
    """The counter `key` of a cgroup events file (pids.events max, memory.events oom_kill); 0 when
    the file or the key is missing."""
    return _field(_read(path), key) if path is not None else 0


def kill_members(group: Path, spare: tuple[int, ...] = ()) -> list[int]:
    """SIGKILL every process of a cgroup but `spare`, until none is left (members may still be
    forking while the first ones die). Returns the pids killed."""
    killed: list[int] = []
    for _ in range(50):
        pids = [int(p) for p in _read(group / "cgroup.procs").split() if p.isdigit() and int(p) not in spare]
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
                killed.append(p)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    return killed


def _field(text: str, key: str) -> int:
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            try:
                return int(v.strip())
            except ValueError:
                return 0
    return 0


@dataclass
class Plan:
    """The limits of one grading as applied: the groups, the wrapper, what fell back."""

    limits: Limits
    groups: dict[str, tuple[str, Path]] = field(default_factory=dict)  # "memory"/"pids" -> (version, dir)
    rlimit_as_mb: int | None = None
    poll_pids: int | None = None  # count the pid namespace instead of a pids group
    rlimit_nproc: int | None = None  # rootless: RLIMIT_NPROC inside the user namespace (root ignores it)
    poll_rss_mb: int | None = None  # rootless without a memory group: the namespace's resident memory, polled
    rss_peak: int = 0
    warnings: list[str] = field(default_factory=list)
    mechanisms: dict[str, str] = field(default_factory=dict)  # limit -> what holds it (limits.json)
    unenforced: list[str] = field(default_factory=list)  # limits nothing holds: named in the verdict's message

    @classmethod
    def make(cls, limits: Limits) -> "Plan":
        plan = cls(limits)
        # detect() with no argument where no cgroup was handed over: the call as it always was
        support = detect(tuple(limits.cgroup_parents)) if limits.cgroup_parents else detect()
        rootless = os.geteuid() != 0
        tag = f"pesflow-{os.getpid()}-{uuid.uuid4().hex[:12]}"  # the owner's pid: a sweep can tell a dead one's
        if limits.memory_mb:
            if support.memory is not None:
                plan._group("memory", support.memory, tag)
                plan.mechanisms["memory"] = f"cgroup-{support.memory[0]}"
            elif limits.gpu:
                plan.warnings.append("no usable cgroup memory controller: this GPU grading runs without a memory limit")
                plan.mechanisms["memory"] = "none"
                plan.unenforced.append("memory")
            elif rootless:
                # A failed allocation under RLIMIT_AS is an exception a grader may swallow (and then
                # report the candidate's import failure): so the namespace's resident memory is
                # polled against the limit, which names the stop, and RLIMIT_AS at twice the limit
                # is the backstop between two polls.
                plan.rlimit_as_mb, plan.poll_rss_mb = 2 * limits.memory_mb, limits.memory_mb
                plan.warnings.append("no usable cgroup memory controller: resident memory "
                                     "polled, RLIMIT_AS (address space) at twice the limit")
                plan.mechanisms["memory"] = "poll_rss+rlimit_as"
            else:
                plan.rlimit_as_mb = limits.memory_mb
                plan.warnings.append("no usable cgroup memory controller: memory held by "
                                     "RLIMIT_AS (address space) instead")
                plan.mechanisms["memory"] = "rlimit_as"
        if limits.pids:
            if support.pids is not None:
                plan._group("pids", support.pids, tag)
                plan.mechanisms["pids"] = f"cgroup-{support.pids[0]}"
            elif rootless:
                plan.rlimit_nproc = plan.poll_pids = limits.pids
                plan.warnings.append("no usable cgroup pids controller: processes held by "
                                     "RLIMIT_NPROC in the user namespace")
                plan.mechanisms["pids"] = "rlimit_nproc"
            else:
                plan.poll_pids = limits.pids
                plan.warnings.append("no usable cgroup pids controller: processes counted by polling /proc instead")
                plan.mechanisms["pids"] = "poll"
        try:
            plan._write_limits()
        except OSError as e:
            plan.remove()
            raise LimitError(f"cannot set the grading's limits in its cgroup: {e}") from None
        return plan

    def _group(self, controller: str, where: tuple[str, Path], tag: str) -> None:
        version, parent = where
        _sweep(parent)
        d = parent / tag  # under v2 every controller shares this one group
        d.mkdir(exist_ok=True)
        self.groups[controller] = (version, d)

    def _write_limits(self) -> None:
        mb = self.limits.memory_mb
        if "memory" in self.groups:
            version, d = self.groups["memory"]
            if version == "v1":
                (d / "memory.limit_in_bytes").write_text(str(mb << 20))
                if (d / "memory.memsw.limit_in_bytes").exists():  # no escaping into swap
                    try:
                        (d / "memory.memsw.limit_in_bytes").write_text(str(mb << 20))
                    except OSError:
                        pass
            else:
                (d / "memory.max").write_text(str(mb << 20))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")
        if "pids" in self.groups:
            version, d = self.groups["pids"]
            (d / "pids.max").write_text(str(self.limits.pids))

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run by a shell that first joins the groups (and sets the rlimit), then execs it,
        so that nothing of the grading ever runs outside them."""
        lines = [f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))} || exit 98"
                 for d in dict.fromkeys(d for _, d in self.groups.values())]
        if self.rlimit_as_mb:
            lines.append(f"ulimit -v {self.rlimit_as_mb * 1024} || exit 98")
        if not lines:
            return argv
        return ["/bin/sh", "-c", "; ".join(lines) + '; exec "$@"', "pesflow-limits", *argv]

    def inner_lines(self) -> str:
        """Shell lines run first inside the namespaces (a user namespace's own RLIMIT_NPROC: set
        outside, it would count every process of the user, other gradings' too). Hard and soft:
        raising a hard limit needs CAP_SYS_RESOURCE outside the namespace, which nothing there has."""
        return f"ulimit -u {int(self.rlimit_nproc)} || exit 98\n" if self.rlimit_nproc else ""

    # while it runs -----------------------------------------------------------
    def counters(self) -> dict[str, int]:
        """Kernel counts of limit hits so far: OOM kills, refused forks."""
        out = {"oom_kill": 0, "pids_max": 0}
        if "memory" in self.groups:
            version, d = self.groups["memory"]
            out["oom_kill"] = _field(_read(d / ("memory.oom_control" if version == "v1" else "memory.events")),
                                     "oom_kill")
        if "pids" in self.groups:
            _, d = self.groups["pids"]
            out["pids_max"] = _field(_read(d / "pids.events"), "max")
        return out

    def breach(self, pid1: int | None) -> str | None:
        """The named limit the grading broke, or None."""
        c = self.counters()
        if c["oom_kill"]:
            # The group's counter also counts kills by the machine-wide OOM killer: a grading
            # that never came near its own limit was a victim of the machine, not the culprit.
            return (HOST_OUT_OF_MEMORY if machine_oom(self.usage().get("memory_peak_bytes"), self.limits.memory_mb)
                    else OUT_OF_MEMORY)
        if c["pids_max"]:
            return TOO_MANY_PROCESSES
        if (self.rlimit_nproc or self.poll_rss_mb) and pid1:
            tasks, rss = namespace_stats(pid1)
            self.rss_peak = max(self.rss_peak, rss)
            if self.rlimit_nproc and tasks >= self.rlimit_nproc - 1:
                return TOO_MANY_PROCESSES  # at the rlimit: the kernel is refusing its forks
            if self.poll_rss_mb and rss > self.poll_rss_mb << 20:
                return OUT_OF_MEMORY
        if self.poll_pids and not self.rlimit_nproc and pid1 and count_namespace(pid1) > self.poll_pids:
            return TOO_MANY_PROCESSES
        return None

    def usage(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        if "memory" in self.groups:
            version, d = self.groups["memory"]
            peak = _read(d / ("memory.max_usage_in_bytes" if version == "v1" else "memory.peak")).strip()
            out["memory_peak_bytes"] = int(peak) if peak.isdigit() else None
        if self.poll_rss_mb:
            out["memory_peak_bytes"] = self.rss_peak  # as often as it was polled
        if "pids" in self.groups:
            peak = _read(self.groups["pids"][1] / "pids.peak").strip()
            out["pids_peak"] = int(peak) if peak.isdigit() else None
        return out

    # after it ran ------------------------------------------------------------
    def remove(self) -> list[int]:
        """Kill whatever is still in the groups (nothing, normally: the namespace died with
        its init) and delete them. Returns the pids that had to be killed."""
        killed: list[int] = []
        for _, d in dict.fromkeys(self.groups.values()):
            killed += kill_members(d)
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.groups.clear()
        return sorted(set(killed))


class LimitError(Exception):
    """The limits could not be applied: a machine-level problem (infra_error)."""


def _sweep(parent: Path) -> int:
    """Groups left by a killed pesflow, removed: those whose owner (the pid in the name) is gone,
    their members killed first, and empty ones a minute old (a group another grading just made
    is empty until its shell joins it). Returns how many were removed."""
    removed = 0
    try:
        for d in parent.glob("pesflow-*"):
            try:
                parts = d.name.split("-")
                owner = int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
                dead = owner is not None and not pid_alive(owner)
                if dead:
                    kill_members(d)
                if (d.is_dir()
                    and (dead or (time.time() - d.stat().st_mtime > 60 and not _read(d / "cgroup.procs").split()))):
                    d.rmdir()
                    removed += 1
            except OSError:
                pass
    except OSError:
        pass
    return removed


def sweep_leftovers(parents: tuple[str, ...] = ()) -> int:
    """Every group a killed pesflow left, on each controller this machine lets pesflow use."""
    support = detect(tuple(parents)) if parents else detect()
    return sum(_sweep(where[1]) for where in dict.fromkeys(w for w in (support.memory, support.pids) if w))


def pid_alive(pid: int) -> bool:
    """Is `pid` a living process (a zombie, killed but not yet reaped, is not)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot; None: no such process). With the pid it
    names one process, even once the pid has been reused by another."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of proc(5); these start at field 3


def same_process(pid: int, start: str | None) -> bool:
    """Is the process that was `pid` when it started at `start` still living (None: any start)?"""
    return pid_alive(pid) and (start is None or process_start(pid) == start)


def namespace_stats(pid1: int) -> tuple[int, int]:
    """(tasks, resident bytes) of the pid namespace whose init has host pid `pid1`, in one walk of
    /proc: what RLIMIT_NPROC counts (processes and threads) and what a memory limit means. Memory
    is the proportional set size: pages forked children share count once, not once per child
    (a worker pool's RSS summed would be many times what it holds)."""
    try:
        ns = os.readlink(f"/proc/{pid1}/ns/pid")
    except OSError:
        return 0, 0
    tasks = rss = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") == ns:
                    tasks += len(os.listdir(f"/proc/{entry.name}/task"))
                    rss += _pss(entry.name)
            except (OSError, ValueError, IndexError):
                pass
    return tasks, rss


def _pss(pid: str) -> int:
    for line in _read(Path(f"/proc/{pid}/smaps_rollup")).splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) << 10
    return 0


def count_namespace(pid1: int) -> int:
    """Processes in the pid namespace whose init has host pid `pid1` (0 when it is gone)."""
    try:
        ns = os.readlink(f"/proc/{pid1}/ns/pid")
    except OSError:
        return 0
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") == ns:
                    n += 1
            except OSError:
                pass
    return n


MACHINE_OOM_SHARE = 0.9
# A process still running this long after the grader returned is a stray (helpers still exiting,
# e.g. a compile pool, get that long); every backend waits the same (issue 41).
STRAY_GRACE_SEC = 2.0


def machine_oom(peak_bytes: int | None, limit_mb: int | None) -> bool:
    """Whether an OOM kill was the machine's, not the candidate's: the group's counter also counts
    the machine-wide OOM killer, so a grading whose peak is known and stayed under 90 % of its own
    limit was its victim. No peak known: the candidate's (every backend: evaluator/grading_policy.py)."""
    return bool(peak_bytes is not None and limit_mb and peak_bytes < MACHINE_OOM_SHARE * (limit_mb << 20))
