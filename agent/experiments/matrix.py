"""`pesflow baselines`: methods x tasks x seeds, each cell a run directory, into a paper's tables.

    OUT/
      cells/<bench>/<dir>/<method>/seed-<s>/   one run directory per cell (agent/rundir/schema.py layout)
      summary.jsonl                            one line per finished cell, in matrix order
      tables/task-<bench>-<dir>.{md,csv,tex}   per task: one row per method, over the seeds
      tables/<reward class>.{md,csv,tex}       per reward class (performance, implementation): over tasks and seeds
      tables/all.md                            every table above, for reading
      figures/                                 agent/experiments/figures.py

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
- A cell whose final grading does not count (a suspect, one awaiting review, one a person
  rejected with pesflow review: evaluator.trust's is_result, reviews read from the cell's
  journal) is in no aggregate and no figure: an exploit's score is not a method's result. Its
  summary line says `counted: false` and why (`trust`); the tables name it with a dagger.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent.config import Config, ConfigError, merge, read_yaml
from agent.experiments.methods import EVALUATOR_ONLY, FINISHED, Method, kind_overrides, run_evaluator_cell
from agent.experiments.tables import counted, write_tables
from agent.rundir import journal
from agent.rundir.schema import STATE_FILE, cell_of, reviews_of
from agent.rundir.store import RunStore, atomic_write, checkpoints_of
from agent.search.session import check_grader, start_run
from evaluator.task import Task, load_task
from evaluator.trust.findings import Trust, is_result
from evaluator.verdict import is_correct

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # method names become folder names


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    data = read_yaml(path, "baselines config", "(tasks, seeds, methods...); see configs/baselines.yaml")
    try:
        return BaselinesConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_one_line(e, f"baselines config {path}")) from None


# ---------------------------------------------------------------- cells and their configs


def cell_config(base: Config, bc: BaselinesConfig, name: str, seed: int, cells_root: Path) -> Config:
    """default.yaml (+ --config/--set) <- the file's config <- its llm <- the kind <- the method's set <- the cell."""
    m = bc.methods[name]
    data = merge(base.model_dump(), bc.config)
    data = merge(data, {"llm": bc.llm})
    data = merge(data, kind_overrides(m))
    data = merge(data, m.set)
    data = merge(data, {"loop": {"seed": seed}, "run": {"out": str(cells_root), "quiet": True}})
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


def run_cell_of_data(base: dict[str, Any], bc: dict[str, Any], cell: tuple[str, str, int], out: Path,
                     roots: list[str]) -> str:
    """A cell as a Ray node runs it (agent/experiments/ray_cells.py): the configs as plain data,
    a quiet console; passed to the node by reference, so ray_cells never imports this module.
    Returns where under `out` the cell's run directory is."""
    c = Cell(*cell)
    run_cell(Config.model_validate(base), BaselinesConfig.model_validate(bc), c, out, roots, Console(quiet=True))
    return c.rel


def run_cell(base: Config, bc: BaselinesConfig, cell: Cell, out: Path, roots: list[str], console: Console) -> None:
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
    RunStore(d).update_run(cell={"task": cell.task, "method": cell.method, "kind": m.kind, "seed": cell.seed,
                                 "wall_seconds": round(time.monotonic() - t0, 3)})


# ---------------------------------------------------------------- summary lines


def best_is_correct(best: dict[str, Any]) -> bool:
    """The final candidate passed every gate but the speed-only ones (evaluator.verdict's one rule)."""
    if not best or best.get("id") is None:
        return False
    return is_correct(best.get("status", "ok"), best.get("hard_fail_reasons"))


def _last_population(d: Path) -> list[dict[str, Any]]:
    for _, cp in reversed(checkpoints_of(d)):
        try:
            return json.loads((cp / STATE_FILE).read_text())["population"]["solutions"]
        except (OSError, ValueError, KeyError):
            continue
    return []


def cell_trust(d: Path, best: dict[str, Any], pop: list[dict[str, Any]]) -> tuple[bool, dict[str, Any] | None]:
    """(counted, trust) of a cell's final grading, with a person's decision from its journal;
    trust is None when nothing flagged it nor a person reviewed it. A cell without a pick has
    nothing to distrust."""
    if not best or best.get("id") is None:
        return True, None
    h = best.get("content_hash") or next((s.get("content_hash") for s in pop if s.get("id") == best["id"]), None)
    t = Trust.model_validate(best.get("trust") or {})
    review = reviews_of(journal.read(d / "journal.jsonl")).get(h) if h else None
    if review:
        t = t.model_copy(update={"review": review})
    ok = is_result(t)
    if ok and not (review or t.suspect or t.needs_review):
        return True, None
    return ok, {"suspect": t.suspect, "needs_review": t.needs_review, "reasons": t.reasons, "families": t.families,
                "review": t.review}


def cell_line(d: Path, cell: Cell, kind: str, reward_class: str, out: Path) -> dict[str, Any]:
    """One summary.jsonl line, read from a finished cell's run directory alone."""
    run = json.loads((d / "run.json").read_text())
    best = run.get("best") or {}
    totals = run.get("totals") or {}
    sc = totals.get("scorings") or {}
    pop = _last_population(d)
    correct = best_is_correct(best)
    counts, trust = cell_trust(d, best, pop)
    hidden = int(sc.get("hidden", 0))
    budget = sc.get("task_budget", (run.get("task") or {}).get("max_submissions"))
    tin, tout = int(totals.get("input_tokens", 0)), int(totals.get("output_tokens", 0))
    wall = cell_of(run).get("wall_seconds", totals.get("elapsed_seconds"))
    source = (run.get("task") or {}).get("source") or {}
    return {
        "task": cell.task, "reward_class": reward_class, "method": cell.method, "kind": kind, "seed": cell.seed,
        "official": source.get("official"), "package_commit": source.get("commit"),
        "status": run.get("status"), "reward": float(best.get("reward") or 0.0), "speedup": best.get("speedup"),
        "correct": correct, "hard_fails": list(best.get("hard_fail_reasons") or []), "best_id": best.get("id"),
        "grader": best.get("grader") or run.get("grader"), "search_grader": run.get("grader"),
        "scorings": {"dev": int(sc.get("dev", 0)), "hidden": hidden}, "task_budget": budget,
        "over_budget": bool(budget is not None and hidden > budget),
        # what the model was shown (search.feedback; none for a cell with no model) and whether its dev
        # gradings went past the cap the package's own loop puts on a solver's submissions
        "feedback": ((run.get("config") or {}).get("search") or {}).get("feedback") if kind not in EVALUATOR_ONLY
            else None,
        "dev_cap": sc.get("dev_cap"), "dev_over_cap": bool(sc.get("dev_over_cap")),
        "candidates": len(pop) if kind in EVALUATOR_ONLY else sum(1 for s in pop if s.get("round", 0) > 0),
        "failed_candidates": sum(1 for s in pop if not is_correct(s.get("status", ""), s.get("hard_fail_reasons"))),
        "llm_calls": int(totals.get("llm_calls", 0)), "input_tokens": tin, "output_tokens": tout, "tokens": tin + tout,
        "cache_read_tokens": int(totals.get("cache_read_tokens", 0)),
        "usd": float(totals.get("usd", 0.0)), "wall_seconds": wall, "rounds": run.get("rounds_done", 0),
        "best_by_round": [[b.get("round"), b.get("speedup")] for b in run.get("best_by_round") or []],
        # where a round's best has no speedup (a dev engine whose baseline scores 0): its own figure and kind
        "dev_by_round": [[b.get("round"), b["dev"].get("value"), b["dev"].get("kind")]
                         for b in run.get("best_by_round") or [] if isinstance(b.get("dev"), dict)],
        "run_dir": str(d.relative_to(out)), "counted": counts, "trust": trust,
        "dropped_from_pick": [dr.get("id") for dr in best.get("dropped") or []],
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:

    atomic_write(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_summary(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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
        t = Table(title="pesflow baselines",
                  caption="· waiting  ▶ running  ✓ done (speedup)  ✗ failed  † not counted (suspect)")
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
    if not counted(line):
        return "†"
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


def run_matrix(base: Config, bc: BaselinesConfig, out: Path, roots: list[str], console: Console | None = None,
               ray: str | None = None) -> MatrixResult:
    """`ray`: a Ray cluster's address (or "auto"): the cells run there as Ray tasks (agent/experiments/ray_cells.py)."""

    console = console or Console()
    out = out.resolve()
    cells = matrix(bc)
    tasks = _checked_tasks(base, bc, out, roots)
    out.mkdir(parents=True, exist_ok=True)
    m = _MatrixRun(bc, out, cells, tasks, MatrixProgress(bc, cells, console))
    try:
        todo = m.skip_finished()
        if ray is not None and todo:
            m.run_on_ray(base, todo, ray)
            todo = []
        for cell in todo:
            m.run_here(base, cell, roots, console)
    finally:
        m.progress.close()
    rows = m.lines()
    write_jsonl(out / "summary.jsonl", rows)
    written = [out / "summary.jsonl", *_tables_and_figures(bc, rows, out)]
    return MatrixResult(out, m.ran, m.skipped, m.failed, rows, written)


def _checked_tasks(base: Config, bc: BaselinesConfig, out: Path, roots: list[str]) -> dict[str, Task]:
    """The matrix's tasks, loaded; everything that can be checked before hours of grading is
    checked now, in one line each."""
    tasks = {t: load_task(t, roots, base.benchmark.url) for t in bc.tasks}
    for name in bc.methods:
        cfg = cell_config(base, bc, name, bc.seeds[0], out / "cells")
        if bc.methods[name].kind not in EVALUATOR_ONLY:
            for t in tasks.values():
                check_grader(t, cfg.evaluator.grader)
        if bc.methods[name].uses_llm and not (cfg.llm.default or cfg.llm.executor):
            raise ConfigError(f"baselines method {name} ({bc.methods[name].kind}) needs an LLM: set llm.default "
                              "(e.g. openai:gpt-4o-mini) in the baselines file")
    return tasks


@dataclass
class _MatrixRun:
    """The cells as they are run: which ran, were already done, or failed, shown on `progress`."""
    bc: BaselinesConfig
    out: Path
    cells: list[Cell]
    tasks: dict[str, Task]
    progress: MatrixProgress
    ran: list[Cell] = field(default_factory=list)
    skipped: list[Cell] = field(default_factory=list)
    failed: list[tuple[Cell, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.cells)
        self.labels = {cell: f"[{i}/{n}] {cell.task} · {cell.method} · seed {cell.seed}"
                       for i, cell in enumerate(self.cells, 1)}

    def line(self, cell: Cell) -> dict[str, Any]:
        return cell_line(self.out / cell.rel, cell, self.bc.methods[cell.method].kind,
                         self.tasks[cell.task].reward_class, self.out)

    def lines(self) -> list[dict[str, Any]]:
        return [self.line(c) for c in self.cells if is_finished(self.out / c.rel)]

    def skip_finished(self) -> list[Cell]:
        """The cells still to run; the finished ones shown as done."""
        todo = []
        for cell in self.cells:
            if is_finished(self.out / cell.rel):
                self.skipped.append(cell)
                self.progress.update(cell, _mark(self.line(cell)), f"{self.labels[cell]}: already done", advance=True)
            else:
                todo.append(cell)
        return todo

    def run_on_ray(self, base: Config, todo: list[Cell], address: str) -> None:
        from agent.experiments.ray_cells import run_cells  # ray is optional (.[ray])

        for cell in todo:
            self.progress.update(cell, "▶", self.labels[cell], advance=False)
        run_cells(base, self.bc, todo, self.tasks, self.out, address, self.ended, run_cell_of_data)

    def run_here(self, base: Config, cell: Cell, roots: list[str], console: Console) -> None:
        self.progress.update(cell, "▶", self.labels[cell], advance=False)
        try:
            run_cell(base, self.bc, cell, self.out, roots, console)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one broken cell must not end a night of grading; it is retried next time
            self.ended(cell, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return
        self.ended(cell, None)

    def ended(self, cell: Cell, error: str | None) -> None:
        d, label = self.out / cell.rel, self.labels[cell]
        if error is not None:
            if d.is_dir():
                RunStore(d).update_run(status="error", error=error)
            self.failed.append((cell, error))
            self.progress.update(cell, "✗", f"{label}: failed ({error})", advance=True)
            return
        self.ran.append(cell)
        status = run_status(d)
        if status in FINISHED:
            line = self.line(cell)
            self.progress.update(cell, _mark(line), f"{label}: {status}, reward {line['reward']:.3f}, "
                                 f"speedup {line['speedup']}, USD {line['usd']:.4f}", advance=True)
        else:
            self.failed.append((cell, f"run ended with status {status}"))
            self.progress.update(cell, "✗", f"{label}: run ended with status {status}", advance=True)
        # after every cell: a stopped matrix still has its summary
        write_jsonl(self.out / "summary.jsonl", self.lines())


def _tables_and_figures(bc: BaselinesConfig, rows: list[dict[str, Any]], out: Path) -> list[Path]:
    if not rows:
        return []
    from agent.experiments.figures import write_figures  # matplotlib is slow to import: only this last step draws

    written = write_tables(rows, out / "tables")
    # A cell that does not count is no point and no curve either.
    return (written + write_figures([r for r in rows if counted(r)], out / "figures",
                                    {m: bc.methods[m].kind for m in bc.methods}))
