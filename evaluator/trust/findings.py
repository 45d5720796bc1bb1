"""The trust verdict: what the screens found about one grading, beside the grader's own figures.

A finding names the rule that saw it, its family and its evidence (`timer_replaced:
time.perf_counter by submission/kernel.py:14`). The rules and families are one table,
inside/pesflow_rules.py, which the code inside the grading loads too; every screen (runtime
guard, probes, static read) reports by rule id, so a reader, a lesson or a table says the same
thing whichever screen saw it.

This module is the one owner of "can this grading's figures be believed", in two steps:
- the grading itself (withhold_untrusted): where the sandbox saw it tampered with, or the
  package's own grader named a cheat by its anti-cheat gates, its speedup and reward are not
  figures at all and are withheld (a grader's gate `output_cached` is the grader's word);
- the screens (is_result): a grading the screens found suspect (a finding of family
  `output_cached` is pesflow's word) keeps its figures in its log but they never count.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from evaluator.trust.inside.pesflow_rules import FAMILIES, RULES, family  # noqa: F401 - one table for host and sandbox

REVIEW = "implausible_speedup"  # not a family: a speedup far past the reference, every probe passed
# not a family: a speedup where the reward reaches its cap (the anchor squared), every probe passed
AT_REWARD_CAP = "speedup_at_reward_cap"
WATCHED_DIFFERS = "watched_differs"  # not a family: the watched grading did not reproduce the scored one
NOT_REPRODUCED = "figure_not_reproduced"  # not a family: pesflow's own clock comes short of the figure, though not far
# what needs a person's review without being a finding, in one line each (readers and prompts)
REVIEWS: dict[str, str] = {
    REVIEW: "a speedup far past the reference's, every probe passed",
    AT_REWARD_CAP: "a speedup at which the benchmark's reward reaches its cap, every probe passed",
    WATCHED_DIFFERS: "graded again with the screen watching, it failed or read far lower "
                     "(it may know when it is watched)",
    NOT_REPRODUCED: "pesflow, timing candidate and baseline on the same calls with its own clock, "
                    "measured well under the figure",
}


class Finding(BaseModel):
    """What one rule of RULES (inside/pesflow_rules.py) saw: its family follows from the rule."""

    rule: str = ""  # an id of RULES (empty in a verdict written before rules had ids)
    family: str = ""
    evidence: str  # where and what: `time.perf_counter by submission/kernel.py:14`
    screen: str  # runtime | probe | static | plausibility

    @model_validator(mode="after")
    def _family_of_rule(self) -> "Finding":
        if self.rule and not self.family:
            self.family = family(self.rule)
        return self

    def reason(self) -> str:
        return f"{self.family}: {self.evidence}"


class Trust(BaseModel):
    """`trust` of a verdict: suspect (an exploit's score, never a result), needs_review (a
    speedup far past the reference that passed every probe: stays in the search, flagged until
    a person accepts it), the reasons, and what each screen checked."""

    suspect: bool = False
    needs_review: bool = False
    reasons: list[str] = Field(default_factory=list)
    rules: list[str] = Field(default_factory=list)  # the ids of the rules behind the reasons (pesflow_rules.RULES)
    checks: dict[str, Any] = Field(default_factory=dict)
    review: dict[str, Any] | None = None  # a person's decision (pesflow review): accepted/rejected, why, when
    # the probes (and a watched grading) not run yet: in a search, a correct figure that did not
    # pass the best so far could not become a result when graded; screened in full before it is
    # picked as a parent, and never the best, the final pick or a cell without a grading of its own
    deferred: bool = False

    @classmethod
    def of(cls, findings: list[Finding], checks: dict[str, Any], needs_review: bool = False) -> "Trust":
        reasons: list[str] = []
        per_family: dict[str, int] = {}
        for r in dict.fromkeys(f.reason() for f in findings):  # at most 3 a family: the rest say the same
            fam = r.split(":", 1)[0]
            per_family[fam] = per_family.get(fam, 0) + 1
            if per_family[fam] <= 3:
                reasons.append(r)
        rules = list(dict.fromkeys(f.rule for f in findings if f.rule))
        return cls(suspect=bool(findings), needs_review=needs_review and not findings, reasons=reasons, rules=rules,
                   checks=checks)

    def adding(self, findings: list[Finding]) -> "Trust":
        """This trust with more findings: suspect, their reasons and rules added, its checks kept."""
        more = Trust.of(findings, {})
        if not more.suspect:
            return self
        return self.model_copy(update={
            "suspect": True, "needs_review": False, "deferred": False,
            "reasons": list(dict.fromkeys([*more.reasons, *self.reasons])),
            "rules": list(dict.fromkeys([*self.rules, *more.rules]))})

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


# Gates that say the grading itself was tampered with, so that its figures are not figures:
# the sandbox's (something outlived the grader, signalled its init, rewrote a result after it)
# and the graders' anti-cheat gates (our bundled graders' names; the format's graders set
# anti_cheat_ok=false in /logs/verifier/verifier_state.json).
TAMPERING = ("background_process", "sandbox_tampering", "result_forged_after_grader")
ANTI_CHEAT_PREFIXES = ("forbidden_runtime:", "forbidden_pattern:", "timer_patched", "side_stream_escape",
                       "output_cached", "baseline_called", "inputs_mutated", "beyond_roofline")


def untrusted_reasons(reasons: list[str], state: dict[str, Any] | None = None) -> list[str]:
    """The reasons (of `reasons`, and of the grader's state file) why a grading's speedup and
    reward cannot be believed; empty when they can."""
    out = [r for r in reasons if r in TAMPERING or r.startswith(ANTI_CHEAT_PREFIXES)]
    if isinstance(state, dict) and state.get("anti_cheat_ok") is False:
        out.append("anti_cheat_failed")
    return out


def withhold_untrusted(v: Any, state: dict[str, Any] | None = None) -> Any:
    """A tampered grading (v, an evaluator.verdict.Verdict) keeps its reasons and loses its figures:
    speedup and reward become
    null (`raw`, the grader's file as written, stays for the log folder's verdict.json only), so
    no prompt, table or report shows a forged number."""
    why = untrusted_reasons(v.hard_fail_reasons, state)
    if why:
        v.speedup = v.reward = None
        v.message += f"; speedup and reward withheld: the grading was tampered with ({', '.join(why[:3])})"
    return v
