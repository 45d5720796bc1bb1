"""The trust verdict: what the screens found about one grading, beside the grader's own figures.

A finding names its family and its evidence (`timer_replaced: time.perf_counter by
submission/kernel.py:14`). The families are the ways a candidate can earn a score without
computing faster; every screen (runtime guard, probes, static read, plausibility) reports in
these names, so a reader, a lesson or a table says the same thing whichever screen saw it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

# family -> what it means, in one line (the summarizer's lesson and the report use it)
FAMILIES: dict[str, str] = {
    "timer_replaced": "replaced or wrapped a clock, timer or synchronization the harness measures with",
    "harness_patched": "replaced attributes of the harness's own modules, builtins or library classes it did not define",
    "caller_inspected": "read its callers' frames to learn who calls it (e.g. the timing loop)",
    "grader_sniffed": "read the process's argv, the grader's mode variables or the grader's files to learn which pass runs",
    "gc_walked": "walked the garbage collector's objects to reach the harness's",
    "lazy_output": "returned an object that computes later (a proxy or generator) instead of plain values",
    "output_cached": "handed back an output kept from an earlier call instead of computing it",
    "wrong_on_unchecked_inputs": "answered right on the inputs the correctness pass checks and wrong on others",
    "speed_not_reproduced": "earned a speedup that pesflow, timing candidate and baseline on the same calls with its own clock, does not reproduce",
    "knows_who_asks": "gave the grader's call an answer that the same call, made by pesflow on the same inputs, does not give",
    "unsynchronized_work": "left work running (threads, GPU streams) that nobody waits for when it returns",
    "guard_evasion": "tried to silence or escape pesflow's runtime guard",
}
REVIEW = "implausible_speedup"  # not a family: a speedup far past the reference, every probe passed
AT_REWARD_CAP = "speedup_at_reward_cap"  # not a family: a speedup where the reward reaches its cap (the anchor squared), every probe passed
WATCHED_DIFFERS = "watched_differs"  # not a family: the watched grading did not reproduce the scored one
# what needs a person's review without being a finding, in one line each (readers and prompts)
REVIEWS: dict[str, str] = {
    REVIEW: "a speedup far past the reference's, every probe passed",
    AT_REWARD_CAP: "a speedup at which the benchmark's reward reaches its cap, every probe passed",
    WATCHED_DIFFERS: "graded again with the screen watching, it failed or read far lower (it may know when it is watched)",
}


class Finding(BaseModel):
    family: str
    evidence: str  # where and what: `time.perf_counter by submission/kernel.py:14`
    screen: str  # runtime | probe | static | plausibility

    def reason(self) -> str:
        return f"{self.family}: {self.evidence}"


class Trust(BaseModel):
    """`trust` of a verdict: suspect (an exploit's score, never a result), needs_review (a
    speedup far past the reference that passed every probe: stays in the search, flagged until
    a person accepts it), the reasons, and what each screen checked."""

    suspect: bool = False
    needs_review: bool = False
    reasons: list[str] = Field(default_factory=list)
    checks: dict[str, Any] = Field(default_factory=dict)
    review: dict[str, Any] | None = None  # a person's decision (pesflow review): accepted/rejected, why, when

    @classmethod
    def of(cls, findings: list[Finding], checks: dict[str, Any], needs_review: bool = False) -> "Trust":
        reasons: list[str] = []
        per_family: dict[str, int] = {}
        for r in dict.fromkeys(f.reason() for f in findings):  # at most 3 a family: the rest say the same
            fam = r.split(":", 1)[0]
            per_family[fam] = per_family.get(fam, 0) + 1
            if per_family[fam] <= 3:
                reasons.append(r)
        return cls(suspect=bool(findings), needs_review=needs_review and not findings, reasons=reasons, checks=checks)

    @property
    def families(self) -> list[str]:
        return list(dict.fromkeys(r.split(":", 1)[0] for r in self.reasons))

    def overruled(self) -> bool | None:
        """A person's decision: True accepted (a result after all), False rejected, None none."""
        if not self.review:
            return None
        return self.review.get("decision") == "accept"


def is_result(trust: "Trust | dict | None") -> bool:
    """The one rule: may this grading's figures count (fitness, parent, best, pick, table cell)?
    Not when suspect, unless a person accepted it; a person's rejection takes any one out. A
    grading that needs review is a result (an honest breakthrough must be able to climb); the
    readers flag it until a person accepts it."""
    if trust is None:
        return True
    t = trust if isinstance(trust, Trust) else Trust.model_validate(trust)
    decision = t.overruled()
    if decision is not None:
        return decision
    return not t.suspect
