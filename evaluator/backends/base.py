"""What every grading backend offers: prepare once per package, grade many, close."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from evaluator.task import NO_DEV_ENGINE, Task, grader_command


class InfraError(Exception):
    """Our machinery or the machine failed; never reported as the candidate's fault."""


class BackendUnavailable(Exception):
    """Where gradings go cannot take them at all (a cluster that cannot be reached, resources no
    node has, a cloud that does not schedule within the configured wait): no retry or next
    candidate can cure it, so it is not an InfraError (those become a verdict and are retried);
    it stops the command with its one line (exit 3), the run directory resumable."""


def command_for(request: "GradeRequest", prepared: "Prepared") -> tuple[str, list[str]]:
    """The grader's command and where its verdict lands; a dev grading of a package without a
    dev engine is an InfraError naming the fix (every backend asks the same way)."""
    if request.command is not None:  # pesflow's own script in the grading's place (the trust probes)
        return request.command, []
    found = grader_command(request.grader, prepared.state.get("dev_engine"))
    if found is None:
        raise InfraError(NO_DEV_ENGINE)
    return found


@dataclass(frozen=True)
class Capabilities:
    """What a backend tells the scheduler in front of it (evaluator/parallel.py) about itself.

    gpus: whose GPUs a GPU grading runs on. "host": this machine's (the driver's nvidia-smi
    lists them, one grading per GPU at a time, CUDA_VISIBLE_DEVICES names the slot's); "remote":
    each grading brings its own (a Modal sandbox, a Ray task placed on a node with a GPU), so
    the driver's GPUs are neither read nor required, and nothing pins the grader's devices.
    slots: grade() takes the worker slot (`slot=`), for warm state kept per slot (docker).
    cancel: cancel_all() stops gradings in flight elsewhere (a signal to pesflow stops them)."""

    gpus: str = "host"  # "host" | "remote"
    slots: bool = False
    cancel: bool = False


# Declarations of backends whose class carries none (the registry adds each entry's here).
_DECLARED: dict[str, Capabilities] = {"docker": Capabilities(slots=True), "modal": Capabilities(gpus="remote"),
                                      "ray": Capabilities(gpus="remote", cancel=True)}
_live: "weakref.WeakSet[Any]" = weakref.WeakSet()  # backends made by the registry, until closed
_live_lock = threading.Lock()


def declare(name: str, caps: Capabilities) -> None:
    _DECLARED[name] = caps


def capabilities_of(backend: Any) -> Capabilities:
    """The backend's own declaration, else its registered name's, else the defaults (a host backend)."""
    caps = getattr(backend, "capabilities", None)
    return caps if isinstance(caps, Capabilities) else _DECLARED.get(getattr(backend, "name", ""), Capabilities())


def track(backend: Any) -> None:
    with _live_lock:
        _live.add(backend)


def forget(backend: Any) -> None:
    with _live_lock:
        _live.discard(backend)


def cancel_all_live() -> int:
    """Cancel every in-flight grading of every live backend that can (a signal handler's job,
    beside evaluator.sandbox.stop_all for this machine's sandboxes). Returns how many stopped."""
    with _live_lock:
        backends = list(_live)
    n = 0
    for b in backends:
        cancel = getattr(b, "cancel_all", None)
        if cancel is not None:
            try:
                n += int(cancel() or 0)
            except Exception:  # a signal handler must reach every backend
                pass
    return n


@dataclass(frozen=True)
class Slot:
    index: int  # the worker, 0 .. workers-1
    devices: tuple[int, ...] = ()  # the host GPUs this grading holds (GPU tasks on a "host" backend only)
    gpus: int = 0  # GPUs the grading needs (0: a CPU task, or a GPU task checked on the CPU)


@dataclass
class Prepared:
    """A package made ready to grade; opaque to callers beyond these fields."""

    task: Task
    key: str
    seconds: float  # what preparing cost (0 when it came from the cache)
    cached: bool
    warnings: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class GradeRequest:
    files: dict[str, str | None]  # scope files to write over the baseline (None: delete)
    grader: str  # "dev" | "hidden"
    env: dict[str, str]  # extra environment for the grader (verify mode, patch paths)
    reviewer_files: dict[str, Path]  # name -> host path, made visible read-only to the grader
    timeout: float
    out_dir: Path  # where the grader's logs are copied
    trust: dict[str, Any] | None = None  # the runtime guard's config (evaluator/trust/instrument.py); None: no guard
    trust_files: dict[str, Path] = field(default_factory=dict)  # name -> host file, beside the config (read-only)
    command: str | None = None  # run this instead of the grader (the trust probes); its results are its own
    # Called once with the grading's run and a Prober (evaluator/trust/screen.py) that runs
    # commands as fresh processes in the same sandbox, after the grader's last process is gone,
    # by a backend that can (local); one that cannot leaves it uncalled and the evaluator
    # probes in a fresh grading instead. Not data: never sent to another machine.
    then: "Callable[[GradeRun, Any], None] | None" = None


@dataclass
class GradeRun:
    reward: dict[str, Any] | None  # the grader's verdict file, parsed
    returncode: int
    timed_out: bool
    seconds: float
    output: str
    grader_seconds: float | None = None  # the grader's own run time, measured inside the sandbox
    infra_error: str | None = None
    notes: list[str] = field(default_factory=list)  # remarks for the verdict's message (a backend's, e.g. the GPU used)
    trust_events: list[dict[str, Any]] = field(default_factory=list)  # the guard's events, socket and files merged
    trust_socket: bool = False  # whether they came over the socket (then only its copy of a record is believed)
    node: dict[str, Any] | None = None  # where a cluster backend ran it (ray: node id, host, GPUs, attempts)
    trust_dir: Path | None = None  # where its kept calls' files are, when not the log folder's trust/ (a deferred grading's)


class Backend(Protocol):
    """What every backend offers.

    Optional, read with getattr: `capabilities` (a Capabilities; else the registry's entry
    says), `cancel_all()` (stop every grading in flight, return how many; a signal's job).
    The registry (evaluator/backends/registry.py) makes them by name.
    `grade` is given `slot=` only when capabilities.slots says it wants it."""

    name: str

    def prepare(self, task: Task) -> Prepared: ...

    def baseline_text(self, prepared: Prepared, rel: str) -> str | None: ...

    def grade(self, prepared: Prepared, request: GradeRequest) -> GradeRun: ...

    def close(self) -> None: ...
