"""What one grading is asked and what it gives back, as plain records: the request, the worker slot
it runs in, what a backend saw of it (the report the grading policy reads) and the run the evaluator
reads. Below the backends, the trust screen and the policy, which all read them: records only, so
this module imports nothing of pesflow's."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class Slot:
    index: int  # the worker, 0 .. workers-1
    devices: tuple[int, ...] = ()  # the host GPUs this grading holds (GPU tasks on a "host" backend only)
    gpus: int = 0  # GPUs the grading needs (0: a CPU task, or a GPU task checked on the CPU)


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
    # what the grading wrote listed once its grader is over (evaluator/trust/written.py), with no
    # guard in it: the official grading's, read outside the processes the grader times
    scan_writes: bool = False
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


@dataclass
class GradingReport:
    """What a backend saw of one grading, before any policy: the figures, never a decision
    (evaluator/grading_policy.py turns it into a GradeRun)."""

    returncode: int
    output: str
    seconds: float  # the whole grading's wall time, as the backend measured it
    reward: dict[str, Any] | None = None  # what the grading wrote: its verdict file, parsed (None: none)
    timed_out: bool = False  # stopped at the grading's timeout
    grader_seconds: float | None = None  # the grader's own run time, measured inside the sandbox
    breaches: list[str] = field(default_factory=list)  # limits a mechanism saw broken (refused forks, a full disk...)
    oom_killed: bool = False  # the kernel's OOM killer acted on the grading's memory group
    memory_peak_bytes: int | None = None  # the group's peak, the OOM kill's evidence (None: unknown)
    strays: list[str] = field(default_factory=list)  # "pid:name" of processes that outlived the grader
    signalled: bool = False  # something in the grading signalled the sandbox's init
    forged: bool = False  # a result file changed after the grader returned
    memory_mb: int | None = None  # the limits enforced, for the verdict's wording
    pids: int | None = None
    disk_mb: int | None = None
    output_mb: int | None = None
    infra_error: str | None = None  # the backend's own failure (setup, a dead container): not the candidate's
    fault: str | None = None  # the machine's software failed under the grader (a stand-in's missing module)
    notes: list[str] = field(default_factory=list)
    trust_events: list[dict[str, Any]] = field(default_factory=list)
    trust_socket: bool = False
