"""What the trust screen costs a search: the same scripted search on a package, with the screen
off and on in several settings, side by side in one run.

The scripted model proposes the package's own reference each time, with one new line (so each
child is new code and graded): correct and faster than the baseline, the gradings the screen's
probes and invariants are for. Prints, per setting, the search's grading seconds (journal
`grading_seconds`, the search's own gradings), the wall time of the run, and whether any
grading was suspect. The search's gradings are its children's and the parents screened in full
when picked (`parent-check`: a child whose probes were deferred, trust.deferred; the probes alone
on what its grading kept, or its watched grading); `deferred` counts the children whose probes
waited. Settings: off; on (never defers); unpaced (the figure not reproduced); deferred (always,
named for when the default moves; today's default too); apart; default (configs/default.yaml).

    python3 benchmarks/trust_search_cost.py --tasks-root <benchmark>/tasks --task T [--rounds 4] \
        [--children contenders|mixed] [--set evaluator.local.install_steps=skip ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.feedback_protocols import events, search  # noqa: E402
from evaluator.config import EvaluatorConfig, LocalConfig  # noqa: E402
from evaluator.evaluation import Evaluator  # noqa: E402
from tests.adversarial.reward_hacking.corpus import reference_files  # noqa: E402
from tests.llm_server import Reply, Request, variant_line  # noqa: E402

SETTINGS = {"off": {"evaluator.trust.enabled": "false"}, "on": {"evaluator.trust.defer_below_best": "never"},
            "unpaced": {"evaluator.trust.reproduce_ratio": "0"},
            "deferred": {"evaluator.trust.defer_below_best": "always"}, "apart": {"evaluator.trust.defer_below_best": "apart"},
            "default": {}}


def broken(rel: str) -> str:
    """A line that stops the scope file building (what a search's failed children are): a syntax
    error in Python, a preprocessor error elsewhere."""
    return "def _pesflow_broken(:\n" if rel.endswith(".py") else "#error pesflow-bench: a broken child\n"


def proposer(files: dict[str, str], others: list[dict[str, str]] | None = None):
    """A model whose executors answer with the reference's scope file and one new line
    (variant_line); with `others`, the children cycle through the reference and each of them."""
    n = [0]
    cycle = [files, *(others or [])]

    def reply(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            ids = re.findall(r"^## (r\d\d-c\d+(?:-f\d+)?):", user, re.M)
            return Reply(text=json.dumps({"children": {i: "noted" for i in ids}, "memory": ["the reference is fast"]}))
        if "You are the planner" in user:
            return Reply(text="Use the vectorized form.")
        n[0] += 1
        chosen = cycle[(n[0] - 1) % len(cycle)]
        return Reply(text="".join(f"{path}\n```\n{code.rstrip()}\n{variant_line(path, n[0])}\n```\n" for path, code in chosen.items()))
    return reply


def main() -> int:
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-server-needs-no-key")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks-root", required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--settings", default="off,on,unpaced")
    ap.add_argument("--verdicts", default=None, metavar="FILE",
                    help="also write each counted verdict (setting, label, seconds, the screen's checks) as a JSON line")
    ap.add_argument("--children", choices=("contenders", "mixed"), default="contenders",
                    help="contenders: every child the reference (each one a possible result: the screen's worst case); "
                         "mixed: the reference, the package's own baseline (correct, no faster) and one that does not "
                         "import, in turn")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config setting for every run (a GPU machine: evaluator.local.install_steps=skip)")
    args = ap.parse_args()
    cache = Path(tempfile.gettempdir()) / "pesflow-bench-cache"
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache))), tasks_roots=[args.tasks_root],
                   log_root=Path(tempfile.mkdtemp()))
    task = ev.task(args.task)
    files = {k: v for k, v in reference_files(task).items() if v is not None}
    ev.close()
    others = None
    if args.children == "mixed":
        base = {rel: (task.root / "environment/repo" / rel).read_text() for rel in files
                if (task.root / "environment/repo" / rel).is_file()}
        others = [base, {rel: text + "\n" + broken(rel) for rel, text in files.items()}]
    print(f"{args.task}: a {args.rounds}-round scripted search proposing {'the reference' if others is None else 'the reference, the baseline and a broken child in turn'}, "
          f"per setting (this machine, in turn)")
    print("| setting | gradings | grading s (sum) | grading s (median) | run wall s | suspect | deferred | parent-check |")
    print("|---|---|---|---|---|---|---|---|")
    work = Path(tempfile.mkdtemp(prefix="pesflow-trust-search-"))
    for name in args.settings.split(","):
        t0 = time.monotonic()
        run_dir, _ = search(Path(args.tasks_root), work / name, cache, proposer(files, others), task=args.task,
                            **{"loop.rounds": args.rounds, **dict(kv.split("=", 1) for kv in args.set), **SETTINGS[name]})
        wall = time.monotonic() - t0
        verdicts = [e["data"] for e in events(run_dir) if e["kind"] == "verdict" and e["data"].get("label") in ("", "parent-check")]
        secs = sorted(float(v.get("grading_seconds") or 0) for v in verdicts)
        trusts = [(v.get("verdict") or {}).get("trust") or {} for v in verdicts]
        suspect = sum(1 for t in trusts if t.get("suspect"))
        deferred = sum(1 for t in trusts if t.get("deferred"))
        checked = sum(1 for v in verdicts if v.get("label") == "parent-check")
        med = secs[len(secs) // 2] if secs else 0.0
        if args.verdicts:  # where each grading's time went, without the run's folder (large on a GPU)
            with open(args.verdicts, "a") as out:
                for v in verdicts:
                    checks = ((v.get("verdict") or {}).get("trust") or {}).get("checks") or {}
                    out.write(json.dumps({"setting": name, "label": v.get("label"), "hash": v.get("content_hash"),
                                          "grading_seconds": v.get("grading_seconds"),
                                          "speedup": (v.get("verdict") or {}).get("speedup"),
                                          "probes": checks.get("probes"), "watch": checks.get("watch")}, default=str) + "\n")
        print(f"| {name} | {len(secs)} | {sum(secs):.1f} | {med:.2f} | {wall:.1f} | {suspect} | {deferred} | {checked} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
