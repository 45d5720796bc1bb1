"""The ray backend: each grading one Ray task on a node of a cluster, graded there by that
node's local or docker backend (evaluator/backends/ray_backend/node.py).

Ray, not a scheduler of our own: it places a task where the resources it asks for are free
(num_gpus = the package's gpus, so no two timings share a GPU; CPUs and memory from
task.toml or evaluator.ray), sets CUDA_VISIBLE_DEVICES to the GPUs it assigned, and moves the
package to a node once (one object in its store). The driver reads no GPU of its own: a
laptop may send GPU gradings to a cluster that has them (capabilities gpus="remote").

Faults: a task lost with its node (or its worker) is graded again elsewhere, up to
node_retries times, inside this one grade() call: one verdict comes back, so the candidate and
the task's submission budget are charged once, and the verdict's message and `node` say what
happened. A cluster that does not answer within connect_timeout_sec, or that has no node with
what the package asks for within resource_wait_sec, is BackendUnavailable: one line, exit 3.
cancel_all (pesflow got a signal) cancels every task in flight; their sandboxes die with them.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from evaluator.backends.base import BackendUnavailable, Capabilities, GradeRequest, GradeRun, InfraError, Prepared
from evaluator.backends.ray_backend import node as node_side
from evaluator.config import EvaluatorConfig
from evaluator.task import Task

BACKEND_VERSION = "ray-1"
LOST = ("NodeDiedError", "WorkerCrashedError", "ObjectLostError", "OwnerDiedError", "ObjectFetchTimedOutError",
        "RaySystemError", "LocalRayletDiedError", "OutOfMemoryError", "TaskUnschedulableError")


def _ray() -> Any:
    try:
        import ray  # an extra: pip install 'pesflow[ray]'
    except ImportError:
        raise BackendUnavailable("the ray backend needs Ray: pip install 'pesflow[ray]'") from None
    return ray


def _reachable(address: str, wait: float) -> bool:
    """Whether something listens at host:port within `wait` seconds (ray.init itself may wait
    far longer on an address where nothing answers)."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return True  # not host:port: let Ray say what it is
    deadline = time.monotonic() + wait
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=min(2.0, max(0.1, deadline - time.monotonic()))):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)


def running_cluster() -> str | None:
    """The address of a cluster this machine knows of: RAY_ADDRESS, else the one `ray start` left."""
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    try:
        return Path("/tmp/ray/ray_current_cluster").read_text().strip() or None
    except OSError:
        return None


def package_rel(task: Task) -> str:
    """The package's path under a tasks root: <bench>/<dir>/task, or <bench>/<dir> (flat)."""
    return f"{task.name}/task" if task.root.name == "task" else task.name


class RayBackend:
    name = "ray"
    capabilities = Capabilities(gpus="remote", cancel=True)

    def __init__(self, config: EvaluatorConfig | None = None):
        self.config = config or EvaluatorConfig(backend="ray")
        self.rc = self.config.ray
        self._lock = threading.Lock()
        self._connected = False
        self._started_here = False  # a local cluster pesflow started, stopped at close
        self.address: str | None = None
        self._packages: dict[str, Any] = {}  # content hash -> the package's object in Ray's store
        self._baseline: dict[tuple[str, str], str | None] = {}
        self._inflight: dict[Any, str] = {}
        self._cancelled = threading.Event()
        self._remote: dict[str, Any] = {}
        self.placements: list[dict[str, Any]] = []  # where each grading ran (utilization per node)

    # ---------------------------------------------------------------- the cluster
    def connect(self, modules: tuple[str, ...] = ()) -> None:
        """Join (or start) the cluster; `modules`: more of pesflow's packages to ship (the
        baselines' cells need agent/ too)."""
        with self._lock:
            if self._connected:
                return
            ray = _ray()
            env = {"py_modules": [str(Path(__file__).resolve().parents[2]), *modules]} if self.rc.ship_code else None
            if ray.is_initialized():  # a caller (a test, a notebook) connected already
                self.address = ray.get_runtime_context().gcs_address
            else:
                want = self.rc.address
                addr = running_cluster() if want == "auto" else want
                if addr and not _reachable(addr, self.rc.connect_timeout_sec if want != "auto" else 2.0):
                    if want != "auto":
                        raise BackendUnavailable(f"no Ray cluster answers at {addr} within "
                                                 f"{self.rc.connect_timeout_sec:g} s (evaluator.ray.address; is "
                                                 "`ray start --head` running there?)")
                    addr = None  # a stale record of a cluster long gone: start one here
                # ray.init puts its own SIGTERM handler in place (it logs and exits 1): pesflow's, which
                # cancels every task in flight and keeps the run resumable, is put back after it
                handlers = _signal_handlers()
                try:
                    if addr:
                        ray.init(address=addr, runtime_env=env, log_to_driver=False, configure_logging=False)
                    else:
                        ray.init(runtime_env=env, include_dashboard=False, log_to_driver=False, configure_logging=False)
                        self._started_here = True
                except Exception as e:
                    raise BackendUnavailable(f"cannot join the Ray cluster at {addr or 'a new local one'}: "
                                             f"{' '.join(str(e).split())[:200]}; "
                                             + ("check evaluator.ray.address (`ray status` there)" if addr else
                                                "run `ray start --head` here to see why, or use "
                                                "--backend local")) from None
                finally:
                    _restore(handlers)
                self.address = ray.get_runtime_context().gcs_address
            self._remote["grade"] = ray.remote(node_side.grade_task)
            self._remote["describe"] = ray.remote(node_side.describe_task)
            self._connected = True

    def _resources(self, task: Task, gpus: int) -> dict[str, Any]:
        env = task.toml.environment
        out: dict[str, Any] = {"num_cpus": float(self.rc.cpus or env.cpus or 1), "num_gpus": gpus}
        memory = env.memory_mb if self.rc.memory_mb is None else self.rc.memory_mb
        if memory:
            out["memory"] = int(memory) * 2**20
        return out

    def _wait_for_a_node(self, res: dict[str, Any]) -> None:
        """A node that could ever run the task (its total resources, not what is free now), within
        resource_wait_sec (an autoscaler may be adding one); else one line naming what is missing."""
        ray = _ray()
        need = {"CPU": res["num_cpus"], "GPU": res["num_gpus"], "memory": res.get("memory", 0)}
        deadline = time.monotonic() + self.rc.resource_wait_sec
        while True:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            if any(all(n["Resources"].get(k, 0) >= v for k, v in need.items() if v) for n in nodes):
                return
            if time.monotonic() >= deadline:
                have = "; ".join(f"{n.get('NodeManagerAddress')}: {n['Resources'].get('CPU', 0):g} CPU, "
                                 f"{n['Resources'].get('GPU', 0):g} GPU" for n in nodes) or "no node alive"
                missing = ", ".join(f"{v:g} {k}" if k != "memory" else f"{v / 2**20:g} MiB memory"
                                    for k, v in need.items() if v)
                raise BackendUnavailable(f"no node of the Ray cluster at {self.address} has {missing} for one grading "
                                         f"within {self.rc.resource_wait_sec:g} s ({have}); add "
                                         "a node that large, or ask less per grading with "
                                         "evaluator.ray.cpus and evaluator.ray.memory_mb")
            time.sleep(0.5)

    # ---------------------------------------------------------------- Backend
    def _package(self, task: Task) -> Any:
        with self._lock:
            ref = self._packages.get(task.content_hash)
        if ref is None:
            ref = _ray().put(node_side.package_tar(task.root, package_rel(task)))  # once; Ray moves it once per node
            with self._lock:
                self._packages[task.content_hash] = ref
        return ref

    def prepare(self, task: Task) -> Prepared:
        start = time.monotonic()
        self.connect()
        ray = _ray()
        res = self._resources(task, 0)
        self._wait_for_a_node(res)
        ref = self._package(task)
        try:
            info = ray.get(self._remote["describe"].options(**res, max_retries=self.rc.node_retries).remote(
                self.config, task.name, package_rel(task), task.content_hash, ref,
                [r for r in task.scope if "*" not in r]),
                timeout=self.rc.grace_sec)
        except Exception as e:
            raise InfraError(f"the Ray cluster could not prepare {task.name}: {_short(e)}") from None
        for rel, text in info["baseline"].items():
            self._baseline[(task.content_hash, rel)] = text
        state = {**info["state"], "backend": BACKEND_VERSION, "node_backend": self.rc.node_backend, "task": task.name}
        return Prepared(task=task, key=task.content_hash[:20], seconds=round(time.monotonic() - start, 3), cached=False,
                        warnings=info["warnings"], state=state)

    def baseline_text(self, prepared: Prepared, rel: str) -> str | None:
        k = (prepared.task.content_hash, rel)
        if k not in self._baseline:
            task = prepared.task
            try:
                info = _ray().get(self._remote["describe"].options(**self._resources(task, 0)).remote(
                    self.config, task.name, package_rel(task), task.content_hash, self._package(task), [rel]),
                    timeout=self.rc.grace_sec)
            except Exception as e:
                raise InfraError(f"the Ray cluster could not read the baseline of {rel}: {_short(e)}") from None
            self._baseline[k] = info["baseline"][rel]
        return self._baseline[k]

    def grade(self, prepared: Prepared, request: GradeRequest) -> GradeRun:
        ray = _ray()
        task = prepared.task
        on_cpu = request.env.get("KERNELBENCH_DEVICE") == "cpu"
        res = self._resources(task, 0 if on_cpu else task.gpus)
        self._wait_for_a_node(res)
        blobs = {"reviewer": {n: Path(p).read_bytes() for n, p in request.reviewer_files.items()},
                 "trust": {n: Path(p).read_bytes() for n, p in request.trust_files.items()}}
        req = {"files": request.files, "grader": request.grader, "env": request.env, "timeout": request.timeout,
               "trust": request.trust, "command": request.command,
               "scan_writes": request.scan_writes}
        lost: list[str] = []
        start = time.monotonic()
        for attempt in range(self.rc.node_retries + 1):
            if self._cancelled.is_set():
                raise InfraError("cancelled: pesflow is stopping")
            ref = self._remote["grade"].options(**res, max_retries=0).remote(
                self.config, task.name, package_rel(task), task.content_hash, self._package(task), req, blobs)
            with self._lock:
                self._inflight[ref] = task.name
            try:
                out = ray.get(ref, timeout=request.timeout + self.rc.grace_sec)
            except Exception as e:
                kind = type(e).__name__
                if kind == "GetTimeoutError":
                    ray.cancel(ref, force=True)
                    return GradeRun(reward=None, returncode=-1, timed_out=False, seconds=time.monotonic() - start,
                                    output="",
                                    infra_error="the grading's Ray task did not finish within "
                                                f"{request.timeout + self.rc.grace_sec:g} s")
                if kind == "TaskCancelledError" or self._cancelled.is_set():
                    raise InfraError("cancelled: pesflow is stopping") from None
                if kind in LOST or "died" in str(e).lower():
                    lost.append(f"{kind}: {' '.join(str(e).split())[:120]}")
                    continue  # the node (or its worker) went away: graded again, wherever Ray places it
                raise InfraError(f"the grading's Ray task failed: {_short(e)}") from None
            finally:
                with self._lock:
                    self._inflight.pop(ref, None)
            run = node_side.run_from(out["run"])
            node_side.unpack_logs(out["logs"], request.out_dir, limit=self.config.local.max_log_bytes * 8)
            where = {**out["where"], "attempts": attempt + 1, "lost": lost}
            run.node = where
            run.notes.append(f"graded on Ray node {where['host']} ({where['ip']}, node {where['node'][:12]}"
                             + (f", GPU {','.join(where['gpus'])}" if where["gpus"] else "") + ")")
            if lost:
                run.notes.append(f"its first node was lost mid-grading ({len(lost)} time(s)): graded again on another, "
                                 "an infra retry charged to no one")
            with self._lock:
                self.placements.append({"node": where["node"], "seconds": where["node_seconds"], "gpus": where["gpus"]})
            return run
        return GradeRun(reward=None, returncode=-1, timed_out=False, seconds=time.monotonic() - start, output="",
                        infra_error=f"the grading was lost with its node {len(lost)} times: {lost[-1]}")

    def cancel_all(self) -> int:
        """Every task in flight cancelled; with the local node backend the worker is killed, and the
        sandbox with it (it dies with the process that started it)."""
        self._cancelled.set()
        if not self._connected:
            return 0
        ray = _ray()
        with self._lock:
            refs = list(self._inflight)
        for ref in refs:
            try:
                ray.cancel(ref, force=self.rc.node_backend == "local")
            except Exception:  # already finished
                pass
        return len(refs)

    def utilization(self) -> dict[str, Any]:
        """Gradings and busy seconds per node, for run.json."""
        per: dict[str, dict[str, float]] = {}
        with self._lock:
            for p in self.placements:
                d = per.setdefault(p["node"][:12], {"gradings": 0, "seconds": 0.0})
                d["gradings"] += 1
                d["seconds"] = round(d["seconds"] + p["seconds"], 3)
        return per

    def close(self) -> None:
        if self._inflight:
            self.cancel_all()
        if self._started_here:
            _ray().shutdown()
            self._started_here = self._connected = False


def _signal_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}


def _restore(handlers: dict[int, Any]) -> None:
    for sig, h in handlers.items():
        if h is not None and signal.getsignal(sig) is not h:
            signal.signal(sig, h)


def _short(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]
