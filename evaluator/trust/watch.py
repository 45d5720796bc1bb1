"""Where the screen watches a grading from: inside the scored grading, or from a second one.

The runtime guard and the probes' recorder are code in the grading's own interpreters. A grader
that counts what its process does (callgrind's instructions, bytes allocated, ops, recompiles)
counts them too: with the guard in, four of the benchmark's callgrind packages read 10-35 %
lower, one of them below its baseline. A grader's figure must be the one it writes with the
screen off, so where the figure is a count the score comes from a grading with nothing of the
screen in it, and the guard and the probes watch a second grading of the same candidate, made
only where the first could become a result (correct). A timed grader's figure moves within its
own spread with the guard in (the guard waits until the candidate's code runs), so one grading
serves both there unless the config asks for two.

What a candidate does when watched must match what it did when scored: a second grading that
fails where the first passed, or whose figure falls far below the first's, is for a person to
look at (it may know when it is watched), never a result's figure by itself.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from evaluator.trust.findings import WATCHED_DIFFERS

Watch = Literal["auto", "apart", "same"]

# A declared metric whose name says time: the figure is a duration (its spread is the grader's).
_TIME_WORDS = ("time", "speedup", "latency", "throughput", "second")
_TIME_UNITS = {"s", "sec", "ms", "us", "ns", "wall"}


def metric_is_timed(metric: str | None) -> bool:
    name = (metric or "").strip().lower()
    return any(w in name for w in _TIME_WORDS) or bool(_TIME_UNITS & set(re.split(r"[^a-z0-9]+", name)))


def figure_kind(metric_kind: str | None, timing_metric: str | None) -> tuple[str, str]:
    """`timed` or `counted`, with why, from the package's own declarations (task.toml's
    primary_metric.metric_kind and verifier.timing_metric). Undeclared is timed: the format's
    graders time ABBA-paired runs. A declaration that names no time is a count."""
    declared = [m for m in (metric_kind, timing_metric) if m and m.strip()]
    if not declared:
        return "timed", "the package declares no metric: the format's figure is a timed ratio"
    counted = [m for m in declared if not metric_is_timed(m)]
    if counted:
        return ("counted",
                f"the package's metric {counted[0]!r} is a count, which code put into its process would change")
    return "timed", f"the package's metric {declared[0]!r} is a time"


def apart(watch: Watch, metric_kind: str | None, timing_metric: str | None) -> tuple[bool, str]:
    """Whether the score and the screen's watch are two gradings, and why."""
    if watch == "apart":
        return True, "evaluator.trust.watch is apart"
    if watch == "same":
        return False, "evaluator.trust.watch is same"
    kind, why = figure_kind(metric_kind, timing_metric)
    return kind == "counted", why


def compare(scored: dict[str, Any], watched: dict[str, Any], tolerance: float) -> list[str]:
    """What the watched grading did not reproduce of the scored one, as review reasons.
    Each side: {status, correct, figure, reasons}. Honest code may read lower when watched
    (the guard's own work is counted with it), never higher by a factor past `tolerance`."""
    out = []
    if scored.get("correct") and not watched.get("correct"):
        out.append(f"{WATCHED_DIFFERS}: correct when scored, {watched.get('status')} "
                   f"({', '.join(watched.get('reasons') or []) or 'no reason given'}) when watched")
    a, b = scored.get("figure"), watched.get("figure")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0 and a > tolerance * b:
        out.append(f"{WATCHED_DIFFERS}: figure {a:.4g} when scored, {b:.4g} when watched "
                   f"({a / b:.2f}x, past evaluator.trust.watch_tolerance {tolerance:g})")
    return out
