"""`pesflow tasks check`: the command's shell over evaluator/package_check.py (a bar on a
terminal, one line per package otherwise; the table and JSON at the end)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evaluator.catalog import locate
from evaluator.grader import Evaluator
from evaluator.package_check import PackageCheck, run_checks
from evaluator.task import Task, TaskError, load_task


def cmd_tasks_check(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001 - agent.config.Config
    roots = [*args.tasks_root, *config.tasks_roots]
    if args.all:
        names = [r["name"] for r in locate(roots) if r["location"]]
    elif args.tasks:
        names = list(args.tasks)
    else:
        raise ValueError("name the packages to check (pesflow tasks check kfc/... lh/...) or pass --all")
    tasks: list[Task] = []
    for n in names:
        try:
            tasks.append(load_task(n, roots, config.benchmark.url))
        except TaskError as e:  # a package pesflow cannot read is named, and the others are checked
            print(f"pesflow tasks check: {n}: {e}", file=sys.stderr)
    graders = ("hidden", "dev") if args.grader == "both" else (args.grader,)
    out = Path(args.out).resolve()
    ev = Evaluator(config.evaluator, tasks_roots=roots, log_root=out / "gradings", official_url=config.benchmark.url)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), disable=not sys.stderr.isatty())
    job = bar.add_task("tasks check", total=len(tasks))

    def done(c: PackageCheck, reused: bool) -> None:
        bar.advance(job)
        line = f"{c.task}: {c.klass}{' (kept from an earlier check)' if reused else ''} - {c.evidence[:160]}"
        if bar.disable:
            print(line, file=sys.stderr, flush=True)
        else:
            bar.console.print(line, highlight=False, soft_wrap=True)

    try:
        with bar:
            checks = run_checks(ev, tasks, graders, out, device=args.device, on_done=done)
    finally:
        ev.close()
    if args.json:
        print(json.dumps([c.model_dump(mode="json") for c in checks]))
    else:
        counts: dict[str, int] = {}
        for c in checks:
            counts[c.klass] = counts.get(c.klass, 0) + 1
        print(", ".join(f"{k} {n}" for k, n in counts.items()))
        print(f"table: {out / 'tasks-check.md'}")
    return 0
