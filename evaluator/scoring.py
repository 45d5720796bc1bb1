"""One meaning for a verdict's figures, whatever grader wrote them.

`speedup` is always the candidate over the frozen baseline and `reward` always the benchmark's
formula with the package's anchor (binary for implementation tasks). The hidden grader writes
both. A dev engine writes its own figure under names that mean different things from package
to package: raw speedup over the baseline, `reward` equal to that speedup, the reference's time
over the candidate's (vs_oracle), 0.5 + 0.5 * vs_oracle, an absolute proxy (GB/s, req/s). Its
figure is kept raw, with its kind, under `dev`; the kind is read off the unchanged code's own
figure (the dev engine's noop): a figure the baseline scores about 1 on is over the baseline,
any other is turned into one by dividing by the baseline's.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

NOOP_BAND = (0.8, 1.25)  # the baseline's own figure, within noise of 1: the engine reports vs the baseline


class DevFigure(BaseModel):
    kind: str  # vs_baseline | vs_oracle | absolute:<the engine's dev_metric> | unknown
    key: str  # the dev engine's key it was read from: speedup, dev_score, reward
    value: float  # as the dev engine wrote it
    baseline: float | None = None  # the same figure for the unchanged code (the dev engine's noop)
    # the engine's reward.json `reward` and `speedup` as written (0.0 where absent), what the
    # package's submit.sh keeps in /logs/loop/best.json: never pesflow's anchored reward, which
    # would hand a solver a figure of the anchor. Here (journaled) since a verdict's `raw` is not:
    # a resume rebuilds the loop's best from them. None: a journal from before they were kept.
    engine_reward: float | None = None
    engine_speedup: float | None = None


def finite_number(v: Any) -> float | None:
    """v as a finite float, else None (a grader's field may be anything)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def dev_value(raw: dict[str, Any]) -> tuple[str, float] | None:
    """The dev engine's figure and its key: `speedup`, else `dev_score`, else `reward`."""
    for key in ("speedup", "dev_score", "reward"):
        v = finite_number(raw.get(key))
        if v is not None:
            return key, v
    return None


def dev_figure(raw: dict[str, Any], baseline_raw: dict[str, Any] | None) -> DevFigure | None:
    got = dev_value(raw)
    if got is None:
        return None
    key, value = got
    own = {"engine_reward": loop_number(raw.get("reward")), "engine_speedup": loop_number(raw.get("speedup"))}
    base = dev_value(baseline_raw)[1] if baseline_raw and dev_value(baseline_raw) else None
    if base is None:
        return DevFigure(kind="unknown", key=key, value=value, **own)
    if NOOP_BAND[0] <= base <= NOOP_BAND[1]:
        kind = "vs_baseline"
    elif raw.get("dev_metric"):
        kind = f"absolute:{str(raw['dev_metric'])[:60]}"
    else:
        kind = "vs_oracle"
    return DevFigure(kind=kind, key=key, value=value, baseline=base, **own)


def loop_number(v: Any) -> float:
    """A reward.json field as submit.sh reads it, `float(x or 0.0)`: 0.0 where absent (or not a
    finite number, where submit.sh would keep nothing better)."""
    return finite_number(v or 0.0) or 0.0


def loop_figures(fig: DevFigure | None) -> tuple[float, float]:
    """(reward, speedup) of a dev grading as the package's loop keeps them in best.json: the engine's
    own. No figure at all: reward.json held neither, 0.0 each (as submit.sh). A journal from before
    they were kept: the engine's one figure under its own key, 0.0 for the other; never anything
    computed with the anchor."""
    if fig is None:
        return 0.0, 0.0
    if fig.engine_reward is not None and fig.engine_speedup is not None:
        return fig.engine_reward, fig.engine_speedup
    return (fig.value if fig.key == "reward" else 0.0), (fig.value if fig.key == "speedup" else 0.0)


def speedup_from_dev(fig: DevFigure) -> float | None:
    """The candidate over the baseline: the figure itself when the engine reports that, else the
    figure over the baseline's own (higher is better for every dev figure of the benchmark)."""
    if fig.kind == "vs_baseline":
        return fig.value
    if fig.baseline and fig.baseline > 0 and fig.kind != "unknown":
        return round(fig.value / fig.baseline, 6)
    return None


def benchmark_reward(speedup: float | None, anchor: float | None, correct: bool, implementation: bool) -> float:
    """The benchmark's reward: 0 if speedup <= anchor, else min(1, ln(speedup/anchor)/ln(anchor));
    any hard gate, a speedup <= 1 or an anchor <= 1 scores 0. Implementation tasks: 1 iff correct."""
    if not correct:
        return 0.0
    if implementation:
        return 1.0
    if speedup is None or anchor is None or speedup <= 1.0 or anchor <= 1.0 or speedup <= anchor:
        return 0.0
    return max(0.0, min(1.0, math.log(speedup / anchor) / math.log(anchor)))
