"""The typed result of grading one thing once."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evaluator.mismatch import Mismatch
from evaluator.scoring import DevFigure, finite_number as _num
from evaluator.trust.findings import Trust, is_result


class Status(str, Enum):
    ok = "ok"  # graded, whatever the reward
    hard_fail = "hard_fail"  # the grader's gates (or a candidate that cannot be applied)
    scope_violation = "scope_violation"  # refused before anything ran
    timeout = "timeout"  # the task's time limit, enforced on the whole process tree
    grader_error = "grader_error"  # the task's grader broke (no readable verdict)
    infra_error = "infra_error"  # our machinery or the machine failed: never the candidate's fault


class Tests(BaseModel):
    passed: int = 0
    total: int = 0


class PackageRef(BaseModel):
    """Which package was graded, and where it comes from (evaluator/benchmark.py)."""

    name: str
    path: str
    content_hash: str
    root: str | None = None  # the tasks root it was found in
    repo: str | None = None
    commit: str | None = None
    official: bool | None = None  # the benchmark's own package (False: e.g. pesflow's re-creation)


class Verdict(BaseModel):
    task: str
    mode: str
    backend: str
    grader: str  # "dev" or "hidden"
    status: Status
    reward: float | None = 0.0  # None: withheld, the grading was tampered with (trust/findings.py)
    speedup: float | None = None
    ref_speedup: float | None = None
    ref_speedup_source: str | None = None  # where the package's anchor was read, and who measured it (Anchor.describe)
    hard_fail_reasons: list[str] = Field(default_factory=list)
    tests: Tests = Field(default_factory=Tests)
    cv: Any = None
    hardware: str | None = None
    seconds: float = 0.0  # wall time of the whole evaluation, preparing included
    grader_seconds: float | None = None  # of which the task's grader itself ran
    log_dir: str | None = None
    candidate_hash: str | None = None
    package: PackageRef | None = None
    message: str = ""  # one line on what happened, for people
    raw: dict[str, Any] = Field(default_factory=dict)  # the grader's reward.json as written

    dev: DevFigure | None = None  # a dev engine's own figure, raw, with its kind (evaluator/scoring.py)
    environment: dict[str, Any] | None = None  # image, or the local stand-in and how it differs from the pins
    # the screens' verdict (evaluator/trust/); the figures stay the grader's
    trust: Trust = Field(default_factory=Trust)
    feedback: str | None = None  # a dev grading's lines from the package's own loop (evaluator/feedback.py)
    diagnostics: list[str] = Field(default_factory=list)  # the candidate's own errors in the grader's output
    dev_details: list[str] = Field(default_factory=list)  # a dev grading's failed checks and per-workload figures
    profile: dict[str, Any] | None = None  # where a dev-graded candidate's time goes (evaluator/profile.py), when asked
    # a dev grading failed by a correctness gate: how its answers differ (evaluator/mismatch.py)
    mismatch: Mismatch | None = None

    @property
    def correct(self) -> bool:
        return is_correct(self.status.value, self.hard_fail_reasons)

    @property
    def is_result(self) -> bool:
        """May its figures count (fitness, parent, best, pick, table cell)? evaluator/trust/findings.py."""
        return is_result(self.trust)


SPEED_ONLY_GATES = frozenset({"speedup_not_above_baseline", "speedup_not_above_anchor", "ref_speedup_invalid"})


def code_reasons(reasons: list[str]) -> list[str]:
    """The hard fails that speak against the code, leaving out those about speed alone."""
    return [r for r in reasons if r not in SPEED_ONLY_GATES]


def is_correct(status: str, hard_fail_reasons: list[str] | None) -> bool:
    """The one definition of a correct candidate: graded, and no gate against its code (the gates
    about speed alone, e.g. not beating the anchor, say nothing against it; a hard fail that names
    no gate is not correct). Verdicts, the population's solutions and the readers' dicts ask this."""
    reasons = list(hard_fail_reasons or [])
    if str(status) == Status.hard_fail.value and not reasons:
        return False
    return str(status) in (Status.ok.value, Status.hard_fail.value) and not code_reasons(reasons)


def _reasons(raw: dict[str, Any]) -> list[str]:
    for key in ("hard_fail_reasons", "hard_fails"):
        v = raw.get(key)
        if isinstance(v, str):
            return [s for s in v.replace(",", " ").split() if s]
        if isinstance(v, list):
            return [str(s) for s in v if str(s)]
    return []


def _tests(raw: dict[str, Any]) -> Tests:
    t = raw.get("tests")
    if isinstance(t, dict):
        return Tests(passed=int(_num(t.get("passed")) or 0), total=int(_num(t.get("total")) or 0))
    return Tests()


ENGINE_STATE = "verifier_state.json"  # a dev engine's gates, written beside its reward.json


def with_engine_state(raw: dict[str, Any], state: dict[str, Any] | None) -> dict[str, Any]:
    """A dev engine's verdict: its reward.json with the gates it wrote beside it. The benchmark's
    score_engine.sh keeps reward.json to reward and speedup and puts the verifier's hard fails
    and correctness in verifier_state.json: read alone, a wrong candidate was `ok`. Reasons are
    only added, never taken away (a state file cannot make a grading pass)."""
    if not isinstance(state, dict):
        return raw
    have = _reasons(raw)
    more = [r for r in _reasons(state) if r not in have]
    gates = state.get("gates") if isinstance(state.get("gates"), dict) else {}
    failed = state.get("correctness_ok") is False or gates.get("correctness_ok") is False
    if not more and not failed:
        return raw
    out = {**raw, "hard_fail_reasons": have + more}
    if failed:  # named by from_reward_json's own rule where no reason says more
        out["gates"] = {**(raw["gates"] if isinstance(raw.get("gates"), dict) else {}), "correctness_ok": False}
    return out


def engine_state(log_dir: Path, result_paths: list[str]) -> dict[str, Any] | None:
    """The gates file beside the reward.json a grading's verdict was read from: the first of its
    grader's result paths that the grading wrote, as the backend reads them, in its log folder."""
    for path in result_paths:
        host = log_dir / path.lstrip("/")
        if host.is_file():
            return read_reward_file(host.with_name(ENGINE_STATE))
    return None


def from_reward_json(raw: dict[str, Any], **fields: Any) -> Verdict:
    """A verdict from the grader's reward.json; its fields may be strings, lists or numbers."""
    reasons = _reasons(raw)
    correctness = raw.get("gates", {}).get("correctness_ok") if isinstance(raw.get("gates"), dict) else None
    if correctness is False and not reasons:
        reasons = ["correctness_failed"]
    hardware = raw.get("actual_hardware_type") or raw.get("hardware")
    return Verdict(
        status=Status.hard_fail if reasons else Status.ok,
        reward=_num(raw.get("reward")) or 0.0,
        speedup=_num(raw.get("speedup")),
        ref_speedup=_num(raw.get("ref_speedup")),
        hard_fail_reasons=reasons,
        tests=_tests(raw),
        cv=raw.get("cv"),
        hardware=str(hardware) if hardware else None,
        raw=raw,
        **fields,
    )


def read_reward_file(path: Path) -> dict[str, Any] | None:
    """reward.json as a dict, or None. Never follows a symlink a candidate may have planted."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 4 << 20:
            return None
        text = path.read_text(errors="replace").strip()
    except OSError:
        return None
    # Some graders print more than one JSON line; the last object is the verdict.
    for line in [text, *reversed(text.splitlines())]:
        try:
            v = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(v, dict):
            return v
    return None


def verdict_json(v: Verdict) -> str:
    """The one JSON object `pesflow evaluate --json` prints."""
    d = v.model_dump(mode="json", exclude={"raw"})
    return json.dumps(d)


def say_trust(v: Verdict, when: str = "") -> None:
    """The trust verdict in the verdict's one-line message."""
    if v.trust.suspect:
        v.message += f"; suspect{when}: " + "; ".join(v.trust.reasons[:3])
    elif v.trust.needs_review:
        v.message += "; needs review: " + v.trust.reasons[0]


def judged_figure(v: Verdict) -> float | None:
    """The figure a verdict is judged by: its speedup over the baseline, else the dev engine's own."""
    return v.speedup if v.speedup is not None else (v.dev.value if v.dev else None)
