"""The docker backend's grading: DockerBackend, which prepares a task's image (image.py) and
grades candidates in its containers (container.py).

Prepare (once per package content): the image is found by its tag or built, and the image's
reference container started; the dev engine the baseline holds is looked up there.

Grade (per candidate) in the worker slot's warm container: the candidate's files are put into
the tree, the grader runs as one exec (timed from inside; at the timeout every process of the
container but its init is killed), /logs is copied out as regular files only, and the container
is reset for the next candidate.

Verdicts match the local backend's: a candidate whose processes broke the memory limit (the
container's memory cgroup killed one) or outlived the grader gets the named hard fails
`out_of_memory` / `background_process`. The container dying, the engine failing or a build
failing is an InfraError (infra_error), which evaluator.parallel tries once more.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import socket
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, NotFound
from docker.utils import kwargs_from_env

from evaluator.backends import archive
from evaluator.backends.base import InfraError, Prepared, command_for
from evaluator.backends.docker.container import TRUST_OUT, Containers, _Dirty, _Warm
from evaluator.backends.docker.engine import _exec, _exit_code, _read_file, _short, unenforced_limits
from evaluator.backends.docker.image import BACKEND_VERSION, Images
from evaluator.backends.in_container import forged_results, grader_script, grader_seconds, left_running
from evaluator.config import DockerConfig
from evaluator.grading_policy import grading_result
from evaluator.grading_records import GradeRequest, GradeRun, GradingReport, Slot
from evaluator.limits import TOO_MANY_PROCESSES, cgroup_count, kill_members, unenforced_note
from evaluator.sandbox import BoundedSink
from evaluator.task import DEV_ENGINES, Task, dev_engine_of
from evaluator.trust import collect, instrument, written
from evaluator.verdict import read_reward_file

PODMAN_SOCKET = "/run/podman/podman.sock"


class DockerBackend:
    name = "docker"

    def __init__(self, config: DockerConfig | None = None, cache_dir: Path | None = None,
                 writable: list[str] = ()):  # type: ignore[assignment]
        self.config = config or DockerConfig()
        self.writable = list(writable)  # evaluator.writable_paths
        self.cache = Path(cache_dir or self.config.cache_dir).expanduser().resolve() / "docker"
        self.session = f"{socket.gethostname()[:20]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._version: str | None = None
        self.unenforced: list[str] = []  # limits the engine takes and does not hold (engine.unenforced_limits)
        self._kwargs: dict[str, Any] = {}
        self._base_url: str | None = None
        self._slot_locks: dict[tuple[str, int], threading.Lock] = {}
        self._swept = False
        self.images = Images(self.config, self.cache)
        self.containers = Containers(self.config, self.cache, self.writable, self.session)

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
                elif ("base_url" not in kwargs and not os.path.exists("/var/run/docker.sock")
                      and os.path.exists(PODMAN_SOCKET)):
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
                try:
                    self.unenforced = unenforced_limits(probe.info())
                except (DockerException, OSError):
                    self.unenforced = []
                probe.close()
        client = docker.APIClient(version=self._version, timeout=self.config.api_timeout_sec, **self._kwargs)
        self._local.api = client
        if not self._swept:
            self._swept = True
            self.containers.sweep_leftovers(client)
        return client

    # ---------------------------------------------------------------- prepare
    def image_tag(self, task: Task) -> str:
        """The image a package's content is built into (and found by, next time)."""
        return self.images.tag(task)

    def prepare(self, task: Task) -> Prepared:
        try:
            return self._prepare(task)
        except (APIError, DockerException) as e:
            raise InfraError(f"the container engine failed while preparing {task.name}: {_short(e)}") from None

    def _prepare(self, task: Task) -> Prepared:
        api = self.api()
        key = self.images.key(task)
        tag = self.image_tag(task)
        start = time.monotonic()
        warnings: list[str] = []
        cached = self.images.exists(api, tag)
        if not cached:
            self.images.build(api, task, key, tag, warnings)
        ref = self.containers.reference(api, key, tag)
        found = _exec(api, ref.id, 'for f in "$@"; do [ -f "$f" ] && echo "$f"; done',
                      args=list(DEV_ENGINES))[1].split()
        dev_engine = dev_engine_of(set(found))
        sites = _exec(api, ref.id, instrument.FIND_SITE_DIRS)[1].split()  # once per image
        state = {"image": tag, "dev_engine": dev_engine, "backend": BACKEND_VERSION, "task": task.name,
                 "site_dirs": sorted(set(sites))}
        return Prepared(task=task, key=key, seconds=0.0 if cached else round(time.monotonic() - start, 3),
                        cached=cached, warnings=warnings, state=state)

    # ---------------------------------------------------------------- the baseline
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
        data = self.containers.ref_archive(self.api(), prepared.key, path)
        return archive.read_member(io.BytesIO(data)) if data else None

    # ---------------------------------------------------------------- grade
    def grade(self, prepared: Prepared, request: GradeRequest, slot: Slot | None = None) -> GradeRun:
        api = self.api()
        # used without evaluator.parallel: worker 0, with the task's GPUs unless checked on the CPU
        slot = slot or Slot(0, (), 0 if request.env.get("KERNELBENCH_DEVICE") == "cpu" else prepared.task.gpus)
        with self._lock:
            lock = self._slot_locks.setdefault((prepared.key, slot.index), threading.Lock())
        with lock:  # one grading per container at a time, even without evaluator.parallel
            w = self.containers.warm_for(api, prepared, slot)
            return self._grade_in(api, prepared, request, w)

    def _grade_in(self, api: docker.APIClient, prepared: Prepared, request: GradeRequest, w: _Warm) -> GradeRun:
        start = time.monotonic()
        command, results = command_for(request, prepared)
        staging = _Staging(w)
        try:
            staging.fill(prepared.task, request)
            ran = self._exec_grader(api, prepared, request, w, command, results, staging)
        except (APIError, DockerException, OSError) as e:
            return self._infra(api, w, start, f"the container engine failed while grading: {_short(e)}")
        finally:
            staging.empty()
        if not ran.state.get("Running"):
            # the container itself is gone (killed by the engine or the host): not the candidate's doing
            why = "the kernel's OOM killer" if ran.state.get("OOMKilled") else f"exit {ran.state.get('ExitCode')}"
            return self._infra(api, w, start, f"the grading container died while grading ({why})", ran.rc, ran.output)
        w.gradings += 1
        oom_before, pids_before = w.oom, w.pids_max
        w.pids_max = max(w.pids_max, cgroup_count(w.pids_events, "max"))
        try:
            self.containers.reset(api, prepared, w)
        except (_Dirty, APIError, DockerException):
            # the next grading gets a new container; this one's verdict stands, its counters read first
            self.containers.read_counters(api, w)
            self.containers.discard(api, w)
        if (request.trust is not None or request.scan_writes) and w.changed is not None:
            # startup files and the image's modules the grading changed, whatever did (trust/written.py)
            ran.trust_events += written.from_changes(w.changed, w.writable,
                                                     written.candidate_paths(prepared.task.scope, request.files),
                                                     w.texts)
        return self._judged(api, prepared.task, request, w, ran, oom_before, pids_before, start)

    def _infra(self, api: docker.APIClient, w: _Warm, start: float, msg: str, rc: int = -1,
               output: str = "") -> GradeRun:
        self.containers.discard(api, w)
        return GradeRun(None, rc, False, time.monotonic() - start, output, infra_error=msg)

    def _exec_grader(self, api: docker.APIClient, prepared: Prepared, request: GradeRequest, w: _Warm, command: str,
                     results: list[str], staging: "_Staging") -> "_Ran":
        """The candidate's files in place, the grader run, its logs, the guard's events and the reward read."""
        deletions = self._write_candidate(api, prepared, w, request.files)
        if deletions:
            command = f"rm -f -- {' '.join(shlex.quote(p) for p in deletions)}; {command}"
        rc, output, timed_out, broke, bombed = self._run_grader(api, w, grader_script(command, w.keep, results=results),
                                                                request)
        (request.out_dir / "grader_output.log").write_text(output)
        self._copy_logs(api, w, request.out_dir / "logs")
        trust_events = self._trust_events(api, w, staging.events, request) if staging.events is not None else []
        staging.events = None
        reward = None
        for rel in results:
            reward = self._reward(api, w, rel, request.out_dir / "logs")
            if reward is not None:
                break
        return _Ran(rc, output, timed_out, broke, bombed, trust_events, reward, api.inspect_container(w.id)["State"])

    def _judged(self, api: docker.APIClient, task: Task, request: GradeRequest, w: _Warm, ran: "_Ran", oom_before: int,
                pids_before: int, start: float) -> GradeRun:
        """The grading's result from what it ran and what the container's counters saw; limits.json beside its logs."""
        env = task.toml.environment
        forks_refused = w.pids_max > pids_before
        report = GradingReport(ran.rc, ran.output, time.monotonic() - start, reward=ran.reward, timed_out=ran.timed_out,
                               grader_seconds=grader_seconds(ran.output), oom_killed=w.oom > oom_before,
                               memory_peak_bytes=w.peak, memory_mb=env.memory_mb, pids=self.config.pids_limit,
                               trust_events=ran.trust_events,
                               trust_socket=any(e.get("via") == "socket" for e in ran.trust_events))
        if ran.broke and not forks_refused:
            self.containers.discard(api, w)
            report.infra_error = f"the grader's output stream broke: {ran.broke}"
            return grading_result(report, self.config.stray_processes)
        # A fork bomb can break the engine's exec stream (podman's attach): the refused forks the
        # pids cgroup counted still name it, so it is the candidate's failure, not the engine's.
        report.strays = left_running(ran.output) if not (ran.timed_out or ran.broke) else []
        report.forged = bool(forged_results(ran.output))
        report.breaches = [TOO_MANY_PROCESSES] if forks_refused else []
        limits_seen = {"limits": {"memory_mb": env.memory_mb, "cpus": env.cpus, "pids": self.config.pids_limit,
                                  "timeout_sec": request.timeout, "network": "none"},
                       "container": w.name, "container_gradings": w.gradings, "oom_kills": w.oom - oom_before,
                       "forks_refused": w.pids_max - pids_before, "stopped_at_first_refused_fork": ran.bombed,
                       "strays": report.strays, "unenforced": self.unenforced}
        (request.out_dir / "limits.json").write_text(json.dumps(limits_seen, indent=1))
        report.notes = [unenforced_note(self.unenforced,
                                        f"the container engine ({self._base_url}: rootless on cgroups v1) never",
                                        "a rootful engine, cgroups v2 with the controllers delegated "
                                        "to the user, or --backend local")
                        ] if self.unenforced else []
        run = grading_result(report, self.config.stray_processes)
        if run.infra_error or not self.config.warm_containers:
            self.containers.discard(api, w)  # a machine's OOM kill: the next grading gets a new container
        return run

    def _write_candidate(self, api: docker.APIClient, prepared: Prepared, w: _Warm,
                         files: dict[str, str | None]) -> list[str]:
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
            # into the source tree's volume: the root is read-only
            raise InfraError("the engine refused the candidate's files")
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
                    raise InfraError("the grader could not be stopped at its first refused "
                                     "fork; the container was dropped")
                return -1, sink.text(), False, None, True
        timed_out = reader.is_alive()
        if timed_out:
            _exec(api, w.id, "kill -9 -1; sleep 0.2; kill -9 -1", user="0")
            reader.join(15)
            if reader.is_alive():
                raise InfraError("the grader could not be stopped at its timeout; the container was dropped")
        if failure and not timed_out:
            _exec(api, w.id, "kill -9 -1; sleep 0.2; kill -9 -1", user="0")  # what the grader left, stopped
            return -1, sink.text(), False, _short(failure[0]), False
        return (137 if timed_out else _exit_code(api, ex["Id"])), sink.text(), timed_out, None, False

    @staticmethod
    def _kill_from_host(w: _Warm) -> None:
        """SIGKILL every process of the container's pids cgroup but its init, from this host: with
        no pid free, the engine cannot start an exec inside the container to do it."""
        if w.pids_events is not None:
            kill_members(w.pids_events.parent, spare=(w.init_pid,))

    def _copy_logs(self, api: docker.APIClient, w: _Warm, dest: Path) -> None:
        try:
            stream, _ = api.get_archive(w.id, "/logs")
        except NotFound:
            return
        archive.extract_regular(archive.as_file(stream), dest, limit=self.config.max_log_bytes, strip=1)

    def _trust_events(self, api: docker.APIClient, w: _Warm, events: "collect.EventSocket",
                      request: GradeRequest) -> list[dict[str, Any]]:
        sent = events.close()
        try:
            stream, _ = api.get_archive(w.id, TRUST_OUT)
            archive.extract_regular(archive.as_file(stream), request.out_dir / "trust", limit=64 << 20, strip=1)
        except NotFound:
            pass
        return collect.merge(sent, collect.read_event_files(request.out_dir / "trust"))

    def _reward(self, api: docker.APIClient, w: _Warm, rel: str, logs: Path) -> dict[str, Any] | None:
        if rel.startswith("/logs/"):
            return read_reward_file(logs / rel[len("/logs/"):])
        got = _read_file(api, w.id, rel)  # regular files only: a planted link is not followed
        if got is None:
            return None
        tmp = logs.parent / ".reward.json"
        tmp.write_bytes(got[0][: 4 << 20])
        try:
            return read_reward_file(tmp)
        finally:
            tmp.unlink(missing_ok=True)

    def close(self) -> None:
        if self._version is None:
            return
        self.containers.close(self.api())


def _empty(folder: Path) -> None:
    if not folder.is_dir():
        return
    for p in folder.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


@dataclass
class _Ran:
    """What one run of the grader left: its exit, output and how it ended (the output stream's
    break, a stop at the first refused fork), the guard's events, the reward, the container's state."""
    rc: int
    output: str
    timed_out: bool
    broke: str | None
    bombed: bool
    trust_events: list[dict[str, Any]]
    reward: dict[str, Any] | None
    state: dict[str, Any]


class _Staging:
    """What a grading is given through its container's host folders (tests/, reviewer/, trust/ and
    the guard's event socket), emptied after it whatever happened."""

    def __init__(self, w: _Warm):
        self.w = w
        self.events: collect.EventSocket | None = None

    def fill(self, task: Task, request: GradeRequest) -> None:
        staging = self.w.staging
        if request.grader == "hidden":
            shutil.copytree(task.tests_dir, staging / "tests", symlinks=True, dirs_exist_ok=True)
        for name, host in request.reviewer_files.items():
            shutil.copyfile(host, staging / "reviewer" / name)
        if request.trust is not None:
            instrument.write_config(staging / "trust", request.trust)
            for name, host in request.trust_files.items():
                shutil.copyfile(host, staging / "trust" / name)
            # read here while the engine runs on this host; a remote engine's gradings keep the files only
            self.events = collect.EventSocket(staging / "trust" / "events.sock")

    def empty(self) -> None:
        if self.events is not None:
            self.events.close()
        for sub in ("tests", "reviewer", "trust"):
            _empty(self.w.staging / sub)
