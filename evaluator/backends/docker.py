"""The docker backend: a task graded inside its own image, through the Docker Engine API.

Any engine that serves that API will do: Docker itself, or podman's `podman system service`
(tools/podman_setup.sh). Only the SDK is used, never a docker binary.

Prepare (once per package content): the image is built from environment/Dockerfile with
the package root as context (evaluator/backends/build_context.py: .dockerignore applied,
tests/ and solution/ never sent, BuildKit heredocs rewritten, since neither podman 4.3 nor
the API's classic builder has them). It is tagged `pesflow-cache/<task>:<content key>`
(and with the task's docker_image). Base images are never pulled unless
evaluator.docker.pull says so: a missing one is an infra error naming the fix. A
*reference* container of the image is started and never graded in: it answers what the
baseline holds (scope files, the dev engine) and is the source every reset restores from.

Grade (per candidate) in a *warm* container, one per worker slot (evaluator/parallel.py),
created from the image with network none, the task's cpus/memory_mb, a pids limit, GPUs
when the task declares them, and two read-only binds of host staging folders: /tests
(filled with the package's tests/ only while the hidden grader runs) and
/.pesflow-reviewer (the reviewer's patch for oracle/negative). The candidate's files are
put into the tree, the grader runs as one exec (timed from inside; at the timeout every
process of the container but its init is killed), /logs is copied out as regular files only.

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

Verdicts match the local backend's: a candidate whose processes broke the memory limit (the
container's memory cgroup killed one) or outlived the grader gets the named hard fails
`out_of_memory` / `background_process`. The container dying, the engine failing or a build
failing is an InfraError (infra_error), which evaluator.parallel tries once more.

The container's init is a shell loop with no signal handlers: the kernel does not deliver
signals from inside a pid namespace to its init unless it handles them, so a candidate
cannot stop the container; the loop also reaps orphaned processes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import socket
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.utils import kwargs_from_env, parse_repository_tag

from evaluator import dockerfile
from evaluator.backends import archive
from evaluator.backends.base import GradeRequest, GradeRun, InfraError, Prepared
from evaluator.backends.build_context import base_images, build_context
from evaluator.backends.in_container import (
    ALIVE_FN, BACKGROUND_PROCESS, OUT_OF_MEMORY, grader_script, grader_seconds, left_running, with_reasons,
)
from evaluator.backends.local import grader_command
from evaluator.config import DockerConfig
from evaluator.limits import CGROUP_ROOT, TOO_MANY_PROCESSES, cgroup_count, cgroups_of, kill_members
from evaluator.parallel import Slot
from evaluator.sandbox import BoundedSink
from evaluator.task import NOT_IN_IMAGE, Task, package_hash
from evaluator.verdict import read_reward_file

BACKEND_VERSION = "docker-1"  # bump to rebuild images when the way they are built changes
# PID 1 of every container: no signal handlers (so unkillable from inside), reaps orphans.
KEEPALIVE = "while :; do sleep 2147483647 & wait $!; done"
TESTS, REVIEWER = "/tests", "/.pesflow-reviewer"
PODMAN_SOCKET = "/run/podman/podman.sock"
ENGINE_FILES = ("/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/run/.containerenv")
MAX_RESET_PATHS = 2000  # a reset moving more than this replaces the container instead
# Where the programs our own execs run (sh, rm, chmod, kill, ...) and their libraries live. A
# candidate that changed anything there could have planted a trojan for the reset itself, so
# such a container is replaced rather than reset. Byte-code caches are data, not programs.
SYSTEM_PREFIXES = ("/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/usr/", "/etc/ld.so")
OWN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}  # never the image's PATH (a venv a candidate can write)
MAX_RESTORE_BYTES = 64 << 20
CACHE_FILE_BYTES = 1 << 20  # reference files up to this size are kept in memory for resets
DEV_ENGINES = ("/opt/loop/score_engine.sh", "/opt/loop/private/dev_tests/test.sh", "/opt/loop/private/tests/test.sh")

# Runs as root in a container between two gradings (and once when it starts, with no
# operations). Operations come as arguments, so no path is ever split or re-parsed:
#   rm PATH | dir MODE UID GID PATH | etc PATH CONTENT | dev NAME, run NAME (a /dev, /run entry to keep)
# The container's limit counters: OOM kills, and forks the pids limit refused (cgroup v2, then
# v1), the trace a fork bomb leaves once it is killed.
COUNTERS_SCRIPT = r"""
for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
  if [ -r "$f" ]; then
    while read -r k v; do [ "$k" = oom_kill ] && echo "@@oom:$v"; done < "$f"
    break
  fi
done
for f in /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events; do
  if [ -r "$f" ]; then
    while read -r k v; do [ "$k" = max ] && echo "@@pidsmax:$v"; done < "$f"
    break
  fi
done
"""

RESET_SCRIPT = ALIVE_FN + r"""
keep=""
i=0
while :; do
  kill -9 -1 2>/dev/null
  alive
  [ -z "$left" ] && break
  i=$((i+1)); [ "$i" -ge 30 ] && break
  sleep 0.1
done
echo "@@survivors:${left:- none}"
keep_dev="/"
keep_run="/"
while [ $# -gt 0 ]; do
  case "$1" in
    rm) rm -rf -- "$2" 2>/dev/null; shift 2 ;;
    dir) if [ -d "$5" ] && [ ! -L "$5" ]; then chmod "$2" -- "$5"; chown "$3:$4" -- "$5"; else rm -rf -- "$5"; echo "@@refill:$5"; fi; shift 5 ;;
    etc) printf '%s' "$3" > "$2" 2>/dev/null; shift 3 ;;
    dev) keep_dev="$keep_dev$2/"; shift 2 ;;
    run) keep_run="$keep_run$2/"; shift 2 ;;
    *) shift ;;
  esac
done
if [ "$keep_dev" != "/" ]; then
  for f in /dev/* /dev/.[!.]* /dev/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    case "$keep_dev" in *"/${f#/dev/}/"*) ;; *) rm -rf -- "$f" 2>/dev/null ;; esac
  done
fi
rm -rf /dev/shm/* /dev/shm/.[!.]* /dev/shm/..?* /dev/mqueue/* 2>/dev/null
# the scratch tmpfs (not in the engine's list of changes): emptied; /run keeps what the engine put there
rm -rf /tmp/* /tmp/.[!.]* /tmp/..?* /var/tmp/* /var/tmp/.[!.]* /var/tmp/..?* 2>/dev/null
if [ "$keep_run" != "/" ]; then
  for f in /run/* /run/.[!.]* /run/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    case "$keep_run" in *"/${f#/run/}/"*) ;; *) rm -rf -- "$f" 2>/dev/null ;; esac
  done
fi
for f in /run/* /run/.[!.]* /run/..?*; do [ -e "$f" ] || [ -L "$f" ] && echo "@@run:${f#/run/}"; done
command -v ipcrm >/dev/null 2>&1 && ipcrm --all >/dev/null 2>&1
for f in /dev/*; do echo "@@dev:${f#/dev/}"; done
""" + COUNTERS_SCRIPT + r"""
for f in /sys/fs/cgroup/memory.peak /sys/fs/cgroup/memory/memory.max_usage_in_bytes; do
  [ -r "$f" ] && { read -r v < "$f"; echo "@@peak:$v"; break; }
done
# the init's sleep, which the grader's own stray check must not count
j=0
while [ "$j" -lt 50 ]; do
  for d in /proc/[0-9]*; do
    read -r st < "$d/stat" 2>/dev/null || continue
    rest=${st##*) }; state=${rest%% *}; rest=${rest#* }; ppid=${rest%% *}; comm=${st#*(}; comm=${comm%)*}
    # not the sleep the kills above just ended (a zombie until the init reaps it and starts another)
    [ "$state" = Z ] && continue
    [ "$ppid" = 1 ] && [ "$comm" = sleep ] && { echo "@@keepalive:${d#/proc/}"; j=99; break; }
  done
  j=$((j+1)); [ "$j" -lt 50 ] && sleep 0.02
done
echo "@@reset-done"
"""


# The writable paths' entries (A) and those whose inode changed since the last reset (C: ctime,
# which nothing in the container can set back), NUL-separated; then the container's clock.
VOLUME_SCRIPT = r"""
since="$1"; shift
for w in "$@"; do
  [ -d "$w" ] || continue
  find "$w" -xdev -mindepth 1 -printf 'A %p\0'
  [ -n "$since" ] && find "$w" -xdev -newerct "@$since" -printf 'C %p\0'
done
sleep 0.02
printf 'T %s\0' "$(date +%s.%N)"
"""

STAT_SCRIPT = r"""
for p in "$@"; do
  if [ -e "$p" ] || [ -L "$p" ]; then stat -c '%F|%a|%u|%g' -- "$p"; else echo missing; fi
done
"""


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


@dataclass
class _Ref:
    id: str
    stats: dict[str, tuple[str, int, int, int] | None] = field(default_factory=dict)  # path -> (type, mode, uid, gid)
    tars: dict[str, bytes] = field(default_factory=dict)  # path -> its archive (small files only)
    listings: dict[str, frozenset[str]] = field(default_factory=dict)  # writable path -> every entry the image has there


def _short(e: BaseException) -> str:
    text = getattr(e, "explanation", None) or str(e)
    return " ".join(str(text).split())[:300]


def _last_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "task"


class DockerBackend:
    name = "docker"

    def __init__(self, config: DockerConfig | None = None, cache_dir: Path | None = None, writable: list[str] = ()):  # type: ignore[assignment]
        self.config = config or DockerConfig()
        self.writable = list(writable)  # evaluator.writable_paths
        self.cache = Path(cache_dir or self.config.cache_dir).expanduser().resolve() / "docker"
        self.session = f"{socket.gethostname()[:20]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._version: str | None = None
        self._kwargs: dict[str, Any] = {}
        self._base_url: str | None = None
        self._slot_locks: dict[tuple[str, int], threading.Lock] = {}
        self._warm: dict[tuple[str, int], _Warm] = {}
        self._refs: dict[str, _Ref] = {}
        self._images: dict[str, str] = {}  # key -> image tag (to start a reference again)
        self._swept = False

    # ---------------------------------------------------------------- the engine
    def api(self) -> docker.APIClient:
        """A client per thread (the SDK's HTTP session is not meant to be shared by threads)."""
        client = getattr(self._local, "api", None)
        if client is not None:
            return client
        with self._lock:
            if self._version is None:
                kwargs = kwargs_from_env()
                if self.config.base_url:
                    kwargs["base_url"] = self.config.base_url
                elif "base_url" not in kwargs and not os.path.exists("/var/run/docker.sock") and os.path.exists(PODMAN_SOCKET):
                    kwargs["base_url"] = f"unix://{PODMAN_SOCKET}"  # podman's, as tools/podman_setup.sh serves it
                self._base_url = kwargs.get("base_url") or "the default socket (unix:///var/run/docker.sock)"
                try:
                    probe = docker.APIClient(version="auto", timeout=15, **kwargs)
                    probe.ping()
                except (DockerException, OSError) as e:
                    raise InfraError(
                        f"no container engine answers at {self._base_url} ({_short(e)}); start one "
                        "(tools/podman_setup.sh serves podman's) and set DOCKER_HOST or evaluator.docker.base_url"
                    ) from None
                self._version, self._kwargs = probe.api_version, kwargs
                probe.close()
        client = docker.APIClient(version=self._version, timeout=self.config.api_timeout_sec, **self._kwargs)
        self._local.api = client
        if not self._swept:
            self._swept = True
            self._sweep_leftovers(client)
        return client

    def _sweep_leftovers(self, api: docker.APIClient) -> None:
        """Containers of pesflow processes on this host that died without closing: removed."""
        host = socket.gethostname()[:20]
        try:
            for c in api.containers(all=True, filters={"label": "pesflow.backend=docker"}):
                labels = c.get("Labels") or {}
                if labels.get("pesflow.host") != host:
                    continue
                pid = int(labels.get("pesflow.pid", "0") or 0)
                if pid and not Path(f"/proc/{pid}").exists():
                    api.remove_container(c["Id"], force=True, v=True)
        except (APIError, ValueError):
            pass

    def _labels(self, kind: str) -> dict[str, str]:
        return {"pesflow.backend": "docker", "pesflow.kind": kind, "pesflow.session": self.session,
                "pesflow.host": socket.gethostname()[:20], "pesflow.pid": str(os.getpid())}

    # ---------------------------------------------------------------- prepare
    def _key(self, task: Task) -> str:
        h = hashlib.sha256()
        h.update(package_hash(task.root, exclude_top=NOT_IN_IMAGE).encode())
        h.update(BACKEND_VERSION.encode())
        return h.hexdigest()[:20]

    def image_tag(self, task: Task) -> str:
        """The image a package's content is built into (and found by, next time)."""
        return f"pesflow-cache/{_slug(task.name)}:{self._key(task)}"

    def prepare(self, task: Task) -> Prepared:
        try:
            return self._prepare(task)
        except (APIError, DockerException) as e:
            raise InfraError(f"the container engine failed while preparing {task.name}: {_short(e)}") from None

    def _prepare(self, task: Task) -> Prepared:
        api = self.api()
        key = self._key(task)
        tag = self.image_tag(task)
        start = time.monotonic()
        warnings: list[str] = []
        cached = self._image_exists(api, tag)
        if not cached:
            self._build(api, task, key, tag, warnings)
        self._images[key] = tag
        ref = self._reference(api, key, tag)
        found = self._exec(api, ref.id, 'for f in "$@"; do [ -f "$f" ] && echo "$f"; done', args=list(DEV_ENGINES))[1].split()
        dev_engine = "score_engine" if DEV_ENGINES[0] in found else next((f for f in DEV_ENGINES[1:] if f in found), None)
        state = {"image": tag, "dev_engine": dev_engine, "backend": BACKEND_VERSION, "task": task.name}
        return Prepared(task=task, key=key, seconds=0.0 if cached else round(time.monotonic() - start, 3),
                        cached=cached, warnings=warnings, state=state)

    @staticmethod
    def _image_exists(api: docker.APIClient, name: str) -> bool:
        try:
            api.inspect_image(name)
            return True
        except (ImageNotFound, NotFound):
            return False
        except APIError as e:
            raise InfraError(f"the engine failed to look up image {name}: {_short(e)}") from None

    def _build(self, api: docker.APIClient, task: Task, key: str, tag: str, warnings: list[str]) -> None:
        df = task.dockerfile
        try:
            ctx = build_context(task)
        except dockerfile.DockerfileError as e:
            raise InfraError(str(e)) from None
        for image in base_images(ctx.rewritten.text, df):
            if self._image_exists(api, image):
                continue
            if not self.config.pull:
                raise InfraError(f"{df}: base image {image} is not in the engine and pesflow does not pull "
                                 f"(evaluator.docker.pull=false); build it locally (tools/podman_setup.sh makes "
                                 f"python:3.11-slim-bookworm) or pull it, or set evaluator.docker.pull=true")
            try:
                repo, tg = parse_repository_tag(image)
                api.pull(repo, tag=tg or "latest")
            except APIError as e:
                raise InfraError(f"{df}: pulling base image {image} failed: {_short(e)}") from None
        if ctx.rewritten.steps:
            warnings.append(f"{ctx.rewritten.steps} BuildKit heredoc step(s) rewritten as COPY + RUN of a generated file")
        home = self.cache / key
        home.mkdir(parents=True, exist_ok=True)
        log_path = home / "build.log"
        limit = task.toml.environment.build_timeout_sec
        deadline = time.monotonic() + limit
        buildargs = {k: os.environ[k] for k in self.config.build_args_from_env if k in os.environ}
        last_step, error = "", None
        with open(log_path, "w") as log:
            log.write(f"# pesflow docker build of {task.name} -> {tag}\n# rewritten Dockerfile:\n{ctx.rewritten.text}\n")
            try:
                stream = api.build(fileobj=io.BytesIO(ctx.tar), custom_context=True, dockerfile=ctx.dockerfile, tag=tag,
                                   rm=True, forcerm=True, pull=False, decode=True, network_mode=self.config.build_network,
                                   buildargs=buildargs, labels={"pesflow.task": task.name, "pesflow.key": key},
                                   timeout=max(limit, 30))
                for chunk in stream:
                    text = chunk.get("stream") or chunk.get("status") or ""
                    if text:
                        log.write(text if text.endswith("\n") else text + "\n")
                        for line in text.splitlines():
                            if re.match(r"\s*(STEP|Step) \d+", line):
                                last_step = line.strip()
                    if chunk.get("error") or chunk.get("errorDetail"):
                        error = chunk.get("error") or (chunk.get("errorDetail") or {}).get("message")
                        log.write(f"ERROR: {error}\n")
                    if time.monotonic() > deadline:
                        raise InfraError(f"{df}: building the image took longer than build_timeout_sec={limit:g}; see {log_path}")
            except (APIError, DockerException, OSError) as e:
                error = _short(e)
                log.write(f"ERROR: {error}\n")
        if error or not self._image_exists(api, tag):
            where = f" at {last_step[:200]}" if last_step else ""
            raise InfraError(f"{df}: image build failed{where}: {_last_line(str(error or 'no image was produced'))} "
                             f"(full log: {log_path})")
        if task.toml.environment.docker_image:
            try:
                repo, tg = parse_repository_tag(task.toml.environment.docker_image)
                api.tag(tag, repo, tg or "latest", force=True)
            except APIError as e:
                warnings.append(f"could not tag the image as {task.toml.environment.docker_image}: {_short(e)}")

    # ---------------------------------------------------------------- containers
    def _create(self, api: docker.APIClient, image: str, name: str, kind: str, *, task: Task | None = None,
                staging: Path | None = None, slot: Slot | None = None) -> str:
        hc: dict[str, Any] = {"network_mode": "none"}
        volumes: list[str] | None = None
        if task is not None:
            env = task.toml.environment
            # The grading cannot change what grades it: a read-only root, and writable only what a
            # grading writes, each a volume of the image's own content there (reset after each
            # grading) or a scratch tmpfs.
            hc["read_only"] = True
            hc["tmpfs"] = {d: "rw,nosuid,nodev,mode=1777" for d in ("/tmp", "/var/tmp")} | {"/run": "rw,nosuid,nodev,mode=755"}
            volumes = task.writable_paths(self.writable)
            hc["pids_limit"] = self.config.pids_limit
            if env.cpus:
                hc["nano_cpus"] = int(min(env.cpus, os.cpu_count() or env.cpus) * 1e9)
            if env.memory_mb:
                hc["mem_limit"] = hc["memswap_limit"] = f"{env.memory_mb}m"
            if slot is not None and slot.gpus > 0:
                hc.update(gpu_host_config(slot, self.config.gpus_via))
        if staging is not None:
            hc["binds"] = {str(staging / "tests"): {"bind": TESTS, "mode": "ro"},
                           str(staging / "reviewer"): {"bind": REVIEWER, "mode": "ro"}}
        try:
            cid = api.create_container(image, entrypoint=["/bin/sh", "-c", KEEPALIVE], name=name, detach=True, volumes=volumes,
                                       labels=self._labels(kind), host_config=api.create_host_config(**hc))["Id"]
            api.start(cid)
        except (APIError, DockerException) as e:
            raise InfraError(f"the engine could not start a container of {image}: {_short(e)}") from None
        return cid

    def _reference(self, api: docker.APIClient, key: str, image: str) -> _Ref:
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

    def _warm_for(self, api: docker.APIClient, prepared: Prepared, slot: Slot) -> _Warm:
        k = (prepared.key, slot.index)
        with self._lock:
            w = self._warm.get(k)
        if w is not None and w.slot == slot and self.config.warm_containers:
            return w
        if w is not None:
            self._discard(api, w)
        name = f"pesflow-{self.session}-{prepared.key[:10]}-w{slot.index}"
        staging = self.cache / "staging" / name
        for sub in ("tests", "reviewer"):
            shutil.rmtree(staging / sub, ignore_errors=True)
            (staging / sub).mkdir(parents=True)
        cid = self._create(api, prepared.state["image"], name, "worker", task=prepared.task, staging=staging, slot=slot)
        w = _Warm(id=cid, name=name, staging=staging, slot=slot, writable=prepared.task.writable_paths(self.writable))
        try:
            w.baseline = {(c["Path"], c["Kind"]) for c in (api.diff(cid) or [])}
            w.since = _volume_listing(self._exec(api, cid, VOLUME_SCRIPT, args=["", *w.writable])[1])[2]
            for path in ENGINE_FILES:
                got = self._read_file(api, cid, path)
                if got is not None:
                    w.etc[path] = got[0].decode(errors="replace")
            out = self._exec(api, cid, RESET_SCRIPT, user="0")[1]
            w.dev = re.findall(r"^@@dev:(.*)$", out, re.M)
            w.run = re.findall(r"^@@run:(.*)$", out, re.M)
            w.oom = _oom(out)
            w.pids_max = _pids_max(out)
            w.keep = _keepalive(out)
            w.init_pid = api.inspect_container(cid)["State"].get("Pid") or 0
            w.pids_events = host_cgroup_file(w.init_pid, cid, "pids", "pids.events")
            w.pids_max = max(w.pids_max, cgroup_count(w.pids_events, "max"))
        except (APIError, DockerException) as e:
            self._discard(api, w)
            raise InfraError(f"a new container of {prepared.state['image']} could not be inspected: {_short(e)}") from None
        with self._lock:
            self._warm[k] = w
        return w

    def _discard(self, api: docker.APIClient, w: _Warm) -> None:
        with self._lock:
            for k, v in list(self._warm.items()):
                if v is w:
                    del self._warm[k]
        try:
            api.remove_container(w.id, force=True, v=True)
        except (APIError, DockerException):
            pass
        shutil.rmtree(w.staging, ignore_errors=True)

    # ---------------------------------------------------------------- small engine calls
    def _exec(self, api: docker.APIClient, cid: str, script: str, *, args: list[str] = (), user: str = "0",
              env: dict[str, str] | None = None) -> tuple[int, str]:  # type: ignore[assignment]
        ex = api.exec_create(cid, ["/bin/sh", "-c", script, "pesflow", *args], user=user, environment={**OWN_ENV, **(env or {})})
        out = api.exec_start(ex["Id"]).decode(errors="replace")
        return _exit_code(api, ex["Id"]), out

    @staticmethod
    def _read_file(api: docker.APIClient, cid: str, path: str) -> tuple[bytes, tarfile.TarInfo] | None:
        try:
            stream, _ = api.get_archive(cid, path)
        except NotFound:
            return None
        return archive.read_member(archive.as_file(stream))

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
            return fn(self._reference(api, key, self._images[key]))

    def _ref_stats(self, api: docker.APIClient, key: str, paths: list[str]) -> dict[str, tuple[str, int, int, int] | None]:
        ref = self._refs[key]
        todo = [p for p in paths if p not in ref.stats]
        for i in range(0, len(todo), 500):
            part = todo[i : i + 500]
            lines = self._on_reference(api, key, lambda r: self._exec(api, r.id, STAT_SCRIPT, args=part))[1].splitlines()
            if len(lines) != len(part):
                raise _Dirty("the reference container did not describe every changed path")
            for p, line in zip(part, lines):
                bits = line.split("|")
                ref.stats[p] = None if line == "missing" or len(bits) != 4 else (bits[0], int(bits[1], 8), int(bits[2]), int(bits[3]))
        return {p: ref.stats[p] for p in paths}

    def _ref_archive(self, api: docker.APIClient, key: str, path: str) -> bytes:
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

    def baseline_text(self, prepared: Prepared, rel: str) -> str | None:
        try:
            got = self._baseline_member(prepared, rel)
        except (APIError, DockerException) as e:
            raise InfraError(f"the container engine failed while reading the baseline of {rel}: {_short(e)}") from None
        if got is None:
            return None
        try:
            return got[0].decode()
        except UnicodeDecodeError:
            return None

    def _baseline_member(self, prepared: Prepared, rel: str) -> tuple[bytes, tarfile.TarInfo] | None:
        path = f"{prepared.task.source_root}/{rel}"
        data = self._ref_archive(self.api(), prepared.key, path)
        return archive.read_member(io.BytesIO(data)) if data else None

    # ---------------------------------------------------------------- grade
    def grade(self, prepared: Prepared, request: GradeRequest, slot: Slot | None = None) -> GradeRun:
        api = self.api()
        # used without evaluator.parallel: worker 0, with the task's GPUs unless checked on the CPU
        slot = slot or Slot(0, (), 0 if request.env.get("KERNELBENCH_DEVICE") == "cpu" else prepared.task.gpus)
        with self._lock:
            lock = self._slot_locks.setdefault((prepared.key, slot.index), threading.Lock())
        with lock:  # one grading per container at a time, even without evaluator.parallel
            w = self._warm_for(api, prepared, slot)
            return self._grade_in(api, prepared, request, w)

    def _grade_in(self, api: docker.APIClient, prepared: Prepared, request: GradeRequest, w: _Warm) -> GradeRun:
        task = prepared.task
        start = time.monotonic()
        command, results = grader_command(request.grader, prepared.state)

        def infra(msg: str, rc: int = -1, output: str = "") -> GradeRun:
            self._discard(api, w)
            return GradeRun(None, rc, False, time.monotonic() - start, output, infra_error=msg)

        try:
            if request.grader == "hidden":
                shutil.copytree(task.tests_dir, w.staging / "tests", symlinks=True, dirs_exist_ok=True)
            for name, host in request.reviewer_files.items():
                shutil.copyfile(host, w.staging / "reviewer" / name)
            deletions = self._write_candidate(api, prepared, w, request.files)
            if deletions:
                command = f"rm -f -- {' '.join(shlex.quote(p) for p in deletions)}; {command}"
            rc, output, timed_out, broke, bombed = self._run_grader(api, w, grader_script(command, w.keep), request)
            (request.out_dir / "grader_output.log").write_text(output)
            self._copy_logs(api, w, request.out_dir / "logs")
            reward = None
            for rel in results:
                reward = self._reward(api, w, rel, request.out_dir / "logs")
                if reward is not None:
                    break
            running = api.inspect_container(w.id)["State"]
        except (APIError, DockerException, OSError) as e:
            return infra(f"the container engine failed while grading: {_short(e)}")
        finally:
            for sub in ("tests", "reviewer"):
                _empty(w.staging / sub)
        if not running.get("Running"):
            # the container itself is gone (killed by the engine or the host): not the candidate's doing
            why = "the kernel's OOM killer" if running.get("OOMKilled") else f"exit {running.get('ExitCode')}"
            return infra(f"the grading container died while grading ({why})", rc, output)
        w.gradings += 1
        oom_before, pids_before = w.oom, w.pids_max
        w.pids_max = max(w.pids_max, cgroup_count(w.pids_events, "max"))
        try:
            self._reset(api, prepared, w)
        except (_Dirty, APIError, DockerException):
            # the next grading gets a new container; this one's verdict stands, its counters read first
            self._read_counters(api, w)
            self._discard(api, w)
        env = task.toml.environment
        forks_refused = w.pids_max > pids_before
        if broke and not forks_refused:
            return infra(f"the grader's output stream broke: {broke}", rc, output)
        # A fork bomb can break the engine's exec stream (podman's attach): the refused forks the
        # pids cgroup counted still name it, so it is the candidate's failure, not the engine's.
        strays = left_running(output) if not (timed_out or broke) else []
        reasons = [TOO_MANY_PROCESSES] if forks_refused else []
        if timed_out and forks_refused:
            # a fork bomb retries its refused forks until the timeout: the broken limit is the cause
            # (the local backend stops the grading at the first refused fork and says the same)
            timed_out, reward = False, None
        if w.oom > oom_before:
            # The container's OOM counter also counts the machine's OOM killer: a container that
            # never came near its limit was the machine's victim (the local backend's rule).
            limit = (env.memory_mb or 0) << 20
            if w.peak is not None and limit and w.peak < 0.9 * limit:
                return infra(f"the machine ran out of memory while grading (the container used at most {w.peak >> 20} "
                             f"of its {env.memory_mb} MiB); not the candidate's doing", rc, output)
            reasons.append(OUT_OF_MEMORY)
        if strays and self.config.stray_processes == "fail":
            reasons.append(BACKGROUND_PROCESS)
        report = {"limits": {"memory_mb": env.memory_mb, "cpus": env.cpus, "pids": self.config.pids_limit,
                             "timeout_sec": request.timeout, "network": "none"},
                  "container": w.name, "container_gradings": w.gradings, "oom_kills": w.oom - oom_before,
                  "forks_refused": w.pids_max - pids_before, "stopped_at_first_refused_fork": bombed, "strays": strays}
        (request.out_dir / "limits.json").write_text(json.dumps(report, indent=1))
        if reasons and not timed_out:
            reward = with_reasons(reward, reasons, memory_mb=env.memory_mb, strays=strays, pids=self.config.pids_limit)
        if not self.config.warm_containers:
            self._discard(api, w)
        return GradeRun(reward, rc, timed_out, time.monotonic() - start, output, grader_seconds=grader_seconds(output))

    def _write_candidate(self, api: docker.APIClient, prepared: Prepared, w: _Warm, files: dict[str, str | None]) -> list[str]:
        root = prepared.task.source_root
        put: dict[str, tuple[bytes, int, int, int]] = {}
        deletions = []
        for rel, text in files.items():
            path = f"{root}/{rel}"
            if text is None:
                deletions.append(path)
                continue
            base = self._baseline_member(prepared, rel)
            mode, uid, gid = (base[1].mode & 0o7777, base[1].uid, base[1].gid) if base else (0o644, 0, 0)
            put[path] = (text.encode(), mode, uid, gid)
        if put and not api.put_archive(w.id, root, archive.files_tar({p[len(root):]: v for p, v in put.items()})):
            raise InfraError("the engine refused the candidate's files")  # into the source tree's volume: the root is read-only
        return deletions

    def _run_grader(self, api: docker.APIClient, w: _Warm, script: str,
                    request: GradeRequest) -> tuple[int, str, bool, str | None, bool]:
        """(exit code, output, timed out, why the output stream broke or None, stopped at the first
        refused fork)."""
        ex = api.exec_create(w.id, ["/bin/sh", "-c", script], environment=request.env)
        sink = BoundedSink(self.config.max_log_bytes)
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                for chunk in api.exec_start(ex["Id"], stream=True):
                    sink.feed(chunk)
            except (APIError, DockerException, OSError) as e:  # the stream broke: the engine or the container
                failure.append(e)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        deadline = time.monotonic() + request.timeout
        forks_before = cgroup_count(w.pids_events, "max")
        while reader.is_alive() and time.monotonic() < deadline:
            # Where this host sees the container's pids cgroup, the grading is stopped at its first
            # refused fork, as the local backend stops it: a fork bomb never ends by itself.
            reader.join(min(0.25, max(0.0, deadline - time.monotonic())) if w.pids_events else request.timeout)
            if w.pids_events and cgroup_count(w.pids_events, "max") > forks_before:
                self._kill_from_host(w)
                reader.join(15)
                if reader.is_alive():
                    raise InfraError("the grader could not be stopped at its first refused fork; the container was dropped")
                return -1, sink.text(), False, None, True
        timed_out = reader.is_alive()
        if timed_out:
            self._exec(api, w.id, "kill -9 -1; sleep 0.2; kill -9 -1", user="0")
            reader.join(15)
            if reader.is_alive():
                raise InfraError("the grader could not be stopped at its timeout; the container was dropped")
        if failure and not timed_out:
            self._exec(api, w.id, "kill -9 -1; sleep 0.2; kill -9 -1", user="0")  # what the grader left, stopped
            return -1, sink.text(), False, _short(failure[0]), False
        return (137 if timed_out else _exit_code(api, ex["Id"])), sink.text(), timed_out, None, False

    @staticmethod
    def _kill_from_host(w: _Warm) -> None:
        """SIGKILL every process of the container's pids cgroup but its init, from this host: with
        no pid free, the engine cannot start an exec inside the container to do it."""
        if w.pids_events is not None:
            kill_members(w.pids_events.parent, spare=(w.init_pid,))

    def _read_counters(self, api: docker.APIClient, w: _Warm) -> None:
        """The container's OOM and refused-fork counters, when the reset that reads them failed."""
        try:
            out = self._exec(api, w.id, COUNTERS_SCRIPT, user="0")[1]
        except (APIError, DockerException, InfraError):
            return
        w.oom = max(w.oom, _oom(out))
        w.pids_max = max(w.pids_max, _pids_max(out))

    def _copy_logs(self, api: docker.APIClient, w: _Warm, dest: Path) -> None:
        try:
            stream, _ = api.get_archive(w.id, "/logs")
        except NotFound:
            return
        archive.extract_regular(archive.as_file(stream), dest, limit=self.config.max_log_bytes, strip=1)

    def _reward(self, api: docker.APIClient, w: _Warm, rel: str, logs: Path) -> dict[str, Any] | None:
        if rel.startswith("/logs/"):
            return read_reward_file(logs / rel[len("/logs/"):])
        got = self._read_file(api, w.id, rel)  # regular files only: a planted link is not followed
        if got is None:
            return None
        tmp = logs.parent / ".reward.json"
        tmp.write_bytes(got[0][: 4 << 20])
        try:
            return read_reward_file(tmp)
        finally:
            tmp.unlink(missing_ok=True)

    # ---------------------------------------------------------------- reset
    def _volume_changes(self, api: docker.APIClient, key: str, w: _Warm) -> set[tuple[str, int]]:
        """What a grading changed in the writable paths (volumes, which the engine's list of
        changes does not cover), in that list's terms: 0 modified, 1 added, 2 deleted."""
        entries, changed, _ = _volume_listing(self._exec(api, w.id, VOLUME_SCRIPT, args=[w.since, *w.writable])[1])
        ref = self._refs[key]
        for path in w.writable:
            if path not in ref.listings:
                out = self._on_reference(api, key, lambda r: self._exec(api, r.id, VOLUME_SCRIPT, args=["", path])[1])
                ref.listings[path] = frozenset(_volume_listing(out)[0])
        image = frozenset().union(*(ref.listings[p] for p in w.writable))
        return ({(p, 1) for p in entries - image} | {(p, 2) for p in image - entries}
                | {(p, 0) for p in changed & image})

    def _reset(self, api: docker.APIClient, prepared: Prepared, w: _Warm) -> None:
        for _ in range(2):
            changes = {(c["Path"], c["Kind"]) for c in (api.diff(w.id) or [])} - w.baseline
            changes |= self._volume_changes(api, prepared.key, w)
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
            code, out = self._exec(api, w.id, RESET_SCRIPT, args=ops, user="0")
            if "@@reset-done" not in out:
                raise _Dirty(f"the reset script failed: {_last_line(out)}")
            restore += re.findall(r"^@@refill:(.*)$", out, re.M)
            self._restore(api, prepared.key, w, restore)
            w.oom = max(w.oom, _oom(out))
            w.pids_max = max(w.pids_max, _pids_max(out))
            w.peak = _peak(out)
            w.keep = _keepalive(out)
            w.since = _volume_listing(self._exec(api, w.id, VOLUME_SCRIPT, args=[""])[1])[2]
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
            data = self._ref_archive(api, key, p)
            total += len(data)
            if total > MAX_RESTORE_BYTES:
                raise _Dirty("too much to restore")
            into = next((v for v in sorted(w.writable, key=len, reverse=True) if p.startswith(v.rstrip("/") + "/")), "/")
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

    def close(self) -> None:
        if self._version is None:
            return
        api = self.api()
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


def _volume_listing(out: str) -> tuple[set[str], set[str], str]:
    """VOLUME_SCRIPT's output: (every entry, entries changed since, the container's clock)."""
    entries, changed, clock = set(), set(), ""
    for rec in out.split("\0"):
        kind, _, path = rec.partition(" ")
        if kind == "A":
            entries.add(path)
        elif kind == "C":
            changed.add(path)
        elif kind == "T":
            clock = path.strip()
    return entries, changed, clock


def _exit_code(api: docker.APIClient, exec_id: str) -> int:
    for _ in range(50):  # the engine may report the exec as running for a moment after its stream ends
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return int(info["ExitCode"])
        time.sleep(0.02)
    return -1


def _keepalive(out: str) -> str:
    found = re.findall(r"^@@keepalive:(\d+)", out, re.M)
    return found[-1] if found else ""


def _peak(out: str) -> int | None:
    found = re.findall(r"^@@peak:(\d+)", out, re.M)
    return int(found[-1]) if found else None


def _oom(out: str) -> int:
    found = re.findall(r"^@@oom:(\d+)", out, re.M)
    return int(found[-1]) if found else 0


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


def _pids_max(out: str) -> int:
    found = re.findall(r"^@@pidsmax:(\d+)", out, re.M)
    return int(found[-1]) if found else 0


def _empty(folder: Path) -> None:
    if not folder.is_dir():
        return
    for p in folder.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)

