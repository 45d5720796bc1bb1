"""The baselines' figures, PNG and PDF, drawn from summary.jsonl lines with matplotlib's Agg canvas.

- best-by-round-<bench>-<dir>: per task, the best speedup found so far after each round, one
  line per method (geometric mean over seeds, the band spanning the seeds); noop and oracle
  are graded once, so they are horizontal reference lines.
- cost-vs-speedup: one point per cell, USD spent against the final speedup (performance
  tasks) or the reward (implementation tasks, a separate panel: never mixed).
No pyplot: its global state is neither needed nor thread-safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from agent.experiments.methods import EVALUATOR_ONLY
from agent.experiments.tables import geomean

MARKERS = "osD^vP*Xh<>"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def _save(fig: Figure, stem: Path) -> list[Path]:
    FigureCanvasAgg(fig)
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("png", "pdf"):
        p = stem.with_name(f"{stem.name}.{ext}")
        # No creation date: the same summary gives the same PDF bytes.
        fig.savefig(p, dpi=150, bbox_inches="tight", metadata={"CreationDate": None} if ext == "pdf" else None)
        out.append(p)
    return out


def method_colours(methods: list[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}


def curves(rows: list[dict[str, Any]]) -> dict[int, tuple[float | None, float | None, float | None]]:
    """round -> (geometric mean, min, max) of the best speedup so far over the seeds."""
    by_round: dict[int, list[float]] = {}
    for r in rows:
        for k, s in r.get("best_by_round") or []:
            if isinstance(k, int) and isinstance(s, (int, float)) and s > 0:
                by_round.setdefault(k, []).append(s)
    return {k: (geomean(v), min(v), max(v)) for k, v in sorted(by_round.items())}


def best_by_round_figure(task: str, rows: list[dict[str, Any]], kinds: dict[str, str], colours: dict[str, str],
                         stem: Path) -> list[Path]:
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot()
    last = max([k for r in rows for k, _ in r.get("best_by_round") or []] + [1])
    values: list[float] = []
    for i, method in enumerate(dict.fromkeys(r["method"] for r in rows)):
        mine = [r for r in rows if r["method"] == method]
        colour = colours.get(method, "#333333")
        if kinds.get(method) in EVALUATOR_ONLY:
            level = geomean([r.get("speedup") for r in mine])
            if level is not None:
                grader = mine[0].get("grader") or "?"
                ax.axhline(level, color=colour, linestyle="--", linewidth=1.2, label=f"{method} ({grader} grader)")
                values.append(level)
            continue
        c = curves(mine)
        if not c:
            continue
        ks = list(c)
        mean = [c[k][0] for k in ks]
        # Methods often share a curve (same answers, same rounds): each later one drawn thinner, on
        # top, with its own marker, so that every one stays visible.
        ax.plot(ks, mean, marker=MARKERS[i % len(MARKERS)], markersize=4.5, color=colour, label=f"{method} (n={len(mine)})",
                drawstyle="steps-post", linewidth=max(1.0, 3.2 - 0.45 * i), zorder=2 + i)
        if len(mine) > 1:
            ax.fill_between(ks, [c[k][1] for k in ks], [c[k][2] for k in ks], color=colour, alpha=0.15, step="post")
        values += [v for k in ks for v in c[k] if v]
    if values and max(values) / max(min(values), 1e-12) > 20:
        ax.set_yscale("log")
    ax.set_xlim(-0.25, max(last, 1) + 0.25)  # a margin: a jump in the last round is drawn on its edge
    ax.set_xticks(range(0, last + 1, max(1, last // 16)))
    ax.set_xlabel("round")
    ax.set_ylabel("best speedup so far (x baseline)")
    ax.set_title(f"{task}: best speedup by round", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _save(fig, stem)


def cost_figure(rows: list[dict[str, Any]], colours: dict[str, str], stem: Path) -> list[Path]:
    classes = [c for c in ("performance", "implementation") if any(r["reward_class"] == c for r in rows)]
    use_usd = any(r.get("usd", 0) > 0 for r in rows)  # an unpriced model: tokens are the cost we know
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig = Figure(figsize=(6.2 * len(classes), 4.4))
    axes = [fig.add_subplot(1, len(classes), i + 1) for i in range(len(classes))]
    for ax, cls in zip(axes, classes):
        mine = [r for r in rows if r["reward_class"] == cls]
        ys_all = []
        for r in mine:
            x = r.get("usd", 0.0) if use_usd else r.get("tokens", 0)
            if cls == "performance":
                y = r.get("speedup") if r["correct"] and isinstance(r.get("speedup"), (int, float)) and r["speedup"] > 0 else 1.0
            else:
                y = r.get("reward", 0.0)
            ys_all.append(y)
            ax.scatter([x], [y], color=colours.get(r["method"], "#333333"), marker=MARKERS[tasks.index(r["task"]) % len(MARKERS)],
                       s=36, alpha=0.85, edgecolors="white" if r["correct"] else "black", linewidths=0.6)
        if cls == "performance" and ys_all and max(ys_all) / max(min(ys_all), 1e-12) > 20:
            ax.set_yscale("log")
        ax.set_xlabel("USD per run" if use_usd else "tokens per run (no priced model)")
        ax.set_ylabel("final speedup (x baseline; failed = 1)" if cls == "performance" else "reward")
        ax.set_title(f"{cls} tasks: cost against result", fontsize=10)
        ax.grid(True, alpha=0.3)
    # One legend for methods (colour) and one for tasks (marker), outside the panels.
    handles = [axes[-1].scatter([], [], color=colours[m], marker="o", label=m) for m in colours if any(r["method"] == m for r in rows)]
    handles += [axes[-1].scatter([], [], color="#777777", marker=MARKERS[i % len(MARKERS)], label=t) for i, t in enumerate(tasks)]
    axes[-1].legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _save(fig, stem)


def write_figures(rows: list[dict[str, Any]], dest: Path, kinds: dict[str, str]) -> list[Path]:
    colours = method_colours(list(kinds))
    written: list[Path] = []
    for task in dict.fromkeys(r["task"] for r in rows):
        written += best_by_round_figure(task, [r for r in rows if r["task"] == task], kinds, colours,
                                        dest / f"best-by-round-{task.replace('/', '-')}")
    written += cost_figure(rows, colours, dest / "cost-vs-speedup")
    return written
