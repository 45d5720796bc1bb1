"""The baselines' figures, PNG and PDF, drawn from summary.jsonl lines with matplotlib's Agg canvas.

- best-by-round-<bench>-<dir>: per task, the best speedup found so far after each round, one
  line per method (geometric mean over seeds, the band spanning the seeds); noop and oracle
  are graded once, so they are horizontal reference lines. A round whose best has no speedup
  (its dev engine scores the baseline 0, so nothing divides its figure into one) is drawn from
  the dev engine's own figure by one rule (`dev_scale`): a `vs_oracle` figure over the oracle's
  own (an oracle cell graded by the dev engine) times the oracle's speedup over the baseline (an
  oracle cell graded by the hidden grader) is the candidate's speedup over the baseline, drawn
  dash-dotted and named in the legend; any other figure, or a matrix without both oracle cells,
  goes on a right-hand axis named by its kind. Never an empty plot.
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


def curves(rows: list[dict[str, Any]], key: str = "best_by_round", factor: float = 1.0,
           ) -> dict[int, tuple[float | None, float | None, float | None]]:
    """round -> (geometric mean, min, max) of the best speedup so far over the seeds (`key`
    dev_by_round: the dev figure, times `factor`)."""
    by_round: dict[int, list[float]] = {}
    for r in rows:
        for k, s, *_ in r.get(key) or []:
            if isinstance(k, int) and isinstance(s, (int, float)) and s > 0:
                by_round.setdefault(k, []).append(s * factor)
    return {k: (geomean(v), min(v), max(v)) for k, v in sorted(by_round.items())}


def dev_scale(rows: list[dict[str, Any]], oracle: float | None, oracle_dev: float | None) -> tuple[float, str] | None:
    """How the dev figures of a method's rows become speedups over the baseline: (factor, label), or
    None when they stay on the dev axis. A `vs_oracle` figure is a reference time (a constant the
    package's author measured, elsewhere) over the candidate's time here; two of them divide into
    the candidate's time over the oracle's here, so the candidate's figure over the oracle's own dev
    figure (an oracle cell graded by the dev engine) times the oracle's speedup over the baseline
    (an oracle cell graded by the hidden grader; the format's anchor is that speedup) is the
    candidate's speedup over the baseline. One kind only, both oracle figures measured."""
    kinds = {kind for r in rows for _, _, kind in r.get("dev_by_round") or []}
    if kinds == {"vs_oracle"} and oracle and oracle_dev:
        return oracle / oracle_dev, f"dev vs_oracle / oracle's {oracle_dev:.3g} x oracle {oracle:.3g}x"
    return None


def _dev_kind(rows: list[dict[str, Any]]) -> str:
    kinds = sorted({str(kind) for r in rows for _, _, kind in r.get("dev_by_round") or []})
    return ", ".join(kinds) or "dev figure"


def best_by_round_figure(task: str, rows: list[dict[str, Any]], kinds: dict[str, str], colours: dict[str, str],
                         stem: Path) -> list[Path]:
    return _save(best_by_round_plot(task, rows, kinds, colours), stem)


def best_by_round_plot(task: str, rows: list[dict[str, Any]], kinds: dict[str, str], colours: dict[str, str]) -> Figure:
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot()
    last = max([k for r in rows for k, *_ in r.get("best_by_round") or []] + [1])
    values: list[float] = []
    oracles = [r for r in rows if kinds.get(r["method"]) == "oracle" and r.get("correct")]
    oracle = geomean([r.get("speedup") for r in oracles if r.get("speedup")]) if oracles else None
    oracle_devs = [v for r in oracles for _, v, kind in r.get("dev_by_round") or [] if kind == "vs_oracle"]
    oracle_dev = geomean(oracle_devs) if oracle_devs else None  # the oracle's own vs_oracle, measured here
    dev_ax = None  # the right-hand axis, made when a figure cannot be put on the speedup scale
    dev_kinds: list[str] = []
    dev_lines: list[tuple[str, str, float | None]] = []  # evaluator-only cells' dev figures: reference lines there
    for i, method in enumerate(dict.fromkeys(r["method"] for r in rows)):
        mine = [r for r in rows if r["method"] == method]
        colour = colours.get(method, "#333333")
        if kinds.get(method) in EVALUATOR_ONLY:
            devs = [v for r in mine for _, v, _ in r.get("dev_by_round") or []]
            if devs and not any(r.get("speedup") for r in mine):  # graded by a dev engine that gave no speedup
                dev_lines.append((method, colour, geomean(devs)))
                continue
            level = geomean([r.get("speedup") for r in mine])
            if level is not None:
                grader = mine[0].get("grader") or "?"
                ax.axhline(level, color=colour, linestyle="--", linewidth=1.2, label=f"{method} ({grader} grader)")
                values.append(level)
            continue
        c, where, style, label = curves(mine), ax, "-", f"{method} (n={len(mine)})"
        if not c and any(r.get("dev_by_round") for r in mine):
            scale = dev_scale(mine, oracle, oracle_dev)
            if scale is not None:
                c, style, label = curves(mine, "dev_by_round", scale[0]), "-.", f"{label}, {scale[1]}"
            else:
                dev_ax = dev_ax or ax.twinx()
                c, where, style, label = curves(mine, "dev_by_round"), dev_ax, ":", f"{label}, right axis"
                dev_kinds.append(_dev_kind(mine))
        if not c:
            continue
        ks = list(c)
        mean = [c[k][0] for k in ks]
        # Methods often share a curve (same answers, same rounds): each later one drawn thinner, on
        # top, with its own marker, so that every one stays visible.
        where.plot(ks, mean, marker=MARKERS[i % len(MARKERS)], markersize=4.5, color=colour, label=label,
                   linestyle=style, drawstyle="steps-post", linewidth=max(1.0, 3.2 - 0.45 * i), zorder=2 + i)
        if len(mine) > 1:
            where.fill_between(ks, [c[k][1] for k in ks], [c[k][2] for k in ks], color=colour, alpha=0.15, step="post")
        if where is ax:
            values += [v for k in ks for v in c[k] if v]
    if values and max(values) / max(min(values), 1e-12) > 20:
        ax.set_yscale("log")
    ax.set_xlim(-0.25, max(last, 1) + 0.25)  # a margin: a jump in the last round is drawn on its edge
    ax.set_xticks(range(0, last + 1, max(1, last // 16)))
    ax.set_xlabel("round")
    ax.set_ylabel("best speedup so far (x baseline)")
    ax.set_title(f"{task}: best speedup by round", fontsize=10)
    ax.grid(True, alpha=0.3)
    if dev_ax is not None:
        for method, colour, level in dev_lines:
            if level:
                dev_ax.axhline(level, color=colour, linestyle=":", linewidth=1.2,
                               label=f"{method} (dev grader), right axis")
    handles, labels = ax.get_legend_handles_labels()
    if dev_ax is not None:
        dev_ax.set_ylabel(f"dev engine's own figure: {', '.join(dict.fromkeys(dev_kinds))} (higher is better)",
                          fontsize=8)
        more = dev_ax.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    if not handles:  # nothing graded counts yet: say so on the canvas rather than leave it blank
        ax.text(0.5, 0.5, "no round's best has a figure yet", transform=ax.transAxes, ha="center", va="center",
                fontsize=9)
    else:
        ax.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.12 if dev_ax else 1.01, 0.5),
                  frameon=False)
    return fig


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
                y = (r.get("speedup") if r["correct"] and isinstance(r.get("speedup"), (int, float))
                     and r["speedup"] > 0 else 1.0)
            else:
                y = r.get("reward", 0.0)
            ys_all.append(y)
            ax.scatter([x], [y], color=colours.get(r["method"], "#333333"),
                       marker=MARKERS[tasks.index(r["task"]) % len(MARKERS)], s=36, alpha=0.85,
                       edgecolors="white" if r["correct"] else "black", linewidths=0.6)
        if cls == "performance" and ys_all and max(ys_all) / max(min(ys_all), 1e-12) > 20:
            ax.set_yscale("log")
        ax.set_xlabel("USD per run" if use_usd else "tokens per run (no priced model)")
        ax.set_ylabel("final speedup (x baseline; failed = 1)" if cls == "performance" else "reward")
        ax.set_title(f"{cls} tasks: cost against result", fontsize=10)
        ax.grid(True, alpha=0.3)
    # One legend for methods (colour) and one for tasks (marker), outside the panels.
    handles = [axes[-1].scatter([], [], color=colours[m], marker="o", label=m)
               for m in colours if any(r["method"] == m for r in rows)]
    handles += [axes[-1].scatter([], [], color="#777777", marker=MARKERS[i % len(MARKERS)], label=t)
                for i, t in enumerate(tasks)]
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
