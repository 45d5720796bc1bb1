"""The tables of a baselines matrix: per method, over cells (mean ± sd of the reward, geometric
mean of the speedup, ...), per task and per reward class, as Markdown, CSV and LaTeX. A cell whose
final grading does not count (`counted` false: a suspect, one awaiting review, one a person
rejected; evaluator.trust's is_result) is in no aggregate; its row names it, with a dagger (and
one that counts but awaits a person's review, with a double dagger)."""

from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path
from typing import Any, Callable

from agent.rundir.store import atomic_write



def geomean(xs: list[Any]) -> float | None:
    """Of the positive numbers among xs (None and anything else left out); None when there are none."""
    xs = [x for x in xs if isinstance(x, (int, float)) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def effective_speedup(r: dict[str, Any]) -> float | None:
    """1.0 for a failed cell (the unchanged code is what ships); None where the task reports none."""
    if not r["correct"]:
        return 1.0 if r["reward_class"] == "performance" else None
    s = r.get("speedup")
    return s if isinstance(s, (int, float)) and s > 0 else None


def counted(r: dict[str, Any]) -> bool:
    """May this cell's figures enter an aggregate? (summary lines from before trust: yes)"""
    return r.get("counted", True) is not False


def awaiting(r: dict[str, Any]) -> bool:
    """A counted cell whose final grading still awaits a person's review (the readers flag it)."""
    t = r.get("trust") or {}
    return counted(r) and bool(t.get("needs_review")) and not t.get("review")


def flag(r: dict[str, Any], per_task: bool) -> str:
    """How a flagged cell is named: † left out, ‡ counted but awaiting review; the seed (and task)
    and the families."""
    t = r.get("trust") or {}
    where = f"{'' if per_task else r['task'] + ' '}seed {r['seed']}"
    if counted(r):
        return f"‡ {where}: awaiting review"
    why = ", ".join(t.get("families") or []) or ("rejected by a person"
                                                 if (t.get("review") or {}).get("decision") == "reject"
                                                 else "not counted")
    return f"† {where}: {why}"


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the cells given (the counted ones: method_table leaves the others out); None where none."""
    if not rows:
        return {"tasks": 0, "n": 0, **{k: None for k, *_ in COLUMNS if k not in ("method", "tasks", "n", "flagged")}}
    rewards = [r["reward"] for r in rows]
    mean = statistics.fmean(rewards)
    return {
        "tasks": len({r["task"] for r in rows}), "n": len(rows),
        "reward_mean": mean, "reward_sd": statistics.stdev(rewards) if len(rewards) > 1 else 0.0,
        "reward_min": min(rewards), "reward_max": max(rewards),
        "speedup_geomean": geomean([s for r in rows if (s := effective_speedup(r)) is not None]),
        "correct_share": sum(1 for r in rows if r["correct"]) / len(rows),
        "usd_mean": statistics.fmean(r["usd"] for r in rows),
        "tokens_mean": statistics.fmean(r["tokens"] for r in rows),
        "hidden_scorings_mean": statistics.fmean(r["scorings"]["hidden"] for r in rows),
        "over_budget": sum(1 for r in rows if r["over_budget"]),
        "feedback": ", ".join(sorted({str(r["feedback"]) for r in rows if r.get("feedback")})) or None,
        "dev_over_cap": sum(1 for r in rows if r.get("dev_over_cap")),
        "wall_seconds_mean": statistics.fmean(float(r["wall_seconds"] or 0) for r in rows),
    }


def grouped(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def method_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One aggregated row per method, in the order methods first appear, over its counted cells;
    `left_out` holds the others, `flagged` those and the counted ones awaiting review."""
    return [{"method": m, **aggregate([r for r in rs if counted(r)]), "left_out": [r for r in rs if not counted(r)],
             "flagged": [r for r in rs if not counted(r) or awaiting(r)]}
            for m, rs in grouped(rows, lambda r: r["method"]).items()]


def _dash(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    return lambda v: "-" if v is None else fmt(v)


# (key, CSV header, Markdown/LaTeX header, formatter for people)
COLUMNS: list[tuple[str, str, str, Callable[[Any], str]]] = [
    ("method", "method", "method", str),
    ("feedback", "feedback", "feedback", _dash(str)),
    ("tasks", "tasks", "tasks", str),
    ("n", "n", "n", str),
    ("reward_mean", "reward_mean", "reward (mean ± sd)", _dash(lambda v: f"{v:.3f}")),
    ("reward_sd", "reward_sd", "", _dash(lambda v: f"{v:.3f}")),
    ("reward_min", "reward_min", "", _dash(lambda v: f"{v:.3f}")),
    ("reward_max", "reward_max", "", _dash(lambda v: f"{v:.3f}")),
    ("speedup_geomean", "speedup_geomean", "speedup (geomean)", _dash(lambda v: f"{v:.3f}x")),
    ("correct_share", "correct_share", "correct", _dash(lambda v: f"{100 * v:.0f}%")),
    ("usd_mean", "usd_mean", "USD (mean)", _dash(lambda v: f"{v:.4f}")),
    ("tokens_mean", "tokens_mean", "tokens (mean)", _dash(lambda v: f"{v:.0f}")),
    ("hidden_scorings_mean", "hidden_scorings_mean", "hidden scorings (mean)", _dash(lambda v: f"{v:.2f}")),
    ("over_budget", "over_budget", "over budget", _dash(str)),
    ("dev_over_cap", "dev_over_cap", "dev over loop cap", _dash(str)),
    ("wall_seconds_mean", "wall_seconds_mean", "wall s (mean)", _dash(lambda v: f"{v:.1f}")),
    ("flagged", "flagged", "flagged", str),  # formatted by _people_cells and to_csv (it needs the rows)
]
NOTE = ("reward: mean ± sample sd over cells; speedup: geometric mean, a cell whose final candidate is not correct "
        "counted as 1x; correct: share of cells whose final candidate passed every correctness gate; "
        "feedback: what the model was shown of each grading (search.feedback; benchmark: "
        "the package's own loop's lines, comparable with other agents' numbers); "
        "hidden scorings: gradings spent against the task's submission budget (over budget: cells that spent more); "
        "dev over loop cap: cells whose dev gradings outnumbered the submissions the "
        "package's own loop allows a solver; flagged: † cells whose final grading does not count (a suspect, or "
        "rejected by a person), in no figure of the row, named with the trust families; ‡ cells that count but await a "
        "person's review (pesflow review).")


def _people_cells(row: dict[str, Any], per_task: bool) -> list[str]:
    out = []
    for key, _, head, fmt in COLUMNS:
        if not head or (per_task and key == "tasks"):
            continue
        if key == "flagged":
            out.append("; ".join(flag(r, per_task) for r in row.get("flagged") or []) or "-")
        elif key == "reward_mean":
            out.append(f"{fmt(row['reward_mean'])} ± {fmt(row['reward_sd'])}" if row["reward_mean"] is not None
                       else "-")
        else:
            out.append(fmt(row[key]))
    return out


def _people_headers(per_task: bool) -> list[str]:
    return [h for k, _, h, _ in COLUMNS if h and not (per_task and k == "tasks")]


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c[1] for c in COLUMNS])
    for r in rows:
        r = {**r, "flagged": "; ".join(flag(x, False) for x in r.get("flagged") or [])}
        # 12 significant digits: exact enough to recompute from, without float noise like 1001.2500000000003
        w.writerow(["" if r[k] is None else (f"{r[k]:.12g}" if isinstance(r[k], float) else r[k]) for k, *_ in COLUMNS])
    return buf.getvalue()


def to_markdown(title: str, rows: list[dict[str, Any]], per_task: bool) -> str:
    heads = _people_headers(per_task)
    lines = [f"### {title}", "", "| " + " | ".join(heads) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(heads))) + "|"]
    lines += ["| " + " | ".join(_people_cells(r, per_task)) + " |" for r in rows]
    return "\n".join(lines + ["", f"_{NOTE}_", ""])


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "†": r"\textdagger{}"}


def tex_escape(s: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in s).replace("±", r"$\pm$")


def to_latex(title: str, rows: list[dict[str, Any]], per_task: bool) -> str:
    heads = _people_headers(per_task)
    body = []
    for r in rows:
        cells = [tex_escape(c) for c in _people_cells(r, per_task)]
        body.append(" & ".join(cells) + r" \\")
    return "\n".join([
        "% pesflow baselines table (needs \\usepackage{booktabs})",
        r"\begin{table}[t]", r"\centering", r"\small",
        r"\begin{tabular}{l" + "r" * (len(heads) - 1) + "}", r"\toprule",
        " & ".join(tex_escape(h) for h in heads) + r" \\", r"\midrule",
        *body, r"\bottomrule", r"\end{tabular}",
        r"\caption{" + tex_escape(title) + ". " + tex_escape(NOTE) + "}", r"\end{table}", "",
    ])


def slug(task: str) -> str:
    return task.replace("/", "-")


def write_tables(rows: list[dict[str, Any]], dest: Path) -> list[Path]:
    """Per task and per reward class, in Markdown, CSV and LaTeX; tables/all.md holds them all."""

    written: list[Path] = []
    sections = ["# Baselines", ""]

    def emit(stem: str, title: str, table: list[dict[str, Any]], per_task: bool) -> None:
        for ext, text in (("md", to_markdown(title, table, per_task)), ("csv", to_csv(table)),
                          ("tex", to_latex(title, table, per_task))):
            atomic_write(dest / f"{stem}.{ext}", text)
            written.append(dest / f"{stem}.{ext}")
        sections.append(to_markdown(title, table, per_task))

    by_class = grouped(rows, lambda r: r["reward_class"])
    for cls in ("performance", "implementation"):
        if cls in by_class:
            n_tasks = len({r["task"] for r in by_class[cls]})
            recreated = sorted({r["task"] for r in by_class[cls] if not r.get("official")})
            mark = (f"; not official packages (pesflow re-creations or modified): {', '.join(recreated)}" if recreated
                    else "")
            emit(cls, f"{cls.capitalize()} tasks ({n_tasks}), all seeds{mark}", method_table(by_class[cls]),
                 per_task=False)
    for task, rs in grouped(rows, lambda r: r["task"]).items():
        which = "official benchmark package" if rs[0].get("official") else "NOT the official package"
        emit(f"task-{slug(task)}", f"{task} ({rs[0]['reward_class']}), {which}", method_table(rs), per_task=True)
    atomic_write(dest / "all.md", "\n".join(sections))
    written.append(dest / "all.md")
    return written


