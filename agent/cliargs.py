"""`pesflow`'s arguments: one parser per subcommand, and the rules that keep each option where it is read.

`pesflow tasks` and its subcommands `fetch` and `check` take --config and --set (`tasks` and
`check` also --tasks-root and --json). argparse lets a subcommand's defaults overwrite what was
given before it (`pesflow tasks --tasks-root X check` parsed to tasks_root=[]), so the nested
copies go to their own dests and `merge_levels` joins them: lists add up, a flag given at one
level is kept, one value given twice as two different values is an error. A flag the command
does not read is a one-line error naming the commands that do read it.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

SUB = "sub_"  # the dest prefix of the nested subcommands' copies of the shared options
MERGED = ("tasks_root", "config", "set", "json")


class Parser(argparse.ArgumentParser):
    """Every usage error is one line on stderr and exit 2 (argparse's own prints the usage
    first); an unknown flag names the commands it belongs to."""

    def error(self, message: str) -> NoReturn:
        hint = ""
        if message.startswith("unrecognized arguments:"):
            flag = next((w.split("=")[0] for w in message.split(":", 1)[1].split() if w.startswith("-")), None)
            where = commands_with(flag) if flag else []
            if where:
                hint = f"; {flag} is an option of " + ", ".join(f"`pesflow {w}`" for w in where)
            elif flag:
                hint = f"; `{self.prog} --help` lists its options"
        print(f"{self.prog}: {message}{hint}", file=sys.stderr)
        sys.exit(2)


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def walk(p: argparse.ArgumentParser | None = None, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its words: {"run": ..., "tasks check": ...}."""
    p = p or build_parser()
    out: dict[str, argparse.ArgumentParser] = {}
    for name, sp in _subparsers(p).items():
        out[prefix + name] = sp
        out.update(walk(sp, f"{prefix}{name} "))
    return out


def flags_of(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


def commands_with(flag: str) -> list[str]:
    return [w for w, sp in walk().items() if flag in flags_of(sp)]


def merge_levels(args: argparse.Namespace) -> argparse.Namespace:
    """Fold `tasks check`'s and `tasks fetch`'s own copies of the shared options into the parent's."""
    for name in MERGED:
        sub = SUB + name
        if not hasattr(args, sub):
            continue
        mine, parents = getattr(args, sub), getattr(args, name, None)
        delattr(args, sub)
        if isinstance(mine, list):
            setattr(args, name, [*(parents or []), *mine])
        elif isinstance(mine, bool):
            setattr(args, name, bool(parents) or mine)
        elif mine is not None and parents is not None and mine != parents:
            print(f"pesflow {args.command}: --{name.replace('_', '-')} given twice "
                  f"({parents} and {mine}); give it once",
                  file=sys.stderr)
            raise SystemExit(2)
        else:
            setattr(args, name, mine if mine is not None else parents)
    return args


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return merge_levels(build_parser().parse_args(argv))


def _common(p: argparse.ArgumentParser, roots: bool = True, level: str = "") -> None:
    """--tasks-root, --config, --set. `level` names a nested subcommand (`tasks check`), whose
    copies go to their own dests and are merged with the parent's (see `merge_levels`)."""
    if roots:
        p.add_argument("--tasks-root", action="append", default=[], metavar="DIR", dest=f"{level}tasks_root",
                       help="a folder of task packages (a Φ-Bench checkout's tasks/); "
                            "repeatable; wins over bundled tasks")
    p.add_argument("--config", metavar="FILE", dest=f"{level}config",
                   help="a YAML file overriding configs/default.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest=f"{level}set",
                   help="override one config key (dotted)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pesflow", description="Evolutionary kernel search over Φ-Bench task packages.")
    sub = parser.add_subparsers(dest="command", required=True)
    # in the order `pesflow --help` lists them
    for add in (_tasks_args, _evaluate_args, _run_args, _resume_args, _replay_args, _audit_args, _import_args,
                _calibrate_args, _baselines_args, _review_args, _report_args):
        add(sub)
    return parser


def _tasks_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list the 85 Φ-Bench tasks and where each package is found; fetch or check them")
    _common(p)
    p.add_argument("--json", action="store_true", help="print one JSON array")
    tsub = p.add_subparsers(dest="tasks_command")
    f = tsub.add_parser("fetch", help="clone the public Φ-Bench repository at the pinned commit into pesflow's cache")
    _common(f, roots=False, level=SUB)  # fetch clones into --dir: no package is looked up
    f.add_argument("--ref", help="the commit, tag or branch to check out (default: benchmark.ref)")
    f.add_argument("--dir", help="where the checkout goes (default: benchmark.dir)")
    c = tsub.add_parser("check", help="grade each package's noop, oracle(s) and negative here and classify it")
    _common(c, level=SUB)
    c.add_argument("tasks", nargs="*", metavar="TASK", help="<bench>/<dir> (or --all)")
    c.add_argument("--all", action="store_true", help="every package found (the 85 of the catalog where present)")
    c.add_argument("--grader", choices=["hidden", "dev", "both"], default="hidden")
    c.add_argument("--device", choices=["cuda", "cpu"], help="cpu: GPU packages checked for correctness only")
    c.add_argument("--out", metavar="DIR", default="traces/tasks-check",
                   help="results.jsonl (resumable), tasks-check.md/.json")
    c.add_argument("--json", action="store_true", dest=f"{SUB}json", help="print one JSON array")


def _evaluate_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="grade one candidate (or noop/oracle/negative) on a task")
    _common(p)
    p.add_argument("task", help="<bench>/<dir>, e.g. kfc/wre-router-power-of-two-choices-loop16, or a package folder")
    p.add_argument("--mode", choices=["candidate", "noop", "oracle", "negative"], default="candidate")
    p.add_argument("--candidate", metavar="PATCH_OR_DIR",
                   help="a unified diff, or a folder of replacement files laid out as in the repo")
    p.add_argument("--grader", choices=["dev", "hidden"],
                   help="dev engine (default from config) or the hidden tests/test.sh")
    p.add_argument("--backend", choices=["local", "docker", "modal", "ray"],
                   help="where to grade (default from config)")
    p.add_argument("--out", metavar="DIR", help="where the grader's logs and verdict.json go")
    p.add_argument("--device", choices=["cuda", "cpu"],
                   help="for GPU tasks: cpu checks correctness on the CPU with small shapes (no reward)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _run_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run",
                       help="search for a faster candidate: plan -> execute -> evaluate -> summarize, for N rounds")
    _common(p)
    p.add_argument("task", help="<bench>/<dir> or a package folder")
    p.add_argument("--llm", metavar="PROVIDER:MODEL",
                   help="openai:MODEL (or any OpenAI-compatible server) or anthropic:MODEL")
    p.add_argument("--rounds", type=int, help="rounds (default from config: 16)")
    p.add_argument("--children", type=int, help="executors per round (default 2)")
    p.add_argument("--backend", choices=["local", "docker", "modal", "ray"], help="where candidates are graded")
    p.add_argument("--grader", choices=["dev", "hidden"], help="which grader drives the search (default dev)")
    p.add_argument("--seed", type=int, help="seed of every random choice")
    p.add_argument("--out", metavar="DIR", help="where run directories go (default traces/)")
    p.add_argument("--quiet", action="store_true", help="no live display: one plain line per round")


def _resume_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resume", help="continue a stopped, killed or finished run from its last checkpoint")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--from-round", type=int, metavar="K",
                   help="continue from the checkpoint of round K instead of the last")
    p.add_argument("--rounds", type=int, help="raise the number of rounds (to continue a finished run)")
    p.add_argument("--max-usd", type=float, metavar="USD",
                   help="raise the run's USD cap (counted over the whole run, resumes included)")
    p.add_argument("--quiet", action="store_true")


def _replay_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="re-run a recorded search with every LLM answer from its journal (no network)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--regrade", action="store_true", help="grade every candidate again and compare with the record")
    p.add_argument("--out", metavar="DIR", help="where the replay's run directory goes")
    p.add_argument("--quiet", action="store_true")


def _audit_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="check a run directory (or a LoongFlow trace) and exit non-zero on any violation")
    p.add_argument("path", metavar="DIR")
    p.add_argument("--json", action="store_true")


def _import_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="convert a LoongFlow run or published trace mirror into a pesflow run directory")
    p.add_argument("dir", metavar="DIR", help="the trace: the folder holding database/, iteration/, evaluator/")
    p.add_argument("--out", metavar="RUN_DIR", help="the new run directory (default: <run.out>/loongflow/<DIR's name>)")


def _calibrate_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="re-measure a task's anchor here: the oracle against the frozen baseline")
    _common(p)
    p.add_argument("task")
    p.add_argument("--repeats", type=int, help="oracle runs to take the median of (default from config, at least 3)")
    p.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    p.add_argument("--json", action="store_true")


def _baselines_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baselines",
                       help="run a matrix of methods x tasks x seeds into summary.jsonl, tables and figures")
    _common(p)
    p.add_argument("baselines_config", metavar="CONFIG",
                   help="a baselines YAML file (configs/baselines.yaml documents one)")
    p.add_argument("--out", metavar="DIR",
                   help="where cells/, summary.jsonl, tables/ and figures/ go (default: the file's out)")
    p.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="run the cells as Ray tasks on a cluster (default address: evaluator.ray.address's auto)")


def _review_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("review",
                       help="a person's decision on a flagged grading: accept (it counts) or reject (it does not)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("id", metavar="ID",
                   help="a candidate id (as run.json's suspects and the report show it, e.g. r03-c0) "
                   "or a prefix of its content hash")
    p.add_argument("--accept", action="store_true", help="its figures count after all")
    p.add_argument("--reject", action="store_true", help="its figures do not count")
    p.add_argument("--why", metavar="TEXT", help="why, for whoever reads the run later (required)")


def _report_args(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report",
                       help="write one self-contained HTML page about a run: tree, diffs, verdicts, lessons, costs")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="FILE.html", help="where the page goes (default RUN_DIR/report.html)")
