"""`pesflow`: the command line. Each subcommand is a thin shell over a library call."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent.config import ConfigError, load_config
from agent.experiments.matrix import load_baselines, run_matrix
from agent.readers.audit import audit
from agent.readers.loongflow.importer import default_import_dir, import_loongflow
from agent.readers.report import write_report
from agent.rundir.review import review
from agent.rundir.store import RunDirError
from agent.llm.gateway import ModelUnreachable
from agent.search.session import NoLLMConfigured, apply_run_flags, replay_run, resume_run, start_run
from evaluator import sandbox
from evaluator.benchmark import FetchError, fetch, say_source
from evaluator.calibrate import CalibrationError, calibrate
from evaluator.candidate import CandidateError
from evaluator.catalog import locate
from evaluator.evaluation import Evaluator, verdict_json
from evaluator.package_check import PackageCheck, run_checks
from evaluator.task import Task, TaskError, load_task

# Exit codes: 0 graded fine, 1 the candidate failed (hard fail, scope, timeout),
# 2 bad input, 3 the grader or our machinery failed, 4 graded ok but the trust screens call it a suspect.
EXIT_BY_STATUS = {"ok": 0, "hard_fail": 1, "scope_violation": 1, "timeout": 1, "grader_error": 3, "infra_error": 3}
EXIT_SUSPECT = 4


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks-root", action="append", default=[], metavar="DIR",
                   help="a folder of task packages (a Φ-Bench checkout's tasks/); repeatable; wins over bundled tasks")
    p.add_argument("--config", metavar="FILE", help="a YAML file overriding configs/default.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one config key (dotted)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pesflow", description="Evolutionary kernel search over Φ-Bench task packages.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("tasks", help="list the 85 Φ-Bench tasks and where each package is found; fetch or check them")
    _common(p)
    p.add_argument("--json", action="store_true", help="print one JSON array")
    tsub = p.add_subparsers(dest="tasks_command")
    f = tsub.add_parser("fetch", help="clone the public Φ-Bench repository at the pinned commit into pesflow's cache")
    _common(f)
    f.add_argument("--ref", help="the commit, tag or branch to check out (default: benchmark.ref)")
    f.add_argument("--dir", help="where the checkout goes (default: benchmark.dir)")
    c = tsub.add_parser("check", help="grade each package's noop, oracle(s) and negative here and classify it")
    _common(c)
    c.add_argument("tasks", nargs="*", metavar="TASK", help="<bench>/<dir> (or --all)")
    c.add_argument("--all", action="store_true", help="every package found (the 85 of the catalog where present)")
    c.add_argument("--grader", choices=["hidden", "dev", "both"], default="hidden")
    c.add_argument("--device", choices=["cuda", "cpu"], help="cpu: GPU packages checked for correctness only")
    c.add_argument("--out", metavar="DIR", default="traces/tasks-check", help="results.jsonl (resumable), tasks-check.md/.json")
    c.add_argument("--json", action="store_true", help="print one JSON array")

    p = sub.add_parser("evaluate", help="grade one candidate (or noop/oracle/negative) on a task")
    _common(p)
    p.add_argument("task", help="<bench>/<dir>, e.g. kfc/wre-router-power-of-two-choices-loop16, or a package folder")
    p.add_argument("--mode", choices=["candidate", "noop", "oracle", "negative"], default="candidate")
    p.add_argument("--candidate", metavar="PATCH_OR_DIR", help="a unified diff, or a folder of replacement files laid out as in the repo")
    p.add_argument("--grader", choices=["dev", "hidden"], help="dev engine (default from config) or the hidden tests/test.sh")
    p.add_argument("--backend", choices=["local", "docker", "modal"], help="where to grade (default from config)")
    p.add_argument("--out", metavar="DIR", help="where the grader's logs and verdict.json go")
    p.add_argument("--device", choices=["cuda", "cpu"],
                   help="for GPU tasks: cpu checks correctness on the CPU with small shapes (no reward)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("run", help="search for a faster candidate: plan -> execute -> evaluate -> summarize, for N rounds")
    _common(p)
    p.add_argument("task", help="<bench>/<dir> or a package folder")
    p.add_argument("--llm", metavar="PROVIDER:MODEL", help="openai:MODEL (or any OpenAI-compatible server) or anthropic:MODEL")
    p.add_argument("--rounds", type=int, help="rounds (default from config: 16)")
    p.add_argument("--children", type=int, help="executors per round (default 2)")
    p.add_argument("--backend", choices=["local", "docker", "modal"], help="where candidates are graded")
    p.add_argument("--grader", choices=["dev", "hidden"], help="which grader drives the search (default dev)")
    p.add_argument("--seed", type=int, help="seed of every random choice")
    p.add_argument("--out", metavar="DIR", help="where run directories go (default traces/)")
    p.add_argument("--quiet", action="store_true", help="no live display: one plain line per round")

    p = sub.add_parser("resume", help="continue a stopped, killed or finished run from its last checkpoint")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--from-round", type=int, metavar="K", help="continue from the checkpoint of round K instead of the last")
    p.add_argument("--rounds", type=int, help="raise the number of rounds (to continue a finished run)")
    p.add_argument("--max-usd", type=float, metavar="USD",
                   help="raise the run's USD cap (counted over the whole run, resumes included)")
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("replay", help="re-run a recorded search with every LLM answer from its journal (no network)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--regrade", action="store_true", help="grade every candidate again and compare with the record")
    p.add_argument("--out", metavar="DIR", help="where the replay's run directory goes")
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("audit", help="check a run directory (or a LoongFlow trace) and exit non-zero on any violation")
    p.add_argument("path", metavar="DIR")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("import", help="convert a LoongFlow run or published trace mirror into a pesflow run directory")
    p.add_argument("dir", metavar="DIR", help="the trace: the folder holding database/, iteration/, evaluator/")
    p.add_argument("--out", metavar="RUN_DIR", help="the new run directory (default: <run.out>/loongflow/<DIR's name>)")

    p = sub.add_parser("calibrate", help="re-measure a task's anchor here: the oracle against the frozen baseline")
    _common(p)
    p.add_argument("task")
    p.add_argument("--repeats", type=int, help="oracle runs to take the median of (default from config, at least 3)")
    p.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("baselines", help="run a matrix of methods x tasks x seeds into summary.jsonl, tables and figures")
    _common(p)
    p.add_argument("baselines_config", metavar="CONFIG", help="a baselines YAML file (configs/baselines.yaml documents one)")
    p.add_argument("--out", metavar="DIR", help="where cells/, summary.jsonl, tables/ and figures/ go (default: the file's out)")

    p = sub.add_parser("review", help="a person's decision on a flagged grading: accept (it counts) or reject (it does not)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("id", metavar="ID", help="a candidate id (as run.json's suspects and the report show it, e.g. r03-c0) "
                   "or a prefix of its content hash")
    p.add_argument("--accept", action="store_true", help="its figures count after all")
    p.add_argument("--reject", action="store_true", help="its figures do not count")
    p.add_argument("--why", metavar="TEXT", help="why, for whoever reads the run later (required)")

    p = sub.add_parser("report", help="write one self-contained HTML page about a run: tree, diffs, verdicts, lessons, costs")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="FILE.html", help="where the page goes (default RUN_DIR/report.html)")
    return parser


def _evaluator(args: argparse.Namespace, config):  # noqa: ANN001
    if getattr(args, "backend", None):
        config.evaluator.backend = args.backend
    roots = [*args.tasks_root, *config.tasks_roots]
    return Evaluator(config.evaluator, tasks_roots=roots, official_url=config.benchmark.url)


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


def cmd_evaluate(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    if args.mode != "candidate" and args.candidate:
        raise CandidateError("bad_arguments", f"--candidate goes with --mode candidate, not --mode {args.mode}")
    ev = _evaluator(args, config)
    task = ev.task(args.task)
    say_source(task.name, task.root, task.source)
    try:
        v = ev.evaluate(task, mode=args.mode, candidate=Path(args.candidate) if args.candidate else None,
                        grader=args.grader, out_dir=Path(args.out) if args.out else None, device=args.device)
    finally:
        ev.close()
    if args.json:
        print(verdict_json(v))
    else:
        table = Table(show_header=False, title=f"{v.task} · {v.mode} · {v.grader} grader · {v.backend}")
        for k in ("status", "reward", "speedup", "ref_speedup", "hard_fail_reasons", "tests", "hardware", "seconds", "log_dir", "message"):
            val = getattr(v, k)
            val = val.value if hasattr(val, "value") else val
            table.add_row(k, ", ".join(val) if isinstance(val, list) else (f"{val.passed}/{val.total}" if k == "tests" else str(val)))
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
    ev = _evaluator(args, config)
    task = ev.task(args.task)
    say_source(task.name, task.root, task.source)
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
    try:
        run_dir, status = start_run(cfg, args.task, [*args.tasks_root, *cfg.tasks_roots], console=console)
    except NoLLMConfigured as e:
        print(f"run: {e.run_dir}")
        print(f"pesflow run: {e}", file=sys.stderr)
        return 2
    _say_cap(args.command, run_dir, status)
    print(f"run: {run_dir}")
    return 0 if status in ("finished", "budget_exhausted") else 1


def _say_cap(command: str, run_dir: Path, status: str) -> None:
    """A search the USD cap ended says so, and how to go on (it ends cleanly, exit 0)."""
    if status != "budget_exhausted":
        return
    run = json.loads((run_dir / "run.json").read_text())
    cap, paid = run["config"]["llm"]["max_usd"], run.get("totals", {}).get("usd", 0.0)
    print(f"pesflow {command}: the USD cap (llm.max_usd = {cap}) was reached after ${paid:.4f}; to go on: "
          f"pesflow resume {run_dir} --max-usd USD", file=sys.stderr)


def cmd_resume(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
    run_dir, status = resume_run(Path(args.run_dir), from_round=args.from_round, rounds=args.rounds, console=console,
                                 quiet=True if args.quiet else None, max_usd=args.max_usd)
    _say_cap(args.command, run_dir, status)
    print(f"run: {run_dir}")
    return 0 if status in ("finished", "budget_exhausted") else 1


def cmd_replay(args: argparse.Namespace, config, console: Console) -> int:  # noqa: ANN001
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
    res = run_matrix(config, bc, Path(args.out or bc.out), [*args.tasks_root, *bc.tasks_roots, *config.tasks_roots], console=console)
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


COMMANDS = {"resume": cmd_resume, "replay": cmd_replay, "audit": cmd_audit, "tasks": cmd_tasks, "evaluate": cmd_evaluate,
            "calibrate": cmd_calibrate, "run": cmd_run, "baselines": cmd_baselines, "report": cmd_report,
            "review": cmd_review, "import": cmd_import}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=False)
    try:
        config = load_config(getattr(args, "config", None), getattr(args, "set", []))
        return COMMANDS[args.command](args, config, console)
    except (ConfigError, TaskError, CandidateError, CalibrationError, RunDirError, ValueError) as e:
        print(f"pesflow {args.command}: {e}", file=sys.stderr)  # one line, never wrapped
        return 2
    except ModelUnreachable as e:
        where = getattr(e, "run_dir", None)
        again = f"; fix it, then: pesflow resume {where}" if where else ""
        print(f"pesflow {args.command}: the model cannot be used: {e}{again}", file=sys.stderr)
        return 2
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
    raise KeyboardInterrupt


def entry() -> int:
    """The `pesflow` program (main() without the signal handlers also runs inside other programs)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    return main()


if __name__ == "__main__":
    sys.exit(entry())
