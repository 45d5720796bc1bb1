"""The docker backend's containers: a reference container per image, a warm one per worker
slot, and the reset that puts a warm one back to the image's state between two gradings.

A *reference* container of the image is started and never graded in: it answers what the
baseline holds (scope files, the dev engine) and is the source every reset restores from.

A candidate is graded in a *warm* container, one per worker slot (evaluator/parallel.py),
created from the image with network none, the task's cpus/memory_mb, a pids limit, GPUs
when the task declares them, and two read-only binds of host staging folders: /tests
(filled with the package's tests/ only while the hidden grader runs) and
/.pesflow-reviewer (the reviewer's patch for oracle/negative).

Reset (after every grading) puts the container back to the image's state rather than
trusting git: git would miss /opt, /tmp and the rest, and `git clean -x` would delete build
products a Dockerfile left in the tree. Every process but the container's init is killed;
the engine's list of the container's changes (GET /containers/{id}/changes) says what was
added (removed), modified or deleted (restored from the reference container, cached per
image); directories get their mode and owner back; /dev, /dev/shm, /dev/mqueue, SysV IPC and
the engine's bind-mounted /etc files, which that list does not cover, are reset too. A reset
that cannot be done, or that would move too much, replaces the container instead, and so does
any change to the system folders the reset's own programs come from (our execs run with a
fixed system PATH, never the image's, which may lead into a venv a candidate can write). So
what one candidate leaves behind cannot reach the next (tests/test_docker_backend.py shows it).

The container's init is a shell loop with no signal handlers: the kernel does not deliver
signals from inside a pid namespace to its init unless it handles them, so a candidate
cannot stop the container; the loop also reaps orphaned processes.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, NotFound

from evaluator.backends.base import InfraError, Prepared
from evaluator.backends.docker.engine import _exec, _last_line, _read_file, _short
from evaluator.backends.docker.scripts import (
    COUNTERS_SCRIPT, RESET_SCRIPT, STAT_SCRIPT, VOLUME_SCRIPT, _keepalive, _oom, _peak, _pids_max, _volume_listing,
)
from evaluator.config import DockerConfig
from evaluator.grading_records import Slot
from evaluator.limits import CGROUP_ROOT, cgroup_count, cgroups_of, process_start, same_process
from evaluator.task import Task
from evaluator.trust import instrument, written

# PID 1 of every container: no signal handlers (so unkillable from inside), reaps orphans.
KEEPALIVE = "while :; do sleep 2147483647 & wait $!; done"
TESTS, REVIEWER = "/tests", "/.pesflow-reviewer"
TRUST_IN, TRUST_OUT = "/.pesflow-trust", "/.pesflow-trust-out"  # the trust screen's (evaluator/trust/instrument.py)
ENGINE_FILES = ("/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run/.containerenv")
MAX_RESET_PATHS = 2000  # a reset moving more than this replaces the container instead
# Where the programs our own execs run (sh, rm, chmod, kill, ...) and their libraries live. A
# candidate that changed anything there could have planted a trojan for the reset itself, so
# such a container is replaced rather than reset. Byte-code caches are data, not programs.
SYSTEM_PREFIXES = ("/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/usr/", "/etc/ld.so")
MAX_RESTORE_BYTES = 64 << 20
CACHE_FILE_BYTES = 1 << 20  # reference files up to this size are kept in memory for resets


class _Dirty(Exception):
    """The container cannot be put back cheaply; it is replaced."""


@dataclass
class _Warm:
    id: str
    name: str
    staging: Path
    slot: Slot  # the worker and the GPUs the container was created with
    baseline: set[tuple[str, int]] = field(default_factory=set)  # changes the engine made at start
    etc: dict[str, str] = field(default_factory=dict)  # engine-mounted files and their contents at start
    dev: list[str] = field(default_factory=list)  # the entries of /dev at start
    run: list[str] = field(default_factory=list)  # the entries of /run at start (the engine's)
    oom: int = 0
    pids_max: int = 0  # forks refused by the pids limit so far
    # The container's pids.events seen from this host, when the engine runs here: readable even
    # when a fork bomb leaves no pid free for an exec inside the container.
    pids_events: Path | None = None
    init_pid: int = 0  # the container's init as this host numbers it
    peak: int | None = None  # the container's highest memory use so far, in bytes
    keep: str = ""  # pid of the init's sleep, not a stray
    gradings: int = 0
    writable: list[str] = field(default_factory=list)  # the paths a grading may write (volumes)
    since: str = ""  # the container's clock when it was last reset: a later ctime is a change
    changed: set[tuple[str, int]] | None = None  # what the last grading changed, as its reset read it first
    # the text of each startup file in `changed` (graders_own)
    texts: dict[str, str | None] = field(default_factory=dict)


@dataclass
class _Ref:
    id: str
    stats: dict[str, tuple[str, int, int, int] | None] = field(default_factory=dict)  # path -> (type, mode, uid, gid)
    tars: dict[str, bytes] = field(default_factory=dict)  # path -> its archive (small files only)
    # writable path -> every entry the image has there
    listings: dict[str, frozenset[str]] = field(default_factory=dict)


class Containers:
    """A backend's containers (labelled with its session, this host and pid): the reference
    container of each image and the warm container of each (image, worker slot)."""

    def __init__(self, config: DockerConfig, cache: Path, writable: list[str], session: str):
        self.config = config
        self.cache = cache
        self.writable = writable  # evaluator.writable_paths
        self.session = session
        self._lock = threading.Lock()
        self._warm: dict[tuple[str, int], _Warm] = {}
        self._refs: dict[str, _Ref] = {}
        self._images: dict[str, str] = {}  # key -> image tag (to start a reference again)

    def sweep_leftovers(self, api: docker.APIClient) -> None:
        """Containers of pesflow processes on this host that died without closing: removed."""
        host = socket.gethostname()[:20]
        try:
            for c in api.containers(all=True, filters={"label": "pesflow.backend=docker"}):
                labels = c.get("Labels") or {}
                if labels.get("pesflow.host") != host:
                    continue
                pid = int(labels.get("pesflow.pid", "0") or 0)
                # a reused pid is not its owner
                if pid and not same_process(pid, labels.get("pesflow.started") or None):
                    api.remove_container(c["Id"], force=True, v=True)
        except (APIError, ValueError):
            pass

    def _labels(self, kind: str) -> dict[str, str]:
        return {"pesflow.backend": "docker", "pesflow.kind": kind, "pesflow.session": self.session,
                "pesflow.host": socket.gethostname()[:20], "pesflow.pid": str(os.getpid()),
                "pesflow.started": process_start(os.getpid()) or ""}

    # ---------------------------------------------------------------- containers
    def _create(self, api: docker.APIClient, image: str, name: str, kind: str, *, task: Task | None = None,
                staging: Path | None = None, slot: Slot | None = None,
                guard: list[tuple[str, str]] | None = None) -> str:
        hc: dict[str, Any] = {"network_mode": "none"}
        volumes: list[str] | None = None
        if task is not None:
            env = task.toml.environment
            # The grading cannot change what grades it: a read-only root, and writable only what a
            # grading writes, each a volume of the image's own content there (reset after each
            # grading) or a scratch tmpfs.
            hc["read_only"] = True
            hc["tmpfs"] = ({d: "rw,nosuid,nodev,mode=1777" for d in ("/tmp", "/var/tmp")}
                           | {"/run": "rw,nosuid,nodev,mode=755", TRUST_OUT: "rw,nosuid,nodev,mode=1777"})
            volumes = task.writable_paths(self.writable)
            hc["pids_limit"] = self.config.pids_limit
            if env.cpus:
                hc["nano_cpus"] = int(min(env.cpus, os.cpu_count() or env.cpus) * 1e9)
            if env.memory_mb:
                hc["mem_limit"] = hc["memswap_limit"] = f"{env.memory_mb}m"
            if slot is not None and slot.gpus > 0:
                hc.update(gpu_host_config(slot, self.config.gpus_via))
        if staging is not None:
            # a list, not the SDK's dict keyed by host path: one guard file goes to several folders
            hc["binds"] = [f"{staging / 'tests'}:{TESTS}:ro", f"{staging / 'reviewer'}:{REVIEWER}:ro",
                           f"{staging / 'trust'}:{TRUST_IN}:ro"]
            # the runtime guard in every site-packages folder of the image (inactive without a config)
            hc["binds"] += [f"{host}:{dest}:ro" for host, dest in guard or ()]
        try:
            cid = api.create_container(image, entrypoint=["/bin/sh", "-c", KEEPALIVE], name=name, detach=True,
                                       volumes=volumes, labels=self._labels(kind),
                                       host_config=api.create_host_config(**hc))["Id"]
            api.start(cid)
        except (APIError, DockerException) as e:
            raise InfraError(f"the engine could not start a container of {image}: {_short(e)}") from None
        return cid

    def reference(self, api: docker.APIClient, key: str, image: str) -> _Ref:
        """The running reference container of the image (started, and its tag kept to start it again)."""
        self._images[key] = image
        with self._lock:
            ref = self._refs.get(key)
        if ref is not None:
            try:
                if api.inspect_container(ref.id)["State"]["Running"]:
                    return ref
            except NotFound:
                pass
        old = ref
        if old is not None:
            try:
                api.remove_container(old.id, force=True, v=True)
            except (APIError, DockerException):
                pass
        ref = _Ref(id=self._create(api, image, f"pesflow-{self.session}-{key[:10]}-ref", "reference"))
        if old is not None:  # the same image: what the old one answered still holds
            ref.stats, ref.tars = old.stats, old.tars
        with self._lock:
            self._refs[key] = ref
        return ref

    def warm_for(self, api: docker.APIClient, prepared: Prepared, slot: Slot) -> _Warm:
        k = (prepared.key, slot.index)
        with self._lock:
            w = self._warm.get(k)
        if w is not None and w.slot == slot and self.config.warm_containers:
            return w
        if w is not None:
            self.discard(api, w)
        name = f"pesflow-{self.session}-{prepared.key[:10]}-w{slot.index}"
        staging = self.cache / "staging" / name
        for sub in ("tests", "reviewer", "trust"):
            shutil.rmtree(staging / sub, ignore_errors=True)
            (staging / sub).mkdir(parents=True)
        cid = self._create(api, prepared.state["image"], name, "worker", task=prepared.task, staging=staging, slot=slot,
                           guard=guard_binds(self.cache, prepared.state.get("site_dirs") or []))
        w = _Warm(id=cid, name=name, staging=staging, slot=slot, writable=prepared.task.writable_paths(self.writable))
        try:
            w.baseline = {(c["Path"], c["Kind"]) for c in (api.diff(cid) or [])}
            w.since = _volume_listing(_exec(api, cid, VOLUME_SCRIPT, args=["", *w.writable])[1])[2]
            for path in ENGINE_FILES:
                got = _read_file(api, cid, path)
                if got is not None:
                    w.etc[path] = got[0].decode(errors="replace")
            out = _exec(api, cid, RESET_SCRIPT, user="0")[1]
            w.dev = re.findall(r"^@@dev:(.*)$", out, re.M)
            w.run = re.findall(r"^@@run:(.*)$", out, re.M)
            w.oom = _oom(out)
            w.pids_max = _pids_max(out)
            w.keep = _keepalive(out)
            w.init_pid = api.inspect_container(cid)["State"].get("Pid") or 0
            w.pids_events = host_cgroup_file(w.init_pid, cid, "pids", "pids.events")
            w.pids_max = max(w.pids_max, cgroup_count(w.pids_events, "max"))
        except (APIError, DockerException) as e:
            self.discard(api, w)
            raise InfraError(f"a new container of {prepared.state['image']} could not be inspected: "
                             f"{_short(e)}") from None
        with self._lock:
            self._warm[k] = w
        return w

    def discard(self, api: docker.APIClient, w: _Warm) -> None:
        with self._lock:
            for k, v in list(self._warm.items()):
                if v is w:
                    del self._warm[k]
        try:
            api.remove_container(w.id, force=True, v=True)
        except (APIError, DockerException):
            pass
        shutil.rmtree(w.staging, ignore_errors=True)

    def close(self, api: docker.APIClient) -> None:
        """Every container and staging folder of this backend removed."""
        with self._lock:
            ids = [w.id for w in self._warm.values()] + [r.id for r in self._refs.values()]
            stagings = [w.staging for w in self._warm.values()]
            self._warm.clear()
            self._refs.clear()
        for cid in ids:
            try:
                api.remove_container(cid, force=True, v=True)
            except (APIError, DockerException):
                pass
        for s in stagings:
            shutil.rmtree(s, ignore_errors=True)

    # ---------------------------------------------------------------- the baseline
    def _on_reference(self, api: docker.APIClient, key: str, fn):  # noqa: ANN001, ANN202
        """fn(reference) ; a reference container that died is started again (its caches kept) once."""
        ref = self._refs[key]
        try:
            return fn(ref)
        except (NotFound, APIError):
            try:
                alive = api.inspect_container(ref.id)["State"]["Running"]
            except NotFound:
                alive = False
            if alive:
                raise  # the path, not the container, is missing
            return fn(self.reference(api, key, self._images[key]))

    def _ref_stats(self, api: docker.APIClient, key: str,
                   paths: list[str]) -> dict[str, tuple[str, int, int, int] | None]:
        ref = self._refs[key]
        todo = [p for p in paths if p not in ref.stats]
        for i in range(0, len(todo), 500):
            part = todo[i : i + 500]
            lines = self._on_reference(api, key, lambda r: _exec(api, r.id, STAT_SCRIPT, args=part))[1].splitlines()
            if len(lines) != len(part):
                raise _Dirty("the reference container did not describe every changed path")
            for p, line in zip(part, lines):
                bits = line.split("|")
                ref.stats[p] = (None if line == "missing" or len(bits) != 4
                                else (bits[0], int(bits[1], 8), int(bits[2]), int(bits[3])))
        return {p: ref.stats[p] for p in paths}

    def ref_archive(self, api: docker.APIClient, key: str, path: str) -> bytes:
        """The reference's archive of one path (b"" when the image has no such path)."""
        ref = self._refs[key]
        if path in ref.tars:
            return ref.tars[path]
        try:
            data = self._on_reference(api, key, lambda r: b"".join(api.get_archive(r.id, path)[0]))
        except NotFound:
            return b""
        if len(data) <= CACHE_FILE_BYTES:
            self._refs[key].tars[path] = data
        return data

    # ---------------------------------------------------------------- reset
    def read_counters(self, api: docker.APIClient, w: _Warm) -> None:
        """The container's OOM and refused-fork counters, when the reset that reads them failed."""
        try:
            out = _exec(api, w.id, COUNTERS_SCRIPT, user="0")[1]
        except (APIError, DockerException, InfraError):
            return
        w.oom = max(w.oom, _oom(out))
        w.pids_max = max(w.pids_max, _pids_max(out))

    def _volume_changes(self, api: docker.APIClient, key: str, w: _Warm) -> set[tuple[str, int]]:
        """What a grading changed in the writable paths (volumes, which the engine's list of
        changes does not cover), in that list's terms: 0 modified, 1 added, 2 deleted; and the
        startup files it wrote into the scratch tmpfs (added: each reset empties it)."""
        entries, changed, _, scratch = _volume_listing(_exec(api, w.id, VOLUME_SCRIPT, args=[w.since, *w.writable])[1])
        ref = self._refs[key]
        for path in w.writable:
            if path not in ref.listings:
                out = self._on_reference(api, key, lambda r: _exec(api, r.id, VOLUME_SCRIPT, args=["", path])[1])
                ref.listings[path] = frozenset(_volume_listing(out)[0])
        image = frozenset().union(*(ref.listings[p] for p in w.writable))
        return ({(p, 1) for p in (entries - image) | scratch} | {(p, 2) for p in image - entries}
                | {(p, 0) for p in changed & image})

    def changes(self, api: docker.APIClient, key: str, w: _Warm) -> set[tuple[str, int]]:
        """What the container's gradings changed since its last reset, in the engine's terms
        ((path, kind): 0 modified, 1 added, 2 deleted), the writable paths' volumes included."""
        return (({(c["Path"], c["Kind"]) for c in (api.diff(w.id) or [])} - w.baseline)
                | self._volume_changes(api, key, w))

    def reset(self, api: docker.APIClient, prepared: Prepared, w: _Warm) -> None:
        w.changed = None
        for _ in range(2):
            changes = self.changes(api, prepared.key, w)
            if w.changed is None:  # the grading's own, before anything was killed or put back
                w.changed = changes
                w.texts = {p: written.text_of(_exec(api, w.id, 'exec "$@"', args=[*written.READ_TEXT, p])[1])
                           for p, removed in written.startup_changes(changes) if not removed}
            if len(changes) > MAX_RESET_PATHS:
                raise _Dirty(f"{len(changes)} paths changed")
            # a directory listed only because something below it changed is not itself a change
            ancestors = {str(a) for p, _ in changes for a in Path(p).parents}
            system = [p for p, k in changes if is_system_path(p) and not (k == 0 and p in ancestors)]
            if system:
                raise _Dirty(f"system files changed ({system[0]}, ...): not trusted to run the reset")
            added = sorted(p for p, k in changes if k == 1)
            touched = sorted(p for p, k in changes if k in (0, 2) and p not in (TESTS, REVIEWER))
            stats = self._ref_stats(api, prepared.key, touched)
            ops: list[str] = []
            restore: list[str] = []
            for p in added:
                ops += ["rm", p]
            for p in touched:
                st = stats[p]
                if st is None:
                    continue  # not in the image (a mount point of the engine)
                if st[0] == "directory" and (p, 2) not in changes:
                    ops += ["dir", f"{st[1]:o}", str(st[2]), str(st[3]), p]
                else:
                    ops += ["rm", p]
                    restore.append(p)
            for path, text in w.etc.items():
                ops += ["etc", path, text]
            for name in w.dev:
                ops += ["dev", name]
            for name in w.run:
                ops += ["run", name]
            code, out = _exec(api, w.id, RESET_SCRIPT, args=ops, user="0")
            if "@@reset-done" not in out:
                raise _Dirty(f"the reset script failed: {_last_line(out)}")
            restore += re.findall(r"^@@refill:(.*)$", out, re.M)
            self._restore(api, prepared.key, w, restore)
            w.oom = max(w.oom, _oom(out))
            w.pids_max = max(w.pids_max, _pids_max(out))
            w.peak = _peak(out)
            w.keep = _keepalive(out)
            w.since = _volume_listing(_exec(api, w.id, VOLUME_SCRIPT, args=[""])[1])[2]
            if "@@survivors: none" in out:
                return
            # a process lived through the first kills: what it wrote after the list of changes
            # was made is looked at once more
        raise _Dirty("processes survived the reset")

    def _restore(self, api: docker.APIClient, key: str, w: _Warm, paths: list[str]) -> None:
        """The reference's copy of each path put back, one archive per writable path (the root is
        read-only: an engine takes archives into a volume, not over the whole root)."""
        if not paths:
            return
        bufs: dict[str, tuple[io.BytesIO, tarfile.TarFile]] = {}
        total = 0
        for p in sorted(set(paths)):
            data = self.ref_archive(api, key, p)
            total += len(data)
            if total > MAX_RESTORE_BYTES:
                raise _Dirty("too much to restore")
            into = next((v for v in sorted(w.writable, key=len, reverse=True) if p.startswith(v.rstrip("/") + "/")),
                        "/")
            if into not in bufs:
                buf = io.BytesIO()
                bufs[into] = (buf, tarfile.open(fileobj=buf, mode="w"))
            out = bufs[into][1]
            parent = os.path.relpath(os.path.dirname(p.rstrip("/")), into)
            parent = "" if parent == "." else parent
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as src:
                for m in src.getmembers():
                    f = src.extractfile(m) if m.isreg() else None
                    m.name = f"{parent}/{m.name}" if parent else m.name
                    if m.islnk():  # a hard link names another entry of the same archive
                        m.linkname = f"{parent}/{m.linkname}" if parent else m.linkname
                    out.addfile(m, f)
        for into, (buf, tf) in bufs.items():
            tf.close()
            if not api.put_archive(w.id, into, buf.getvalue()):
                raise _Dirty("the engine refused the restored files")


def guard_binds(cache: Path, site_dirs: list[str]) -> list[tuple[str, str]]:
    """(host file, container path): the guard's files (evaluator/trust/instrument.py) at each
    site-packages folder the image holds, bound read-only (the root is read-only)."""
    layer = instrument.make_layer(cache / f"trust-{instrument.guard_hash()}", ["/files"]) / "files"
    return [(str(layer / name), f"{d.rstrip('/')}/{name}") for d in site_dirs for name in instrument.GUARD_FILES]


def is_system_path(path: str) -> bool:
    if "/__pycache__" in path:
        return False
    return any((path + "/").startswith(p) if p.endswith("/") else path.startswith(p) for p in SYSTEM_PREFIXES)


def gpu_host_config(slot: Slot, via: str) -> dict[str, Any]:
    """How a container gets the slot's GPUs: the NVIDIA runtime's device requests (Docker), or
    CDI device names (podman with a CDI spec). No devices named: the first `gpus` the engine has."""
    ids = [str(d) for d in slot.devices]
    if via == "cdi":
        return {"devices": [f"nvidia.com/gpu={d}" for d in (ids or ["all"])]}
    req = (docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]]) if ids
           else docker.types.DeviceRequest(count=slot.gpus, capabilities=[["gpu"]]))
    return {"device_requests": [req]}







def host_cgroup_file(pid: int, cid: str, controller: str, name: str) -> Path | None:
    """The file `name` of the container's `controller` cgroup as this host sees it, or None when
    the engine is elsewhere (the pid's cgroup path must name the container, so that a pid of
    another machine's engine that happens to exist here is never read)."""
    groups = cgroups_of(pid) if pid > 0 else {}
    # cgroup v1 (a hierarchy per controller), then v2 (one hierarchy)
    for found in (CGROUP_ROOT / controller / groups.get(controller, "").lstrip("/") / name,
                  CGROUP_ROOT / groups.get("", "").lstrip("/") / name):
        if cid in str(found) and found.is_file():
            return found
    return None
