"""The sandbox's / from an allowlist: what the task's image would hold, and nothing else of the host.

A grading, and each RUN step of a Dockerfile replay, sees at its /:
- the package's image layer (what the replay wrote) over a skeleton of empty folders;
- the host's system folders as an image's base would have them: /usr, /etc without the
  host's own identity (its hostname, keys, password hashes, engine configs), the package
  manager's state under /var, and /bin, /lib... laid out as on the host;
- the host python that stands in for the image's: its prefixes and every folder on its
  sys.path, at their own paths, wherever they live (a venv under /tmp or /home included);
each of those as an overlay with the image layer on top, so what the replay changed wins.
Nothing else: not /root, /home, /srv, /work, /mnt, the host's /opt or the rest of /var,
another copy of a task, pesflow's own tree. In a grading all of it is read-only except
the writable paths (the source tree, /logs, HOME, the few the format's graders write),
each an overlay on the grading's scratch, and /tmp, /var/tmp, /dev/shm, /run.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.backends.standin import StandIn, outermost, within
from evaluator.isolation import whiteout
from evaluator.sandbox import checked, q

# Host folders an image's base provides (each where it exists on this host).
SYSTEM_AREAS = ("/usr", "/etc", "/var/lib/dpkg", "/var/lib/apt", "/var/cache/apt", "/var/cache/debconf", "/var/lib/ucf")
# Top-level names that are symlinks into /usr on merged-/usr hosts (mirrored), folders elsewhere (areas).
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
SKELETON = ("proc", "dev", "sys", "tmp", "run", "root", "home", "opt", "srv", "mnt", "media", "var/tmp", "var/log",
            "var/lib", "var/cache", "var/spool", "var/opt", "var/local", "var/mail")
# What /etc of a container does not hold of its host: the host's identity and secrets.
ETC_WITHHELD = ("shadow", "shadow-", "gshadow", "gshadow-", "ssh", "sudoers", "sudoers.d", "machine-id", "ssl/private",
                "containers", "docker", "subuid", "subuid-", "subgid", "subgid-", "security/opasswd", "hostname",
                "hosts")
HOSTNAME = "pesflow"
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run")


class RootError(Exception):
    """The root cannot be laid out (a path overlayfs cannot take): the machine's problem."""


def _depth(path: str) -> int:
    return len(Path(path).parts)


@dataclass
class Layout:
    """Which host folders show through and which paths a grading may write."""

    areas: list[str]  # host folders seen at their own path, outermost first
    links: dict[str, str]  # top-level symlinks mirrored from the host (bin -> usr/bin)
    writable: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, stand_in: StandIn, writable: list[str] = ()) -> "Layout":  # type: ignore[assignment]
        areas = [a for a in SYSTEM_AREAS if os.path.isdir(a)]
        links: dict[str, str] = {}
        for name in TOP_LEVEL:
            p = f"/{name}"
            if os.path.islink(p):
                links[name] = os.readlink(p)
            elif os.path.isdir(p):
                areas.append(p)
        covered = list(areas)
        for p in stand_in.paths:
            if not any(within(p, a) for a in covered) and not any(within(p, s) for s in ("/proc", "/sys", "/dev")):
                areas.append(p)
                covered.append(p)
        areas = outermost(areas)
        return cls(areas=areas, links=links, writable=outermost([w.rstrip("/") or "/" for w in writable if w != "/"]))

    def area_of(self, path: str) -> str | None:
        """The host folder `path` shows through, if any."""
        best = [a for a in self.areas if within(path, a)]
        return max(best, key=len) if best else None


def make_skeleton(dest: Path, layout: Layout, binds: list[tuple[Path, str]] = ()) -> None:  # type: ignore[assignment]
    """Empty folders (or files) for every mount point, the writable paths and the targets of
    `binds`, and the host's top-level links: a read-only root cannot make them later."""
    dest.mkdir(parents=True, exist_ok=True)
    for d in (*SKELETON, *[a.lstrip("/") for a in layout.areas], *[w.lstrip("/") for w in layout.writable], "logs"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    for src, target in binds:
        t = dest / target.lstrip("/")
        if Path(src).is_dir():
            t.mkdir(parents=True, exist_ok=True)
        else:
            t.parent.mkdir(parents=True, exist_ok=True)
            t.touch()
    for name, target in layout.links.items():
        link = dest / name
        if not link.is_symlink():
            link.symlink_to(target)
    (dest / "tmp").chmod(0o1777)
    (dest / "var/tmp").chmod(0o1777)


def make_identity(dest: Path) -> Path:
    """A layer over the host's /etc: a container's own hostname and hosts, and whiteouts (overlay's
    0:0 character devices) over what a container does not get of its host."""
    etc = dest / "etc"
    if (etc / ".done").is_file():
        return dest
    etc.mkdir(parents=True, exist_ok=True)
    for rel in ETC_WITHHELD:
        p = etc / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            st = p.lstat()
            if stat.S_ISCHR(st.st_mode):
                continue
            p.unlink()
        except FileNotFoundError:
            pass
        whiteout(p)
    (etc / "hostname").unlink()
    (etc / "hostname").write_text(HOSTNAME + "\n")
    (etc / "hosts").unlink()
    (etc / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
                               f"ip6-loopback\n127.0.1.1\t{HOSTNAME}\n")
    (etc / ".done").write_text("")
    return dest


def _opt(path: Path | str) -> str:
    s = str(path)
    if any(c in s for c in ",:\n"):
        raise RootError(f"{s}: overlayfs cannot take a path with ',' or ':'; move pesflow's "
                        "cache (evaluator.local.cache_dir)")
    return s


@dataclass
class RootPlan:
    """Everything that makes one root: its layers and where it goes."""

    layout: Layout
    image: Path  # the package's layer outside the host areas: the build's upper, a grading's top lower
    skeleton: Path
    identity: Path
    root: Path
    trust: Path | None = None  # the guard's files at each site-packages folder (evaluator/trust/instrument.py), on top
    overlay_options: str = ""  # appended to every overlay's options (evaluator/isolation.py: userxattr, rootless)

    @property
    def image_areas(self) -> Path:
        """The package's layer over each host area, apart (`<image>.areas/<area>`): two overlays
        must not share an upper tree, or a copy-up in one trips over the other's folders."""
        return self.image.with_name(self.image.name + ".areas")

    def layer_of(self, path: str) -> Path:
        """The tree of the package's layer that holds `path`."""
        return self.image_areas if self.layout.area_of(path) else self.image

    def image_at(self, path: str) -> Path:
        """Where the package's layer keeps `path`."""
        return self.layer_of(path) / path.lstrip("/")

    def _lowers(self, path: str, image: bool = True) -> list[str]:
        """The layers seen at `path`, top first, as overlay options spell them."""
        return [_opt(p) for p in self.lower_dirs(path, image)]

    def lower_dirs(self, path: str, image: bool = True) -> list[Path]:
        """The layers seen at `path`, top first: the image's, the identity over /etc, the host
        folder it shows through, the skeleton's mount points."""
        rel = path.lstrip("/")
        out = []
        if self.trust is not None and (self.trust / rel).is_dir():
            out.append(self.trust / rel)
        mine = self.image_at(path)
        if image and mine.is_dir() and not mine.is_symlink():
            out.append(mine)
        if within(path, "/etc") and (self.identity / rel).is_dir():
            out.append(self.identity / rel)
        if self.layout.area_of(path) is not None and os.path.isdir(path):
            out.append(Path(path))
        if (self.skeleton / rel).is_dir():
            out.append(self.skeleton / rel)
        return out

    def _target(self, path: str) -> str:
        return q(f"{self.root}{path}")

    def build_lines(self, work: Path) -> list[str]:
        """A replay step's root: everything writable into the package's layer."""
        r = q(self.root)
        lines = ["set -e", f"mkdir -p {q(work)}/base",
                 "mount -t overlay overlay -o "
                 f"""{q(f'lowerdir={_opt(self.skeleton)},upperdir={_opt(self.image)},'
                        f'workdir={_opt(work)}/base{self.overlay_options}')} {r}"""]
        regions = []
        for i, area in enumerate(self.layout.areas):
            lowers = self._lowers(area, image=False)
            upper = self.image_at(area)
            opts = f"lowerdir={':'.join(lowers)},upperdir={_opt(upper)},workdir={_opt(work)}/{i}{self.overlay_options}"
            regions.append((area, [f"mkdir -p {q(upper)} {q(work)}/{i} {self._target(area)}",
                                   f"mount -t overlay overlay -o {q(opts)} {self._target(area)}"]))
        regions += [(p, ls) for p, ls in _build_specials(r)]
        return lines + [ln for _, ls in sorted(regions, key=lambda x: _depth(x[0])) for ln in ls]

    def grading_lines(self, scratch: Path, devices: list[str]) -> list[str]:
        """A grading's root: the image read-only, the writable paths and the scratch folders on
        the grading's scratch (made by sandbox.scratch_script), /dev, /sys and /proc hardened."""
        r = q(self.root)
        top = f"{_opt(self.trust)}:" if self.trust is not None else ""
        lines = ["set -e",
                 "mount -t overlay overlay -o "
                 f"{q(f'lowerdir={top}{_opt(self.image)}:{_opt(self.skeleton)}{self.overlay_options}')} {r}"]
        regions: list[tuple[str, list[str]]] = []
        for path in self.layout.areas:  # a mount point under /tmp is made on the scratch, others exist
            regions.append((path, [f"mkdir -p {self._target(path)}",
                                   *_read_only(self._lowers(path), self._target(path), self.overlay_options)]))
        s = q(scratch)
        for i, path in enumerate(self.layout.writable):
            upper, work = f"{scratch}/upper{path}", f"{scratch}/work/w{i}"
            opts = (f"lowerdir={':'.join(self._lowers(path))},upperdir={_opt(upper)},workdir="
                    f"{_opt(work)}{self.overlay_options}")
            regions.append((path, [f"mkdir -p {q(upper)} {q(work)}",
                                   f"mount -t overlay overlay -o {q(opts)} {self._target(path)}"]))
        regions += _grading_specials(r, s, devices)
        return lines + [ln for _, ls in sorted(regions, key=lambda x: _depth(x[0])) for ln in ls]

    @staticmethod
    def written_folders(scratch: Path) -> list[tuple[Path, str]]:
        """Where grading_lines puts a grading's writes, each with its path in the sandbox: the
        writable paths' upper layers under /, and the scratch's folders for the special mounts."""
        return [(scratch / "upper", "/"), (scratch / "tmp", "/tmp"), (scratch / "vartmp", "/var/tmp"),
                (scratch / "shm", "/dev/shm"), (scratch / "run", "/run")]

    def writable_layers(self, scratch: Path) -> list[tuple[Path, str, list[Path]]]:
        """Each writable path's upper layer (as grading_lines mounts it), the path, and the layers
        under it: what the image holds there."""
        return [(scratch / "upper" / p.lstrip("/"), p, self.lower_dirs(p)) for p in self.layout.writable]


def _read_only(lowers: list[str], target: str, extra: str = "") -> list[str]:
    if len(lowers) == 1:
        return [f"mount --bind {q(lowers[0])} {target}", f"mount -o remount,bind,ro {target}"]
    return [f"mount -t overlay overlay -o {q('lowerdir=' + ':'.join(lowers) + extra)} {target}"]


def _build_specials(r: str) -> list[tuple[str, list[str]]]:
    return [
        ("/proc", [f"mount -t proc proc {r}/proc"]),
        ("/dev", [f"mount --rbind /dev {r}/dev", f"mount -t tmpfs -o mode=1777 tmpfs {r}/dev/shm"]),
        ("/sys", [f"mount --rbind /sys {r}/sys"]),
        ("/tmp", [f"mount -t tmpfs -o mode=1777 tmpfs {r}/tmp"]),
        ("/var/tmp", [f"mount -t tmpfs -o mode=1777 tmpfs {r}/var/tmp"]),
        ("/run", [f"if [ ! -L {r}/run ]; then mount -t tmpfs -o mode=0755 tmpfs {r}/run; fi"]),
    ]


# What container runtimes make read-only or hide in /proc: host-wide knobs and kernel memory.
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
_PROC_MASKED = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi", "asound")


def _grading_specials(r: str, s: str, devices: list[str]) -> list[tuple[str, list[str]]]:
    """As container runtimes do, for a grader that runs as root without the capabilities that
    would undo it (sandbox.GRADER_CAPS): /tmp, /var/tmp, /dev/shm and /run on the scratch (one
    cap, none of the host's sockets), /dev with only harmless devices (plus `devices`, e.g. the
    GPU's), a fresh read-only sysfs (no cgroupfs to leave the limits by), /proc's host-wide
    knobs read-only or masked."""
    proc = [f"mount -t proc -o nosuid,nodev,noexec proc {r}/proc"]
    for p in _PROC_READ_ONLY:
        proc.append(f"if [ -e {r}/proc/{p} ]; then mount --bind {r}/proc/{p} {r}/proc/{p} && mount -o "
                    f"remount,bind,ro {r}/proc/{p}; fi")
    for p in _PROC_MASKED:
        proc.append(f"if [ -f {r}/proc/{p} ]; then mount --bind /dev/null {r}/proc/{p}; "
                    f"elif [ -d {r}/proc/{p} ]; then mount -t tmpfs -o ro,size=4k tmpfs {r}/proc/{p}; fi")
    dev = [f"mount -t tmpfs -o mode=0755,nosuid,size=1m tmpfs {r}/dev"]
    for d in ("null", "zero", "full", "random", "urandom", "tty", *devices):
        src = d if d.startswith("/") else f"/dev/{d}"
        target = f"{r}/dev/{q(src[len('/dev/'):])}"
        dev.append(f"if [ -d {q(src)} ]; then mkdir -p {target}; else touch {target}; fi && "
                   f"mount --bind {q(src)} {target}")
    dev += [
        f"ln -s /proc/self/fd {r}/dev/fd && ln -s /proc/self/fd/0 {r}/dev/stdin && ln -s "
        f"/proc/self/fd/1 {r}/dev/stdout && ln -s /proc/self/fd/2 {r}/dev/stderr",
        f"mkdir -p {r}/dev/shm {r}/dev/pts && mount --bind {s}/shm {r}/dev/shm",
        f"mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts {r}/dev/pts && ln -s pts/ptmx {r}/dev/ptmx",
    ]
    return [
        ("/proc", proc), ("/dev", dev),
        ("/sys", [f"mount -t sysfs -o ro,nosuid,nodev,noexec sysfs {r}/sys"]),
        ("/tmp", [f"mount --bind {s}/tmp {r}/tmp"]),
        ("/var/tmp", [f"mount --bind {s}/vartmp {r}/var/tmp"]),
        ("/run", [f"if [ ! -L {r}/run ]; then mount --bind {s}/run {r}/run; fi"]),
    ]


def bind_lines(root: Path, binds_ro: list[tuple[Path, str]], hide: list[str] = (),  # type: ignore[assignment]
               binds_rw: list[tuple[Path, str]] = ()) -> list[str]:  # type: ignore[assignment]
    """Host paths bound read-only into the root (tests/, the reviewer's files, the GPU driver),
    `binds_rw` writable (the trust screen's out folder), then empty read-only folders over
    `hide` where they exist."""
    lines = [f"mkdir -p {q(src)} && mount --bind {q(src)} {q(f'{root}{dest}')}" for src, dest in binds_rw]
    for src, dest in binds_ro:  # their mount points are in the skeleton (make_skeleton)
        target = q(f"{root}{dest}")
        lines.append(f"mount --bind {q(src)} {target} && mount -o remount,bind,ro {target}")
    for h in hide:
        target = f"{root}{h}"
        lines.append(f"if [ -d {q(target)} ]; then mount -t tmpfs -o ro,size=4k,mode=0555 tmpfs {q(target)}; fi")
    return lines


def script(lines: list[str]) -> str:
    return checked(lines)
