"""Fix turns and stop rules: what ends a child's turns and what ends the search early.

Fix turns: a child that does not build or fails a check (and, where `loop.fix_on` asks, one that
is not faster than its parent) goes back to its executor with its own verdict (under the run's
feedback protocol) and its code as a diff against the parent, for up to `loop.fix_turns` more turns
in the same slot, as LoongFlow's executor iterates against the evaluator. Each turn is a child of
the one it fixes, graded and journaled like any other. On by default (one turn, failures only):
the model that wrote a child is the one that can act on its own error, and a failure's fix is the
cheapest correct child a search can buy; "slower" is opt-in, since a slow child's fix is a new idea,
which the next round's planner is for.

A verdict whose figures do not count (a suspect) gets no turn: the search does not help an
exploit along. Nor does a grading that failed on our side (infra, the grader's own error).
"""

from __future__ import annotations

from typing import Any

from agent.population.database import Solution
from evaluator.verdict import Status, Verdict

NOT_OURS = (Status.infra_error, Status.grader_error)


def child_id(k: int, i: int, t: int = 0) -> str:
    """Round k's child i, or its t-th fix turn (r03-c1, r03-c1-f1)."""
    return f"r{k:02d}-c{i}" + (f"-f{t}" if t else "")


def solution_from(v: Verdict, **fields: Any) -> Solution:
    """A verdict as the population keeps it: its status and gates as the grader gave them (whether
    that is correct is evaluator.verdict's one rule, asked through Solution.correct)."""
    dev = v.dev if v.dev is not None and v.speedup is None else None
    return Solution(status=v.status.value, speedup=v.speedup, reward=v.reward,
                    hard_fail_reasons=list(v.hard_fail_reasons), dev_figure=dev.value if dev else None,
                    dev_kind=dev.kind if dev else None, tests_passed=v.tests.passed, tests_total=v.tests.total,
                    trust=v.trust.model_copy(deep=True), feedback=v.feedback or "", diagnostics=list(v.diagnostics),
                    dev_details=list(v.dev_details), mismatch=list(v.mismatch.lines) if v.mismatch is not None else [],
                    profile=dict(v.profile or {}), **fields)


def needs_fix(v: Verdict | None, parent: Solution, fix_on: tuple[str, ...] | list[str]) -> str | None:
    """Why a graded child gets another turn, or None: it failed (build, check, time limit), or,
    where `fix_on` holds "slower", it is correct and no faster than its parent (by the speedup,
    else the dev engine's own figure)."""
    if v is None or v.status in NOT_OURS or not v.is_result:
        return None
    if not v.correct:
        return "it failed" if "failed" in fix_on else None
    if "slower" not in fix_on:
        return None
    if v.speedup is not None and parent.speedup is not None:
        return "it is not faster than its parent" if v.speedup <= parent.speedup else None
    if v.speedup is None and v.dev is not None and parent.dev_figure is not None:
        return "it is not better than its parent" if v.dev.value <= parent.dev_figure else None
    return None


STOP_RULES = ("target_reached", "patience", "roofline_reached")


def _figure(entry: dict[str, Any]) -> float | None:
    if entry.get("speedup") is not None:
        return float(entry["speedup"])
    dev = entry.get("dev")
    return float(dev["value"]) if isinstance(dev, dict) and dev.get("value") is not None else None


def stop_rule(best_by_round: list[dict[str, Any]], patience: int | None, target: float | None,
              roofline: float | None = None) -> str | None:
    """Which stop rule ends the search after the last round of `best_by_round` (one entry a
    round: its best's id and figure), or None: `target_reached` once the best's figure reaches
    `target`; `roofline_reached` once its profile's dominant kernel is at `roofline` of a ceiling
    (a GPU profile only: evaluator/profile.py); `patience` after `patience` rounds in a row whose
    best was not new."""
    if not best_by_round:
        return None
    last = best_by_round[-1]
    fig = _figure(last)
    if target is not None and fig is not None and fig >= target:
        return "target_reached"
    if roofline is not None and last.get("roofline") is not None and float(last["roofline"]) >= roofline:
        return "roofline_reached"
    if patience is not None:
        last_ids = [b.get("best_id") for b in best_by_round[-patience - 1:]]
        if len(last_ids) == patience + 1 and len(set(last_ids)) == 1:
            return "patience"
    return None
