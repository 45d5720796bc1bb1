"""What the planner knows of the search so far besides its memory: every attempt against its
parent in one compact table, and the plans still in flight.

A planner that sees only lessons and a few inspirations plans the same thing twice: round 2 is
selected before round 1 is graded, from the same population, so without the plans in flight its
prompt is round 1's byte for byte. Both parts are pure functions of what the round's selection
could know (the rounds applied when it was made, and the rounds selected before it), so a resumed
or replayed run builds the same prompt.
"""

from __future__ import annotations

import re

from agent.population.database import Solution
from agent.search.prompts import shown_reasons

HEADLINE_CHARS = 90  # a plan's first line in the table
IN_FLIGHT_CHARS = 400  # a plan in flight: its opening lines
_BULLET = re.compile(r"^\s*(?:[#>*-]+|\d+[.)]|\*\*[^*]*\*\*:?)\s*")


def headline(plan: str, chars: int = HEADLINE_CHARS) -> str:
    """A plan's first line that says something (headings, numbering and bullets stripped)."""
    for line in plan.splitlines():
        text = _BULLET.sub("", line).replace("**", "").strip(" *#:")
        if len(text) >= 8:
            return text[:chars] + ("..." if len(text) > chars else "")
    return "(no plan)"


def outcome(s: Solution) -> str:
    """An attempt's result in a few words: its figure where it counts, else why not."""
    if s.status == "no_code":
        return "no usable code"
    if s.duplicate_of:
        return f"same program as {s.duplicate_of}"
    if not s.is_result:
        return "NOT COUNTED (flagged by the screens)"
    if not s.correct:
        return f"FAILED: {', '.join(shown_reasons(s.hard_fail_reasons)[:2]) or s.status}"
    if s.speedup is not None:
        return f"correct, {s.speedup:.3f}x"
    if s.dev_figure is not None:
        return f"correct, dev figure {s.dev_figure:.4g}"
    return "correct, speed not measured"


def table(attempts: list[Solution], rows: int) -> str:
    """Every attempt (newest first, at most `rows`), one line each: id, parent, the plan's first
    line, its outcome. Fix turns show as children of the child they fix."""
    if rows <= 0 or not attempts:
        return ""
    ordered = sorted(attempts, key=lambda s: (s.round, s.id), reverse=True)
    lines = [f"- {s.id} (from {s.parent_id}): {outcome(s)}; plan: {headline(s.plan)}" for s in ordered[:rows]]
    if len(ordered) > rows:
        lines.append(f"- ... and {len(ordered) - rows} older attempt(s)")
    return "\n".join(lines)


def applied_before(population: list[Solution], round_: int, depth: int) -> list[Solution]:
    """The attempts a selection of round `round_` saw: those of the rounds applied when it was made
    (up to round_ - depth); the baseline is the table's starting point, not an attempt."""
    return [s for s in population if 0 < s.round <= round_ - depth]


def in_flight(plans: list[tuple[int, str, str]]) -> str:
    """Plans already being written or graded: (round, parent id, plan), so this round takes
    another direction."""
    out = []
    for k, parent_id, plan in plans:
        text = " ".join(plan.split())
        out.append(f"- round {k} (from {parent_id}): {text[:IN_FLIGHT_CHARS]}"
                   f"{'...' if len(text) > IN_FLIGHT_CHARS else ''}")
    return "\n".join(out)
