"""What a grading's broken limits mean, for every backend alike (issue 41): local, docker and Modal
fill a GradingReport (evaluator/grading_records.py) with what they saw (the grader's exit, its
times, what it wrote, an OOM kill with the grading's peak, limits a mechanism saw broken, processes
left running, signals); one function, grading_result, turns it into the GradeRun the evaluator
reads, so one candidate gets one verdict and one wording wherever it is graded (Ray grades with the
local or docker backend on its node, so the same function decides there).

- A broken limit is the candidate's failure: its reason first among the grader's own, reward 0.
- An out-of-memory kill is the machine's, not the candidate's, when the grading's peak stayed
  under 90 % of its own limit (the kernel's counter also counts the machine-wide OOM killer);
  with no peak known it is the candidate's.
- A process left running past the grader fails the grading under `stray_processes: fail`; under
  `kill` it is killed and the grading stands.
"""

from __future__ import annotations

from typing import Any

from evaluator.grading_records import GradeRun, GradingReport
from evaluator.limits import DISK_QUOTA, OUT_OF_MEMORY, OUTPUT_LIMIT, TOO_MANY_PROCESSES, machine_oom

BACKGROUND_PROCESS = "background_process"
SANDBOX_TAMPERING = "sandbox_tampering"
RESULT_FORGED = "result_forged_after_grader"

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
    fields = {"memory": memory_mb, "pids": pids, "disk": disk_mb, "output": output_mb,
              "strays": " ".join(list(strays)[:5])}
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


def grading_result(report: GradingReport, stray_policy: str) -> GradeRun:
    """The one reading of a report: the machine's faults are infra errors; a broken limit is the
    candidate's failure, and the cause where a timeout followed it (a fork bomb retries until the
    clock runs out); after a timeout nothing else is held against the grading."""
    r = report

    def infra(message: str) -> GradeRun:
        return GradeRun(None, r.returncode, False, r.seconds, r.output, infra_error=message, notes=list(r.notes))

    if r.infra_error:
        return infra(r.infra_error)
    if r.oom_killed and machine_oom(r.memory_peak_bytes, r.memory_mb):
        return infra(machine_oom_error(r.memory_peak_bytes, r.memory_mb))
    broken = list(dict.fromkeys([*r.breaches, *([OUT_OF_MEMORY] if r.oom_killed else [])]))
    timed_out, reward = r.timed_out, r.reward
    if timed_out and broken:
        timed_out, reward = False, None  # the limit stopped it; what the grader wrote is not a verdict
    reasons: list[str] = []
    if not timed_out:
        reasons = broken + stray_reasons(r.strays, stray_policy)
        reasons += [SANDBOX_TAMPERING] if r.signalled else []
        reasons += [RESULT_FORGED] if r.forged else []
    if reasons:
        reward = limit_verdict(reward, reasons, memory_mb=r.memory_mb, pids=r.pids, disk_mb=r.disk_mb,
                               output_mb=r.output_mb, strays=r.strays)
    elif r.fault and not timed_out and failed_verdict(reward):
        return infra(r.fault)
    return GradeRun(reward, r.returncode, timed_out, r.seconds, r.output, grader_seconds=r.grader_seconds,
                    notes=list(r.notes), trust_events=r.trust_events, trust_socket=r.trust_socket)


def failed_verdict(reward: dict[str, Any] | None) -> bool:
    """No verdict, or one with hard fails: a failure the machine's software could explain."""
    if reward is None:
        return True
    return bool(reward.get("hard_fail_reasons") or reward.get("hard_fails"))
