"""What runs on a Ray node: a package unpacked and prepared once per node, gradings by its backend.

Each grading is one Ray task (`grade_task`), run in one of the node's worker processes. The
package reaches the node as one object of Ray's store (put once by the driver, pulled once per
node), is unpacked under the node's cache by its content hash, and prepared there by the
node's backend (local or docker) in that backend's own cache on the node (evaluator.local /
docker cache_dir, as when grading there by hand), under a file lock in that cache: the first
task on a node prepares, every later one, in any worker process, finds it prepared. Nodes that
share a disk (a test's cluster on one machine) share that cache, and prepare once between them.
The received packages are kept under node_cache_dir by Ray's node id.

The GPUs are Ray's: a task that asked for num_gpus is given them in CUDA_VISIBLE_DEVICES, and
the grading gets exactly those (docker: the slot's devices). A cancelled task (pesflow was
interrupted) kills its sandbox: the local backend's `finally` kills the sandbox's process
group, and the worker is then ended so that a stopped sandbox module never serves a later task.
"""

from __future__ import annotations

import fcntl
import io
import os
import socket
import tarfile
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from evaluator.backends import archive
from evaluator.backends.base import GradeRequest, GradeRun, InfraError, Prepared, Slot
from evaluator.config import EvaluatorConfig
from evaluator.task import load_task

_backends: dict[str, Any] = {}  # per worker process: the node backend, made once
_prepared: dict[str, Prepared] = {}  # per worker process: content hash -> the node's preparation


def package_tar(root: Path, rel: str) -> bytes:
    """The package root as a tar whose members sit under `rel` (e.g. kfc/toy-sum/task), so that
    the node loads it by the same name from its own copy."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tf:
        tf.add(str(root), arcname=rel)
    return buf.getvalue()


def node_identity() -> dict[str, str]:
    import ray  # optional (.[ray]); this module runs only inside Ray's workers

    ctx = ray.get_runtime_context()
    return {"node": ctx.get_node_id(), "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address()}


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _node_root(config: EvaluatorConfig, node: str) -> Path:
    return Path(config.ray.node_cache_dir).expanduser().resolve() / node[:16]


def _cache(config: EvaluatorConfig) -> Path:
    c = config.docker.cache_dir if config.ray.node_backend == "docker" else config.local.cache_dir
    return Path(c).expanduser().resolve()


def _backend(config: EvaluatorConfig, root: Path) -> Any:
    key = f"{config.ray.node_backend} {root}"
    if key not in _backends:
        cfg = config
        if config.ray.node_backend == "docker":
            from evaluator.backends.docker import DockerBackend  # optional (.[docker]), only for node_backend docker

            _backends[key] = DockerBackend(cfg.docker, writable=cfg.writable_paths)
        else:
            from evaluator.backends.local import LocalBackend  # deferred like the registry's: optional per node

            _backends[key] = LocalBackend(cfg.local, extra_hidden=[root], writable=cfg.writable_paths)
    return _backends[key]


def unpacked(root: Path, content_hash: str, package: bytes) -> Path:
    """The package's tar unpacked once on this node, by content hash (the caller holds the lock)."""
    pkg = root / "packages" / content_hash[:20]
    if not (pkg / ".complete").is_file():
        with tarfile.open(fileobj=io.BytesIO(package)) as tf:
            archive.extract_tree(tf, pkg)
        (pkg / ".complete").write_text(content_hash)
    return pkg


def locked_unpacked(config: EvaluatorConfig, content_hash: str, package: bytes) -> Path:
    """`unpacked` under the node's lock for that package (what a cell on the node needs)."""
    root = _node_root(config, node_identity()["node"])
    with _locked(_cache(config) / "ray-locks" / f"{content_hash[:20]}.lock"):
        return unpacked(root, content_hash, package)


def node_prepare(config: EvaluatorConfig, name: str, rel: str, content_hash: str,
                 package: bytes) -> tuple[Any, Prepared, bool]:
    """The node's backend and its preparation of the package; `fresh`: this call prepared it."""
    ident = node_identity()
    root = _node_root(config, ident["node"])
    backend = _backend(config, root)
    if content_hash in _prepared:
        return backend, _prepared[content_hash], False
    # one preparation per node (per shared cache), across worker processes
    with _locked(_cache(config) / "ray-locks" / f"{content_hash[:20]}.lock"):
        pkg = unpacked(root, content_hash, package)
        task = load_task(name, [pkg])
        if task.content_hash != content_hash:
            raise InfraError(f"the package reached node {ident['host']} changed (hash {task.content_hash[:12]}, "
                             f"sent {content_hash[:12]})")
        prepared = backend.prepare(task)
        fresh = not prepared.cached
        if fresh:  # what this node built, one line each time (a test counts them)
            marker = root / "prepared" / content_hash[:20]
            marker.parent.mkdir(parents=True, exist_ok=True)
            with open(marker, "a") as f:
                f.write(f"{time.time()}\n")
    _prepared[content_hash] = prepared
    return backend, prepared, fresh


def describe_task(config: EvaluatorConfig, name: str, rel: str, content_hash: str, package: bytes,
                  baseline: list[str]) -> dict[str, Any]:
    """Prepare on this node; what the driver keeps of it (dev engine, warnings, environment) and
    the baseline's text of the files asked for."""
    backend, prepared, fresh = node_prepare(config, name, rel, content_hash, package)
    return {"state": {k: v for k, v in prepared.state.items() if k in ("dev_engine", "environment", "backend")},
            "warnings": list(prepared.warnings), "seconds": prepared.seconds, "fresh": fresh,
            "baseline": {r: backend.baseline_text(prepared, r) for r in baseline}, **node_identity()}


def grade_task(config: EvaluatorConfig, name: str, rel: str, content_hash: str, package: bytes,
               request: dict[str, Any], blobs: dict[str, dict[str, bytes]]) -> dict[str, Any]:
    """One grading on this node. `request`: a GradeRequest's fields but its paths; `blobs`: the
    reviewer's and the trust screen's files by name. Returns the GradeRun's fields, the tar of
    its logs, and where it ran."""
    import ray  # optional (.[ray]); this module runs only inside Ray's workers

    started = time.monotonic()
    # while it runs, the grading is listed under its node (pid: a killed worker's entry names a dead process)
    mark = _node_root(config, node_identity()["node"]) / "inflight" / f"{os.getpid()}-{time.time_ns()}"
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(f"{os.getpid()} {name}\n")
    try:
        backend, prepared, fresh = node_prepare(config, name, rel, content_hash, package)
        gpus = [str(int(float(g))) for g in ray.get_gpu_ids()]
        with tempfile.TemporaryDirectory(prefix="pesflow-ray-") as tmp:
            t = Path(tmp)
            paths: dict[str, dict[str, Path]] = {}
            for kind, files in blobs.items():
                (t / kind).mkdir()
                paths[kind] = {}
                for fname, data in files.items():
                    (t / kind / fname).write_bytes(data)
                    paths[kind][fname] = t / kind / fname
            out = t / "out"
            out.mkdir()
            env = dict(request["env"])
            if gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)  # what Ray assigned this task, and only that
            req = GradeRequest(files=request["files"], grader=request["grader"], env=env,
                               reviewer_files=paths.get("reviewer", {}), timeout=request["timeout"], out_dir=out,
                               trust=request["trust"], trust_files=paths.get("trust", {}), command=request["command"],
                               scan_writes=bool(request.get("scan_writes")))
            if config.ray.node_backend == "docker":
                run = backend.grade(prepared, req, slot=Slot(0, tuple(int(g) for g in gpus), len(gpus)))
            else:
                run = backend.grade(prepared, req)
            logs = archive_dir(out)
    except KeyboardInterrupt:
        # ray.cancel: the sandbox was killed by the backend's own cleanup; end this worker, whose
        # sandbox module now refuses new gradings, so that Ray starts a fresh one
        from evaluator import sandbox  # optional here: only a local node backend has sandboxes to stop

        sandbox.stop_all()
        os._exit(1)
    except InfraError as e:
        run, logs, fresh, gpus = GradeRun(reward=None, returncode=-1, timed_out=False, seconds=0.0, output="",
                                          infra_error=str(e)), b"", False, []
    finally:
        mark.unlink(missing_ok=True)
    fields = {k: getattr(run, k) for k in run.__dataclass_fields__}
    return {"run": fields, "logs": logs,
            "where": {**node_identity(), "gpus": gpus, "prepared": "here" if fresh else "cached",
                      "node_seconds": round(time.monotonic() - started, 3)}}


def archive_dir(path: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for p in sorted(path.rglob("*")):
            if p.is_file() and not p.is_symlink():
                tf.add(str(p), arcname=str(p.relative_to(path)), recursive=False)
    return buf.getvalue()


def unpack_logs(data: bytes, dest: Path, limit: int) -> None:
    if data:
        archive.extract_regular(io.BytesIO(data), dest, limit=limit)


def run_from(fields: dict[str, Any]) -> GradeRun:
    return replace(GradeRun(reward=None, returncode=0, timed_out=False, seconds=0.0, output=""), **fields)
