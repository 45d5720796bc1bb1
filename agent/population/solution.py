"""A solution: one graded candidate as the population keeps it (its code, its verdict's figures and
what the model may be shown of them), whatever island or cell it sits in (agent/population/database.py)."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evaluator.trust.findings import Trust, is_result
from evaluator.verdict import is_correct

STATUSES = ("ok", "hard_fail", "scope_violation", "timeout", "grader_error", "infra_error", "no_code")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # ids become file names in checkpoints


class PopulationError(ValueError):
    """One line naming the problem and the fix."""


class UnknownSolution(PopulationError, KeyError):
    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


class Solution(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    parent_id: str | None
    island: int
    round: int
    files: dict[str, str]
    content_hash: str
    status: str
    speedup: float | None = None
    reward: float | None = None
    dev_figure: float | None = None  # a dev engine's own figure, when no speedup over the baseline could be had
    dev_kind: str | None = None  # what that figure is (evaluator/scoring.py: vs_oracle, absolute:...)
    hard_fail_reasons: list[str] = Field(default_factory=list)
    tests_passed: int = 0
    tests_total: int = 0
    plan: str = ""
    lessons: str = ""
    duplicate_of: str | None = None
    features: dict[str, float] = Field(default_factory=dict)
    trust: Trust = Field(default_factory=Trust)  # the screens' verdict on its grading, and a person's review
    feedback: str = ""  # its dev grading's lines from the package's own loop (evaluator/feedback.py)
    diagnostics: list[str] = Field(default_factory=list)  # its own errors in the grader's output
    dev_details: list[str] = Field(default_factory=list)  # its dev grading's failed checks and per-workload figures
    # how its wrong answer differs from the baseline's (evaluator/mismatch.py)
    mismatch: list[str] = Field(default_factory=list)
    # where its time goes (evaluator/profile.py summary), engineer
    profile: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _id_ok(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError(f"solution id {v!r} must be letters, digits, '.', '_' or '-' (it names a file)")
        return v

    @field_validator("status")
    @classmethod
    def _status_ok(cls, v: str) -> str:
        if v not in STATUSES:
            raise ValueError(f"status {v!r} is not one of {', '.join(STATUSES)}; pass the evaluator's status")
        return v

    @field_validator("island", "round")
    @classmethod
    def _non_negative(cls, v: int) -> int:
        if v < 0:
            raise ValueError(f"must be >= 0 (got {v})")
        return v

    @field_validator("speedup", "reward", "dev_figure")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        # A checkpoint is strict JSON, and log(inf) would break normalization.
        if v is not None and not math.isfinite(v):
            raise ValueError(f"must be a finite number or None (got {v})")
        return v

    @property
    def correct(self) -> bool:
        return is_correct(self.status, self.hard_fail_reasons)

    @property
    def is_result(self) -> bool:
        """May its figures count? evaluator/trust/findings.py's one rule."""
        return is_result(self.trust)

    @property
    def fitness(self) -> float | None:
        """The speedup over the baseline; where a dev engine gave none (its baseline scores 0), its
        own figure, which orders candidates the same way (higher is better). None for a failure
        and for a grading whose figures do not count (a suspect's speedup is an exploit's)."""
        if not self.correct or not self.is_result:
            return None
        for v in (self.speedup, self.dev_figure):
            if v is not None and v > 0:
                return v
        return None
