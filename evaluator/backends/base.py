"""What every grading backend offers: prepare once per package, grade many, close."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evaluator.task import NO_DEV_ENGINE, Task, grader_command


class InfraError(Exception):
    """Our machinery or the machine failed; never reported as the candidate's fault."""


def command_for(request: "GradeRequest", prepared: "Prepared") -> tuple[str, list[str]]:
    """The grader's command and where its verdict lands; a dev grading of a package without a
    dev engine is an InfraError naming the fix (every backend asks the same way)."""
    if request.command is not None:  # pesflow's own script in the grading's place (the trust probes)
        return request.command, []
    found = grader_command(request.grader, prepared.state.get("dev_engine"))
    if found is None:
        raise InfraError(NO_DEV_ENGINE)
    return found


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


class Backend(Protocol):
    name: str

    def prepare(self, task: Task) -> Prepared: ...

    def baseline_text(self, prepared: Prepared, rel: str) -> str | None: ...

    def grade(self, prepared: Prepared, request: GradeRequest) -> GradeRun: ...

    def close(self) -> None: ...
