"""The screen watches a grading of its own: the official grading never has pesflow's code in it.

The runtime guard and the probes' recorder are code in a grading's own interpreters. A grader
that counts what its process does (callgrind's instructions, bytes allocated, ops) counts them
too (four of the benchmark's callgrind packages read 10-35 % lower with the guard in), and a
timed one times them: the guard's sampled calls ran inside a process-time harness's window and
moved a reference from about 5x to 1.2-4.9x, failing an honest candidate. So the figure that
counts always comes from a grading with nothing of the screen in it, exactly the screen-off
figure, and the guard and the probes watch a second grading of the same candidate, made only
where the first could become a result (correct, faster than its baseline, not deferred).

What a candidate does when watched must match what it did when scored: a second grading that
fails where the first passed, or whose figure falls far below the first's, is for a person to
look at (it may know when it is watched), never a result's figure by itself.
"""

from __future__ import annotations

import re
from typing import Any

from evaluator.trust.findings import WATCHED_DIFFERS

WHY = "the official grading's figure is the grader's alone: the screen watches a grading of its own"
WATCHED = "watched"  # the log folder of the grading the screen watches, inside the official one's
DIAGNOSED = "diagnosed"  # that of one that keeps the calls to explain a failure or profile (never screened)

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


def compare(scored: dict[str, Any], watched: dict[str, Any], tolerance: float, timed: bool = False) -> list[str]:
    """What the watched grading did not reproduce of the scored one, as review reasons.
    Each side: {status, correct, figure, reasons}. Honest code may read lower when watched
    (the guard's own work is counted with it), never higher by a factor past `tolerance`: on a
    count. A time (`timed`) is held to correctness alone: the guard's sampled calls run inside
    the harness's timed window, and moved a process-time package's own reference from 3.19x to
    1.16x when watched (benchmarks/results/official-unwatched-2026-12-07.md); there the probes'
    own re-timing stands for the figure."""
    out = []
    if scored.get("correct") and not watched.get("correct"):
        out.append(f"{WATCHED_DIFFERS}: correct when scored, {watched.get('status')} "
                   f"({', '.join(watched.get('reasons') or []) or 'no reason given'}) when watched")
    a, b = scored.get("figure"), watched.get("figure")
    if not timed and isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0 \
            and a > tolerance * b:
        out.append(f"{WATCHED_DIFFERS}: figure {a:.4g} when scored, {b:.4g} when watched "
                   f"({a / b:.2f}x, past evaluator.trust.watch_tolerance {tolerance:g})")
    return out
