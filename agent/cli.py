"""`pesflow`: the command line. Each subcommand is a thin shell over a library call."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent.cliargs import build_parser, parse  # noqa: F401 - build_parser: the parsers, for tests and docs
from agent.config import ConfigError, load_config
from agent.extras import MissingExtra, require_backend
from agent.experiments.matrix import load_baselines, run_matrix
from agent.readers.audit import audit
from agent.readers.loongflow.importer import default_import_dir, import_loongflow
from agent.readers.report import write_report
from agent.rundir.review import review
from agent.rundir.faults import MachineFault, is_machine
from agent.rundir.store import RunDirError
from agent.llm.gateway import ModelUnreachable
from agent.search.session import NoLLMConfigured, apply_run_flags, replay_run, resume_run, start_run
from evaluator import backends, sandbox
from evaluator.backends.base import BackendUnavailable, InfraError, capabilities_of
from evaluator.benchmark import FetchError, fetch, fetch_note, first_use, say_source
from evaluator.calibrate import CalibrationError, calibrate, official_note
from evaluator.candidate import CandidateError
from evaluator.catalog import load_catalog, locate
from evaluator.evaluation import Evaluator
from evaluator.verdict import verdict_json
from evaluator.hardware import gpu_available
from evaluator.modes import PackageLacks, request
from evaluator.package_check import PackageCheck, run_checks
from evaluator.task import Task, TaskError, load_task, needs_benchmark

# Exit codes: 0 graded fine, 1 the candidate failed (hard fail, scope, timeout),
# 2 bad input, 3 the grader or our machinery failed, 4 graded ok but the trust screens call it a suspect.
EXIT_BY_STATUS = {"ok": 0, "hard_fail": 1, "scope_violation": 1, "timeout": 1, "grader_error": 3, "infra_error": 3}
EXIT_SUSPECT = 4


def _evaluator(args: argparse.Namespace, config):  # noqa: ANN001
    if getattr(args, "backend", None):
        config.evaluator.backend = args.backend
    require_backend(config.evaluator.backend)
    roots = [*args.tasks_root, *config.tasks_roots]
    return Evaluator(config.evaluator, tasks_roots=roots, official_url=config.benchmark.url)


def _first_use(config, names: list[str], roots: list[str]) -> None:  # noqa: ANN001 - agent.config.Config
    """The pinned benchmark fetched the first time a command needs one of its names
    (benchmark.fetch_on_first_use); where it cannot be, the names resolve to the bundled
    re-creations and the line naming one says why (evaluator/benchmark.py say_source)."""
    b = config.benchmark
    if b.fetch_on_first_use and any(needs_benchmark(n, roots) for n in names):
        first_use(b.url, b.ref, Path(b.dir), timeout=b.fetch_timeout_sec, retry_hours=b.fetch_retry_hours)


def _search_needs_gpu(task: Task, backend: str) -> None:
    """A search ranks candidates by their timings, which a GPU task's CPU check (--device cpu)
    does not take (correctness only): with no GPU where the gradings run, `run` refuses before
    anything runs, naming what can be done instead."""
    if task.gpus == 0 or capabilities_of(SimpleNamespace(name=backend)).gpus != "host" or gpu_available():
        return
    raise TaskError(f"{task.name} needs a GPU (gpus = {task.gpus}) and this machine has "
                    "none; a search ranks candidates by GPU timings, which grading on the CPU does not take "
                    "(correctness only), so `pesflow run` has no --device: search on a GPU machine, or from here on a "
                    f"cloud GPU: `pesflow run {task.name} --backend modal`; check a candidate's correctness here: "
                    f"`pesflow evaluate {task.name} --device cpu --candidate PATCH`")


def cmd_tasks(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    if args.tasks_command == "fetch":
        return cmd_tasks_fetch(args, config)
    if args.tasks_command == "check":
        return cmd_tasks_check(args, config)

    rows = locate([*args.tasks_root, *config.tasks_roots])
    if args.json:
        print(json.dumps(rows))
        return 0
    # Plain aligned lines, never wrapped: easy to read and to grep.
    print(f"{len(rows)} tasks, {sum(1 for r in rows if r['location'])} found here")
    print(f"{'task':58} {'class':14} {'gpus':>4} {'budget':>6} {'anchor':>12}  found at")
    for r in rows:
        anchor = f"{r['ref_speedup']:.6g}" if r.get("ref_speedup") else "-"
        print(f"{r['name']:58} {str(r.get('reward_class') or '?'):14} {str(r.get('gpus', '?')):>4} "
              f"{str(r.get('max_submissions', '?')):>6} {anchor:>12}  {r['location'] or '-'}")
    return 0


def cmd_tasks_fetch(args: argparse.Namespace, config) -> int:  # noqa: ANN001
    if args.tasks_root:
        raise ValueError("--tasks-root is not read by `pesflow tasks fetch` (it clones into "
                         "--dir, default benchmark.dir); drop it, or give it to `pesflow "
                         "tasks` or `pesflow tasks check`")
    b = config.benchmark
    try:
        rec = fetch(b.url, args.ref or b.ref, Path(args.dir or b.dir))
    except FetchError as e:
        raise ValueError(str(e)) from None
    print(f"fetched {rec['url']} at {rec['commit'][:12]} into {rec['dir']}; task names now resolve there "
          "after --tasks-root and PESFLOW_TASKS_PATH, before pesflow's bundled re-creations")
    return 0


def cmd_tasks_check(args: argparse.Namespace, config) -> int:  # noqa: ANN001 - agent.config.Config
    """`pesflow tasks check` (evaluator/package_check.py): a bar on a terminal, one line per package otherwise."""
    roots = [*args.tasks_root, *config.tasks_roots]
    if not args.all and not args.tasks:
        raise ValueError("name the packages to check (pesflow tasks check kfc/... lh/...) or pass --all")
    _first_use(config, [e["name"] for e in load_catalog()] if args.all else args.tasks, roots)
    names = [r["name"] for r in locate(roots) if r["location"]] if args.all else list(args.tasks)
    tasks: list[Task] = []
    unreadable = []
    for n in names:
        try:
            tasks.append(load_task(n, roots, config.benchmark.url))
        except TaskError as e:  # a package pesflow cannot read is named, and the others are checked
            print(f"pesflow tasks check: {n}: {e}", file=sys.stderr)
            unreadable.append(n)
    if not tasks:
        raise ValueError(f"no package to check: {', '.join(unreadable)} not found or not readable (lines above); "
                         "name packages as <bench>/<dir> or package folders")
    recreated = [t.name for t in tasks if "bundled" in (t.source.repo or "")]
    if recreated and (note := fetch_note()):
        print("pesflow tasks check: pesflow's bundled re-creations stand in for "
              f"{len(recreated)} of these packages; {note}",
              file=sys.stderr)
    require_backend(config.evaluator.backend)
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
    if unreadable:  # bad input, said above: exit 2 once the readable ones are checked
        print(f"pesflow tasks check: not checked (bad input, named above): {', '.join(unreadable)}", file=sys.stderr)
        return 2
    return 0


def cmd_evaluate(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    if args.mode != "candidate" and args.candidate:
        raise CandidateError("bad_arguments", f"--candidate goes with --mode candidate, not --mode {args.mode}")
    if args.candidate and not Path(args.candidate).exists():
        raise ValueError(f"--candidate {args.candidate}: no such file or folder; pass a unified diff (git diff output) "
                         "or a folder of replacement files laid out as in the repository")
    _first_use(config, [args.task], [*args.tasks_root, *config.tasks_roots])
    ev = _evaluator(args, config)
    task = ev.task(args.task)
    say_source(task.name, task.root, task.source)
    if args.mode in ("oracle", "negative"):  # a mode the package cannot grade is bad input, said before anything runs
        try:
            request(task, args.mode, args.grader or config.evaluator.grader, None)
        except PackageLacks as e:
            ev.close()
            raise ValueError(f"{e}; pick another --mode (noop always works) or --grader") from None
    try:
        v = ev.evaluate(task, mode=args.mode, candidate=Path(args.candidate) if args.candidate else None,
                        grader=args.grader, out_dir=Path(args.out) if args.out else None, device=args.device,
                        explain=True)  # a person reads this verdict: how a wrong answer differs
    finally:
        ev.close()
    if args.json:
        print(verdict_json(v))
    else:
        table = Table(show_header=False, title=f"{v.task} · {v.mode} · {v.grader} grader · {v.backend}")
        for k in ("status", "reward", "speedup", "ref_speedup", "hard_fail_reasons", "tests", "hardware", "seconds",
                  "log_dir", "message"):
            val = getattr(v, k)
            val = val.value if hasattr(val, "value") else val
            table.add_row(k, ", ".join(val) if isinstance(val, list) else (f"{val.passed}/{val.total}" if k == "tests"
                                                                           else str(val)))
        console.print(table)
    # One line on trust; with --json on stderr, so that stdout stays one JSON object.
    out = sys.stderr if args.json else sys.stdout
    if v.trust.suspect:
        print(f"suspect: {'; '.join(v.trust.reasons)}", file=out)
        if v.status.value == "ok":
            return EXIT_SUSPECT
    elif v.trust.needs_review:
        print(f"needs review: {'; '.join(v.trust.reasons) or 'a speedup far past the reference'}", file=out)
    return EXIT_BY_STATUS[v.status.value]


def cmd_calibrate(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    _first_use(config, [args.task], [*args.tasks_root, *config.tasks_roots])
    ev = _evaluator(args, config)
    task = ev.task(args.task)
    say_source(task.name, task.root, task.source)
    if not args.dry_run and (note := official_note(task)):
        print(f"pesflow calibrate: {note}", file=sys.stderr)
    cal = calibrate(ev, task, repeats=args.repeats or config.evaluator.calibrate_repeats, write=not args.dry_run)
    if args.json:
        print(cal.model_dump_json())
    else:
        console.print(f"{cal.task}: oracle speedup median {cal.median:.4f} over {len(cal.speedups)} runs "
                      f"({', '.join(f'{s:.3f}' for s in cal.speedups)}; spread {cal.spread:.1%}) on {cal.hardware}; "
                      f"previous anchor {cal.previous} ({cal.previous_source})")
        for w in cal.written:
            console.print(f"wrote {w}")
    return 0


def cmd_run(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    cfg = apply_run_flags(config, args)
    require_backend(cfg.evaluator.backend)
    roots = [*args.tasks_root, *cfg.tasks_roots]
    _first_use(cfg, [args.task], roots)
    _search_needs_gpu(load_task(args.task, roots, cfg.benchmark.url), cfg.evaluator.backend)
    try:
        run_dir, status = start_run(cfg, args.task, roots, console=console)
    except NoLLMConfigured as e:
        print(f"run: {e.run_dir}")
        print(f"pesflow run: {e}", file=sys.stderr)
        return 2
    _say_cap(args.command, run_dir, status)
    print(f"run: {run_dir}")
    return 0 if status in ("finished", "budget_exhausted") else 1


def _say_cap(command: str, run_dir: Path, status: str) -> None:
    """A search the USD cap ended says so, and how to go on (it ends cleanly, exit 0); one a stop
    rule ended says which."""
    _say_stop(command, run_dir)
    if status != "budget_exhausted":
        return
    run = json.loads((run_dir / "run.json").read_text())
    cap, paid = run["config"]["llm"]["max_usd"], run.get("totals", {}).get("usd", 0.0)
    print(f"pesflow {command}: the USD cap (llm.max_usd = {cap}) was reached after ${paid:.4f}; to go on: "
          f"pesflow resume {run_dir} --max-usd USD", file=sys.stderr)


def _say_stop(command: str, run_dir: Path) -> None:
    """A search a stop rule ended early says which (loop.target, loop.patience, loop.roofline_stop)."""
    try:
        run = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return
    rule, loop = run.get("stopped_by"), (run.get("config") or {}).get("loop") or {}
    if rule == "target_reached":
        print(f"pesflow {command}: stopped by loop.target: the best reached {loop.get('target')} after round "
              f"{run.get('rounds_done')} of {loop.get('rounds')}", file=sys.stderr)
    elif rule == "patience":
        print(f"pesflow {command}: stopped by loop.patience: no new best in {loop.get('patience')} rounds "
              f"(after round {run.get('rounds_done')} of {loop.get('rounds')})", file=sys.stderr)
    elif rule == "roofline_reached":
        print(f"pesflow {command}: stopped by loop.roofline_stop: the best's dominant kernel reached "
              f"{loop.get('roofline_stop')} of a ceiling after round {run.get('rounds_done')} of {loop.get('rounds')}",
              file=sys.stderr)


def _run_backend(run_dir: Path) -> None:
    """A resumed or replayed run grades where it did: its backend's SDK must be here."""
    try:
        backend = json.loads((run_dir / "run.json").read_text())["config"]["evaluator"]["backend"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # not a run directory: the session says so in its own line
    require_backend(backend)


def cmd_resume(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    _run_backend(Path(args.run_dir))
    run_dir, status = resume_run(Path(args.run_dir), from_round=args.from_round, rounds=args.rounds, console=console,
                                 quiet=True if args.quiet else None, max_usd=args.max_usd)
    _say_cap(args.command, run_dir, status)
    print(f"run: {run_dir}")
    return 0 if status in ("finished", "budget_exhausted") else 1


def cmd_replay(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    _run_backend(Path(args.run_dir))
    dest, status, comparisons = replay_run(Path(args.run_dir), out=Path(args.out) if args.out else None,
                                           regrade=args.regrade, console=console, quiet=True if args.quiet else None)
    disagree = [c for c in comparisons if not c["correctness_agrees"]]
    for c in comparisons:
        print(f"{c['content_hash'][:12]} {c['label'] or 'search':14} recorded {c['recorded_status']:10} "
              f"{c['recorded_speedup']!s:>10}  now {c['new_status']:10} {c['new_speedup']!s:>10}  "
              f"correctness {'agrees' if c['correctness_agrees'] else 'DIFFERS'}; speed "
              f"{ {True: 'within noise', False: 'OUTSIDE noise', None: '-'}[c['speed_agrees']] }"
              + ("" if c.get("trust_agrees", True) else "; trust DIFFERS"))
    print(f"run: {dest}")
    return 1 if disagree or status not in ("finished", "budget_exhausted", "no_llm") else 0


def cmd_audit(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    try:
        rep = audit(Path(args.path))
    except FileNotFoundError as e:
        raise ValueError(str(e)) from None
    if args.json:
        print(rep.model_dump_json())
    else:
        print(f"audit of {rep.path} ({rep.kind})")
        for line in rep.findings:
            print(f"  ok   {line}")
        for line in rep.violations:
            print(f"  FAIL {line}")
        print(f"{len(rep.violations)} violation(s)")
    return 1 if rep.violations else 0


def cmd_baselines(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    bc = load_baselines(args.baselines_config)
    require_backend("ray" if args.ray else config.evaluator.backend)
    roots = [*args.tasks_root, *bc.tasks_roots, *config.tasks_roots]
    _first_use(config, bc.tasks, roots)
    res = run_matrix(config, bc, Path(args.out or bc.out), roots, console=console, ray=args.ray)
    print(f"cells: {len(res.ran)} run, {len(res.skipped)} already done, {len(res.failed)} failed")
    for cell, msg in res.failed:
        print(f"failed: {cell.rel}: {msg}", file=sys.stderr)
    print(f"summary: {res.out / 'summary.jsonl'}")
    return 1 if res.failed else 0


def cmd_review(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    d = review(Path(args.run_dir), args.id, args.accept, args.reject, args.why)
    print(f"review: {d['candidate_id']} ({d['content_hash'][:12]}) {d['decision']}ed: {d['why']}; "
          "the readers apply it now, a resumed search to its population")
    return 0


def cmd_report(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    print(f"report: {write_report(Path(args.run_dir), Path(args.out) if args.out else None)}")
    return 0


def cmd_import(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    out = Path(args.out) if args.out else default_import_dir(Path(config.run.out), Path(args.dir))
    run_dir = import_loongflow(Path(args.dir), out)
    run = json.loads((run_dir / "run.json").read_text())
    t, best = run["totals"], run["best"]
    print(f"imported {t['solutions']} solutions ({t['passed']} passed), {t['checkpoints']} checkpoints, "
          f"{t['evaluations']} verdicts; best {best['id']} score {best['score']}; "
          f"{run['source']['audit_violations']} audit violation(s) in the source (pesflow audit {args.dir})")
    print(run_dir)  # last line: the run directory alone, for scripts
    return 0


COMMANDS = {"resume": cmd_resume, "replay": cmd_replay, "audit": cmd_audit, "tasks": cmd_tasks,
            "evaluate": cmd_evaluate, "calibrate": cmd_calibrate, "run": cmd_run, "baselines": cmd_baselines,
            "report": cmd_report, "review": cmd_review, "import": cmd_import}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    console = Console(stderr=False)
    try:
        config = load_config(getattr(args, "config", None), getattr(args, "set", []))
        return COMMANDS[args.command](args, config, console)
    except (ConfigError, TaskError, CandidateError, CalibrationError, RunDirError, MissingExtra, ValueError) as e:
        print(f"pesflow {args.command}: {e}", file=sys.stderr)  # one line, never wrapped
        return 2
    except ModelUnreachable as e:
        where = getattr(e, "run_dir", None)
        again = f"; fix it, then: pesflow resume {where}" if where else ""
        if where:
            print(f"run: {where}")  # stdout's last line, as after every run that made a directory
        print(f"pesflow {args.command}: the model cannot be used: {e}{again}", file=sys.stderr)
        return 2
    except BackendUnavailable as e:  # where gradings go cannot take them (evaluator/backends/base.py)
        print(f"pesflow {args.command}: {e}", file=sys.stderr)  # one line; the run directory stays resumable
        return 3
    except InfraError as e:  # the machinery cannot grade here (evaluator/backends/base.py), after its retries
        where = getattr(e, "run_dir", None)
        if where:
            print(f"run: {where}")
        again = f"; fix it, then: pesflow resume {where}" if where else ""
        print(f"pesflow {args.command}: {e}{again}", file=sys.stderr)
        return 3
    except MachineFault as e:  # the disk refused a run directory's write (agent/rundir/faults.py)
        if e.run_dir is not None:
            print(f"run: {e.run_dir}")
        print(f"pesflow {args.command}: {e}", file=sys.stderr)
        return 3
    except OSError as e:
        if not is_machine(e):
            raise
        # a write outside a run directory (the cache, a baselines folder, a tasks-check folder)
        again = f"pesflow resume {args.run_dir}" if args.command == "resume" else "the same command again"
        print(f"pesflow {args.command}: cannot write {e.filename or '?'}: {os.strerror(e.errno)}; fix that "
              f"(free space, or a writable folder: its place is in configs/default.yaml), then run {again}",
              file=sys.stderr)
        return 3
    except (KeyboardInterrupt, sandbox.Interrupted):
        print("pesflow: interrupted; every grading it started was stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `pesflow tasks | head`: the reader left; end quietly (no SIGPIPE handler is installed,
        # since main() also runs inside other programs, pytest among them).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _on_signal(signum: int, frame: object) -> None:
    """SIGTERM, SIGINT, SIGHUP: every live sandbox is killed now (not when its grading would end),
    then the command unwinds as on Ctrl-C, closing its backends and keeping the run resumable."""
    sandbox.stop_all()
    backends.cancel_all_live()  # gradings in flight elsewhere (a Ray cluster's tasks)
    raise KeyboardInterrupt


def entry() -> int:
    """The `pesflow` program (main() without the signal handlers also runs inside other programs)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    return main()


if __name__ == "__main__":
    sys.exit(entry())
