"""What every grading backend offers: prepare once per package, grade many, close."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Protocol

# The records live below the backends, the screen and the policy that read them; here too for existing importers.
from evaluator.grading_records import GradeRequest, GradeRun, Slot  # noqa: F401 - re-exported
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


@dataclass
class Prepared:
    """A package made ready to grade; opaque to callers beyond these fields."""

    task: Task
    key: str
    seconds: float  # what preparing cost (0 when it came from the cache)
    cached: bool
    warnings: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


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
