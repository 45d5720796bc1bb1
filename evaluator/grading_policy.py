"""What a grading's broken limits mean, for every backend alike (issue 41): local, docker, Modal
and Ray report what happened (an OOM kill with the grading's peak, refused forks, processes left
running, a full disk); these functions decide, so one candidate gets one verdict and one
wording wherever it is graded.

- A broken limit is the candidate's failure: its reason first among the grader's own, reward 0.
- An out-of-memory kill is the machine's, not the candidate's, when the grading's peak stayed
  under 90 % of its own limit (the kernel's counter also counts the machine-wide OOM killer);
  with no peak known it is the candidate's.
- A process left running past the grader fails the grading under `stray_processes: fail`; under
  `kill` it is killed and the grading stands.
"""

from __future__ import annotations

from typing import Any

from evaluator.limits import DISK_QUOTA, OUT_OF_MEMORY, OUTPUT_LIMIT, TOO_MANY_PROCESSES, machine_oom

BACKGROUND_PROCESS = "background_process"
SANDBOX_TAMPERING = "sandbox_tampering"
RESULT_FORGED = "result_forged_after_grader"
__all__ = ["machine_oom"]  # limits.py's rule, asked through this module by the container backends

WORDS = {  # each reason's one sentence, its figures filled in where the backend knows them
    OUT_OF_MEMORY: "the grading went past its memory limit ({memory} MiB) and the kernel killed it",
    TOO_MANY_PROCESSES: "the grading tried to run more than {pids} processes and threads at once",
    DISK_QUOTA: "the grading filled its {disk} MiB of writable space",
    OUTPUT_LIMIT: "the grading printed more than {output} MiB",
    BACKGROUND_PROCESS: "processes it started outlived the grader: {strays}",
    SANDBOX_TAMPERING: "something in the grading signalled the sandbox's init",
    RESULT_FORGED: "a result file was written after the grader had returned",
}


def limit_verdict(reward: dict[str, Any] | None, reasons: list[str], *, memory_mb: int | None = None,
                  pids: int | None = None, disk_mb: int | None = None, output_mb: int | None = None,
                  strays: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    """The grader's verdict (if it wrote one) with the limits it broke put first and reward 0."""
    raw = dict(reward or {})
    prior = raw.get("hard_fail_reasons") or raw.get("hard_fails") or []
    if isinstance(prior, str):
        prior = prior.replace(",", " ").split()
    raw["hard_fail_reasons"] = reasons + [str(r) for r in prior if str(r) not in reasons]
    raw.pop("hard_fails", None)
    raw["reward"] = 0.0
    fields = {"memory": memory_mb, "pids": pids, "disk": disk_mb, "output": output_mb, "strays": " ".join(list(strays)[:5])}
    raw["pesflow_limits"] = {r: WORDS[r].format(**fields) for r in reasons if r in WORDS}
    raw["pesflow_grader_verdict"] = reward is not None
    return raw


def machine_oom_error(peak_bytes: int | None, limit_mb: int | None) -> str:
    """The infra error of a machine's OOM kill: one wording for every backend."""
    return (f"the machine ran out of memory while grading (the grading used at most {(peak_bytes or 0) >> 20} of its "
            f"{limit_mb} MiB); not the candidate's doing, grade it again")


def stray_reasons(strays: list[str], policy: str) -> list[str]:
    """A process left running past the grader: a failure under `fail`, nothing under `kill`."""
    return [BACKGROUND_PROCESS] if strays and policy == "fail" else []
