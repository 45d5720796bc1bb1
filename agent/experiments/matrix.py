"""`pesflow baselines`: methods x tasks x seeds, each cell a run directory, into a paper's tables.

    OUT/
      cells/<bench>/<dir>/<method>/seed-<s>/   one run directory per cell (agent/run_store.py layout)
      summary.jsonl                            one line per finished cell, in matrix order
      tables/task-<bench>-<dir>.{md,csv,tex}   per task: one row per method, over the seeds
      tables/<reward class>.{md,csv,tex}       per reward class (performance, implementation): over tasks and seeds
      tables/all.md                            every table above, for reading
      figures/                                 agent/figures.py

Methods (configs/baselines.yaml documents the file):
- noop, oracle: the evaluator alone grades the unchanged code or the reviewer's solution, and
  the cell is recorded as a one-candidate run (same files as a search writes).
- single_shot (1 round, 1 child), best_of_n (1 round, n children): no planner, no summarizer.
- loop: the full search; its ablations no_summarizer, uniform_parent (exploration_ratio 1),
  one_island, whole_file (executors write whole files only).
A cell whose run.json says finished is never run again; an unfinished one is deleted and run
again from scratch, so the matrix resumes where it stopped.

Aggregates, why they are what they are:
- A cell whose final candidate is not correct counts as speedup 1.0 in the geometric mean:
  what one would ship after a failed search is the unchanged code, and a method must not look
  faster by failing more often. The share correct is reported beside it.
- Performance and implementation tasks are never averaged together: their rewards mean
  different things (a speedup over an anchor; passing a specification).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent.config import Config, ConfigError
from agent.run_store import RunStore
from evaluator.verdict import SPEED_ONLY_GATES  # one definition of what "correct" forgives

FINISHED = ("finished", "budget_exhausted")  # a run that ended cleanly: never run again
EVALUATOR_ONLY = ("noop", "oracle")
MethodKind = Literal["noop", "oracle", "single_shot", "best_of_n", "loop", "no_summarizer", "uniform_parent",
                     "one_island", "whole_file"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # method names become folder names


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Method(_Strict):
    kind: MethodKind
    n: int | None = Field(None, ge=1, le=32)  # best_of_n: how many independent answers
    rounds: int | None = Field(None, ge=1, le=1000)  # loop and its ablations; default: the config's loop.rounds
    grader: Literal["dev", "hidden"] = "hidden"  # noop, oracle: the grader that scores them
    set: dict[str, Any] = Field(default_factory=dict)  # config overrides for this method only (default.yaml keys)

    @model_validator(mode="after")
    def _fits_kind(self) -> Method:
        if self.kind == "best_of_n" and self.n is None:
            raise ValueError("kind best_of_n needs n (how many answers), e.g. n: 8")
        if self.kind != "best_of_n" and self.n is not None:
            raise ValueError(f"n is only for kind best_of_n, not {self.kind}; remove it")
        if self.rounds is not None and self.kind in (*EVALUATOR_ONLY, "single_shot", "best_of_n"):
            raise ValueError(f"rounds is only for the loop and its ablations, not {self.kind} (one round by definition)")
        return self

    @property
    def uses_llm(self) -> bool:
        return self.kind not in EVALUATOR_ONLY


class BaselinesConfig(_Strict):
    out: str = "baselines"
    tasks: list[str] = Field(min_length=1)
    tasks_roots: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    llm: dict[str, Any] = Field(default_factory=dict)  # the llm section of default.yaml, for every LLM method
    config: dict[str, Any] = Field(default_factory=dict)  # default.yaml overrides for every cell
    methods: dict[str, Method] = Field(min_length=1)

    @field_validator("methods")
    @classmethod
    def _names(cls, v: dict[str, Method]) -> dict[str, Method]:
        bad = [k for k in v if not _NAME.match(k)]
        if bad:
            raise ValueError(f"method name {bad[0]!r} must be letters, digits, '.', '_' or '-' (it names a folder)")
        return v

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds {v} repeat a value; list each once")
        return v


def _one_line(e: ValidationError, where: str) -> str:
    err = e.errors()[0]
    key = ".".join(str(x) for x in err["loc"])
    got = f" (got {err['input']!r})" if err["type"] not in ("missing",) and not isinstance(err["input"], dict) else ""
    return f"{where}: key {key}: {err['msg']}{got}; see configs/baselines.yaml"


def load_baselines(path: str | Path) -> BaselinesConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise ConfigError(f"baselines config {path}: cannot be read ({e.strerror}); check the path") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"baselines config {path}: not valid YAML ({str(e).splitlines()[0]}); fix the file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"baselines config {path}: must be a mapping (tasks, seeds, methods...); see configs/baselines.yaml")
    try:
        return BaselinesConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_one_line(e, f"baselines config {path}")) from None


# ---------------------------------------------------------------- cells and their configs


def kind_overrides(m: Method) -> dict[str, Any]:
    """The config a method's kind means, as default.yaml keys."""
    no_roles = {"use_planner": False, "use_summarizer": False}
    loop: dict[str, Any] = {"rounds": m.rounds} if m.rounds else {}
    return {
        "noop": {}, "oracle": {},
        "single_shot": {"loop": {"rounds": 1, "children": 1, **no_roles}},
        "best_of_n": {"loop": {"rounds": 1, "children": m.n, **no_roles}},
        "loop": {"loop": loop},
        "no_summarizer": {"loop": {**loop, "use_summarizer": False}},
        "uniform_parent": {"loop": loop, "population": {"exploration_ratio": 1.0, "exploitation_ratio": 0.0}},
        "one_island": {"loop": loop, "population": {"islands": 1}},
        "whole_file": {"loop": {**loop, "edit_format": "whole_file"}},
    }[m.kind]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def cell_config(base: Config, bc: BaselinesConfig, name: str, seed: int, cells_root: Path) -> Config:
    """default.yaml (+ --config/--set) <- the file's config <- its llm <- the kind <- the method's set <- the cell."""
    m = bc.methods[name]
    data = _merge(base.model_dump(), bc.config)
    data = _merge(data, {"llm": bc.llm})
    data = _merge(data, kind_overrides(m))
    data = _merge(data, m.set)
    data = _merge(data, {"loop": {"seed": seed}, "run": {"out": str(cells_root), "quiet": True}})
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_one_line(e, f"baselines method {name}")) from None


@dataclass(frozen=True)
class Cell:
    task: str
    method: str
    seed: int

    @property
    def rel(self) -> str:
        return f"cells/{self.task}/{self.method}/seed-{self.seed}"


def matrix(bc: BaselinesConfig) -> list[Cell]:
    return [Cell(t, m, s) for t in bc.tasks for m in bc.methods for s in bc.seeds]


def run_status(d: Path) -> str | None:
    try:
        return json.loads((d / "run.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def is_finished(d: Path) -> bool:
    return run_status(d) in FINISHED


# ---------------------------------------------------------------- running one cell


def run_evaluator_cell(cfg: Config, task: Any, kind: str, grader: str, roots: list[str], d: Path) -> None:
    """noop or oracle: one grading, recorded as a one-candidate run (run.json, journal, checkpoint, final/)."""
    from agent.population import Population, PopulationConfig, write_dir_atomically
    from agent.search import Search, files_hash, run_metadata
    from evaluator.candidate import Candidate, CandidateError, apply_diff
    from evaluator.grader import Evaluator

    t0 = time.monotonic()
    store = RunStore(d)
    store.update_run(**{**run_metadata(cfg, task, d.name), "grader": grader,
                        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "status": "running"})
    store.journal.append("run_start", run_id=d.name, task=task.name, seed=cfg.loop.seed, grader=grader, models={}, method=kind)
    ev = Evaluator(cfg.evaluator, tasks_roots=roots, log_root=d / "evaluations")
    try:
        prepared = ev.prepare(task)
        baseline = {rel: ev.backend.baseline_text(prepared, rel) or "" for rel in task.scope}
        files, note = dict(baseline), "The unchanged baseline, graded alone."
        if kind == "oracle":  # the reviewer's files, for the record (the grader applies the patch itself)
            artifact = task.reviewer_artifact("oracle")
            note = f"The reviewer's solution ({artifact.name if artifact else 'none shipped'}), graded alone."
            try:
                if artifact is not None and artifact.suffix == ".patch":
                    after = apply_diff(artifact.read_text(), dict(baseline))
                    files.update({rel: text for rel, text in after.items() if text is not None and rel in baseline})
                elif artifact is not None and len(task.scope) == 1:
                    files[task.scope[0]] = artifact.read_text()
            except CandidateError as e:
                note += f" (its files could not be reconstructed here: {e})"
        h = files_hash(files)
        v = ev.evaluate(task, mode=kind, grader=grader, out_dir=store.evaluation_dir(h, kind))  # type: ignore[arg-type]
    finally:
        ev.close()
    verdict = v.model_dump(mode="json", exclude={"raw"})
    store.journal.append("verdict", content_hash=h, label=kind, grader=grader, verdict=verdict)
    sol = Search.solution_from(v, id=kind, parent_id=None, island=0, round=0, files=files, content_hash=h, lessons=note)
    pop = Population(PopulationConfig(islands=1), baseline)
    pop.add(sol)
    store.journal.append("candidate", id=kind, round=0, parent_id=None, content_hash=h, status=sol.status)
    scorings = {"dev": int(grader == "dev"), "hidden": int(grader == "hidden")}
    totals = {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0, "evaluations": 1,
              "scorings": {**scorings, "task_budget": task.max_submissions,
                           "hidden_over_budget": scorings["hidden"] > task.max_submissions},
              "grading_seconds": v.seconds, "elapsed_seconds": round(time.monotonic() - t0, 3)}
    best_by_round = [{"round": 0, "best_id": kind, "speedup": v.speedup}]
    state = {"round": 0, "next_round": 1, "population": pop.to_dict(), "memory": [], "best_by_round": best_by_round,
             "totals": totals}
    files_out = pop.loongflow_files(iteration=0, extra_metadata={"task": task.name, "pesflow_round": 0})
    write_dir_atomically(store.checkpoint_dir(0), {**files_out, "pesflow_state.json": state})
    store.write("final/candidate.patch", Candidate(files=files).diff(baseline))
    store.write_json("final/verdict.json" if grader == "dev" else "final/hidden_verdict.json", verdict)
    best = {"id": kind, "speedup": v.speedup, "reward": v.reward, "grader": grader, "status": v.status.value,
            "hard_fail_reasons": v.hard_fail_reasons}
    store.journal.append("final", stop="evaluated", best=best)
    store.update_run(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"), totals=totals, rounds_done=0,
                     best_by_round=best_by_round, status="finished", best=best)
    store.journal.append("run_end", status="finished")


def run_cell(base: Config, bc: BaselinesConfig, cell: Cell, out: Path, roots: list[str], console: Console) -> None:
    from agent.runner import start_run
    from evaluator.task import load_task

    d = out / cell.rel
    if d.exists():  # unfinished: a separate issue adds real resume; until then, from scratch
        shutil.rmtree(d)
    m = bc.methods[cell.method]
    cfg = cell_config(base, bc, cell.method, cell.seed, out / "cells")
    t0 = time.monotonic()
    if m.kind in EVALUATOR_ONLY:
        run_evaluator_cell(cfg, load_task(cell.task, roots, cfg.benchmark.url), m.kind, m.grader, roots, d)
    else:
        start_run(cfg, cell.task, roots, console=console, run_dir=d)
    RunStore(d).update_run(baseline={"task": cell.task, "method": cell.method, "kind": m.kind, "seed": cell.seed,
                                     "wall_seconds": round(time.monotonic() - t0, 3)})


# ---------------------------------------------------------------- summary lines


def is_correct(best: dict[str, Any]) -> bool:
    """The final candidate passed every gate but the speed-only ones (as the search counts it)."""
    if not best or best.get("id") is None:
        return False
    status = best.get("status", "ok")
    reasons = [r for r in best.get("hard_fail_reasons") or [] if r not in SPEED_ONLY_GATES]
    return status in ("ok", "hard_fail") and not reasons


def _last_population(d: Path) -> list[dict[str, Any]]:
    for cp in sorted(d.glob("checkpoints/round-*"), reverse=True):
        try:
            return json.loads((cp / "pesflow_state.json").read_text())["population"]["solutions"]
        except (OSError, ValueError, KeyError):
            continue
    return []


def cell_line(d: Path, cell: Cell, kind: str, reward_class: str, out: Path) -> dict[str, Any]:
    """One summary.jsonl line, read from a finished cell's run directory alone."""
    run = json.loads((d / "run.json").read_text())
    best = run.get("best") or {}
    totals = run.get("totals") or {}
    sc = totals.get("scorings") or {}
    pop = _last_population(d)
    correct = is_correct(best)
    hidden = int(sc.get("hidden", 0))
    budget = sc.get("task_budget", (run.get("task") or {}).get("max_submissions"))
    tin, tout = int(totals.get("input_tokens", 0)), int(totals.get("output_tokens", 0))
    wall = (run.get("baseline") or {}).get("wall_seconds", totals.get("elapsed_seconds"))
    source = (run.get("task") or {}).get("source") or {}
    return {
        "task": cell.task, "reward_class": reward_class, "method": cell.method, "kind": kind, "seed": cell.seed,
        "official": source.get("official"), "package_commit": source.get("commit"),
        "status": run.get("status"), "reward": float(best.get("reward") or 0.0), "speedup": best.get("speedup"),
        "correct": correct, "hard_fails": list(best.get("hard_fail_reasons") or []), "best_id": best.get("id"),
        "grader": best.get("grader") or run.get("grader"), "search_grader": run.get("grader"),
        "scorings": {"dev": int(sc.get("dev", 0)), "hidden": hidden}, "task_budget": budget,
        "over_budget": bool(budget is not None and hidden > budget),
        "candidates": len(pop) if kind in EVALUATOR_ONLY else sum(1 for s in pop if s.get("round", 0) > 0),
        "failed_candidates": sum(1 for s in pop if s.get("status") != "ok" or s.get("hard_fail_reasons")),
        "llm_calls": int(totals.get("llm_calls", 0)), "input_tokens": tin, "output_tokens": tout, "tokens": tin + tout,
        "usd": float(totals.get("usd", 0.0)), "wall_seconds": wall, "rounds": run.get("rounds_done", 0),
        "best_by_round": [[b.get("round"), b.get("speedup")] for b in run.get("best_by_round") or []],
        "run_dir": str(d.relative_to(out)),
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    from agent.run_store import atomic_write

    atomic_write(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_summary(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------- aggregates and tables


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def effective_speedup(r: dict[str, Any]) -> float | None:
    """1.0 for a failed cell (the unchanged code is what ships); None where the task reports none."""
    if not r["correct"]:
        return 1.0 if r["reward_class"] == "performance" else None
    s = r.get("speedup")
    return s if isinstance(s, (int, float)) and s > 0 else None


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
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
        "wall_seconds_mean": statistics.fmean(float(r["wall_seconds"] or 0) for r in rows),
    }


def grouped(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def method_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One aggregated row per method, in the order methods first appear."""
    return [{"method": m, **aggregate(rs)} for m, rs in grouped(rows, lambda r: r["method"]).items()]


# (key, CSV header, Markdown/LaTeX header, formatter for people)
COLUMNS: list[tuple[str, str, str, Callable[[Any], str]]] = [
    ("method", "method", "method", str),
    ("tasks", "tasks", "tasks", str),
    ("n", "n", "n", str),
    ("reward_mean", "reward_mean", "reward (mean ± sd)", lambda v: f"{v:.3f}"),
    ("reward_sd", "reward_sd", "", lambda v: f"{v:.3f}"),
    ("reward_min", "reward_min", "", lambda v: f"{v:.3f}"),
    ("reward_max", "reward_max", "", lambda v: f"{v:.3f}"),
    ("speedup_geomean", "speedup_geomean", "speedup (geomean)", lambda v: "-" if v is None else f"{v:.3f}x"),
    ("correct_share", "correct_share", "correct", lambda v: f"{100 * v:.0f}%"),
    ("usd_mean", "usd_mean", "USD (mean)", lambda v: f"{v:.4f}"),
    ("tokens_mean", "tokens_mean", "tokens (mean)", lambda v: f"{v:.0f}"),
    ("hidden_scorings_mean", "hidden_scorings_mean", "hidden scorings (mean)", lambda v: f"{v:.2f}"),
    ("over_budget", "over_budget", "over budget", str),
    ("wall_seconds_mean", "wall_seconds_mean", "wall s (mean)", lambda v: f"{v:.1f}"),
]
NOTE = ("reward: mean ± sample sd over cells; speedup: geometric mean, a cell whose final candidate is not correct "
        "counted as 1x; correct: share of cells whose final candidate passed every correctness gate; "
        "hidden scorings: gradings spent against the task's submission budget (over budget: cells that spent more).")


def _people_cells(row: dict[str, Any], per_task: bool) -> list[str]:
    out = []
    for key, _, head, fmt in COLUMNS:
        if not head or (per_task and key == "tasks"):
            continue
        out.append(f"{fmt(row['reward_mean'])} ± {fmt(row['reward_sd'])}" if key == "reward_mean" else fmt(row[key]))
    return out


def _people_headers(per_task: bool) -> list[str]:
    return [h for k, _, h, _ in COLUMNS if h and not (per_task and k == "tasks")]


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c[1] for c in COLUMNS])
    for r in rows:
        # 12 significant digits: exact enough to recompute from, without float noise like 1001.2500000000003
        w.writerow(["" if r[k] is None else (f"{r[k]:.12g}" if isinstance(r[k], float) else r[k]) for k, *_ in COLUMNS])
    return buf.getvalue()


def to_markdown(title: str, rows: list[dict[str, Any]], per_task: bool) -> str:
    heads = _people_headers(per_task)
    lines = [f"### {title}", "", "| " + " | ".join(heads) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(heads))) + "|"]
    lines += ["| " + " | ".join(_people_cells(r, per_task)) + " |" for r in rows]
    return "\n".join(lines + ["", f"_{NOTE}_", ""])


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


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
    from agent.run_store import atomic_write

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
            mark = f"; not official packages (pesflow re-creations or modified): {', '.join(recreated)}" if recreated else ""
            emit(cls, f"{cls.capitalize()} tasks ({n_tasks}), all seeds{mark}", method_table(by_class[cls]), per_task=False)
    for task, rs in grouped(rows, lambda r: r["task"]).items():
        which = "official benchmark package" if rs[0].get("official") else "NOT the official package"
        emit(f"task-{slug(task)}", f"{task} ({rs[0]['reward_class']}), {which}", method_table(rs), per_task=True)
    atomic_write(dest / "all.md", "\n".join(sections))
    written.append(dest / "all.md")
    return written


# ---------------------------------------------------------------- the progress display


class MatrixProgress:
    """A bar over the whole matrix and a task x method grid on a terminal; one line per cell otherwise."""

    def __init__(self, bc: BaselinesConfig, cells: list[Cell], console: Console):
        self.console, self.bc = console, bc
        self.state: dict[Cell, str] = {c: "·" for c in cells}
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console)
        self.job = self.bar.add_task("cells", total=len(cells))
        self.live = Live(self._view(), console=console, refresh_per_second=4) if console.is_terminal else None
        if self.live:
            self.live.start()

    def _view(self) -> Group:
        t = Table(title="pesflow baselines", caption="· waiting  ▶ running  ✓ done (speedup)  ✗ failed")
        t.add_column("task")
        for m in self.bc.methods:
            t.add_column(m, justify="center")
        for task in self.bc.tasks:
            t.add_row(task, *[" ".join(self.state[Cell(task, m, s)] for s in self.bc.seeds) for m in self.bc.methods])
        return Group(self.bar, t)

    def update(self, cell: Cell, mark: str, line: str, advance: bool) -> None:
        self.state[cell] = mark
        if advance:
            self.bar.advance(self.job)
        self.bar.update(self.job, description=line if not advance else "cells")
        if self.live:
            self.live.update(self._view())
        elif advance:
            self.console.print(line, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.live:
            self.live.update(self._view())
            self.live.stop()


def _mark(line: dict[str, Any]) -> str:
    if not line["correct"]:
        return "✗"
    s = line.get("speedup")
    return f"✓{s:.2f}x" if isinstance(s, (int, float)) else "✓"


# ---------------------------------------------------------------- the whole matrix


@dataclass
class MatrixResult:
    out: Path
    ran: list[Cell]
    skipped: list[Cell]
    failed: list[tuple[Cell, str]]
    rows: list[dict[str, Any]]
    written: list[Path]


def run_matrix(base: Config, bc: BaselinesConfig, out: Path, roots: list[str], console: Console | None = None) -> MatrixResult:
    from agent.runner import check_grader
    from evaluator.task import load_task

    console = console or Console()
    out = out.resolve()
    cells = matrix(bc)
    # Everything that can be checked before hours of grading is checked now, in one line each.
    tasks = {t: load_task(t, roots, base.benchmark.url) for t in bc.tasks}
    for name in bc.methods:
        cfg = cell_config(base, bc, name, bc.seeds[0], out / "cells")
        if bc.methods[name].kind not in EVALUATOR_ONLY:
            for t in tasks.values():
                check_grader(t, cfg.evaluator.grader)
        if bc.methods[name].uses_llm and not (cfg.llm.default or cfg.llm.executor):
            raise ConfigError(f"baselines method {name} ({bc.methods[name].kind}) needs an LLM: set llm.default "
                              "(e.g. openai:gpt-4o-mini) in the baselines file")
    out.mkdir(parents=True, exist_ok=True)
    ran, skipped, failed = [], [], []
    progress = MatrixProgress(bc, cells, console)

    def lines() -> list[dict[str, Any]]:
        return [cell_line(out / c.rel, c, bc.methods[c.method].kind, tasks[c.task].reward_class, out)
                for c in cells if is_finished(out / c.rel)]

    try:
        for i, cell in enumerate(cells, 1):
            d = out / cell.rel
            label = f"[{i}/{len(cells)}] {cell.task} · {cell.method} · seed {cell.seed}"
            if is_finished(d):
                skipped.append(cell)
                line = cell_line(d, cell, bc.methods[cell.method].kind, tasks[cell.task].reward_class, out)
                progress.update(cell, _mark(line), f"{label}: already done", advance=True)
                continue
            progress.update(cell, "▶", label, advance=False)
            try:
                run_cell(base, bc, cell, out, roots, console)
            except KeyboardInterrupt:
                raise
            except Exception as e:  # one broken cell must not end a night of grading; it is retried next time
                msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                if d.is_dir():
                    RunStore(d).update_run(status="error", error=msg)
                failed.append((cell, msg))
                progress.update(cell, "✗", f"{label}: failed ({msg})", advance=True)
                continue
            ran.append(cell)
            status = run_status(d)
            if status in FINISHED:
                line = cell_line(d, cell, bc.methods[cell.method].kind, tasks[cell.task].reward_class, out)
                progress.update(cell, _mark(line), f"{label}: {status}, reward {line['reward']:.3f}, "
                                f"speedup {line['speedup']}, USD {line['usd']:.4f}", advance=True)
            else:
                failed.append((cell, f"run ended with status {status}"))
                progress.update(cell, "✗", f"{label}: run ended with status {status}", advance=True)
            write_jsonl(out / "summary.jsonl", lines())  # after every cell: a stopped matrix still has its summary
    finally:
        progress.close()
    rows = lines()
    write_jsonl(out / "summary.jsonl", rows)
    written = [out / "summary.jsonl"]
    if rows:
        from agent.figures import write_figures

        written += write_tables(rows, out / "tables")
        written += write_figures(rows, out / "figures", {m: bc.methods[m].kind for m in bc.methods})
    return MatrixResult(out, ran, skipped, failed, rows, written)
