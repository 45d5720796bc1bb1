"""What the search loop itself costs and how busy it keeps its graders, measured on real runs
against the scripted LLM server (all runs of one invocation side by side, on this machine).

Prints, for searches on the toy package (deterministic grader, scripted model):
  1. prompt tokens per call by round and role: prompts must not grow round after round;
  2. the loop's own overhead per round (wall time minus the LLM and grading time), instant model;
  3. grader utilization with the model answering in --slow seconds and each grading taking
     about --grade seconds (a `sleep` added to a copy of the toy's grader): one round at a time
     (pipeline_depth 1, as before this loop was pipelined) against the pipelined loop, with one
     grader and with two CPU slots; every child is new code (tests/llm_server.py
     distinct_children), so every one is graded. The figures are the run's own (run.json
     `utilization`).

    python3 benchmarks/loop.py [--rounds 16] [--children 2] [--slow 0.5] [--grade 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.config import load_config  # noqa: E402
from agent.rundir import journal  # noqa: E402
from agent.search.session import start_run  # noqa: E402
from tests.conftest import toy_tasks_root  # noqa: E402
from tests.llm_server import ScriptedLLMServer, distinct_children  # noqa: E402
from tests.test_loop import kernel_engineer  # noqa: E402

DEV_TEST = "environment/loop/private/dev_tests/test.sh"


def ts(e: dict) -> float:
    return datetime.fromisoformat(e["ts"]).timestamp()


def merged(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def toy(root: Path, grade_s: float) -> Path:
    """The toy package; with grade_s > 0 its dev grader sleeps first so that a grading lasts about that."""
    if not root.exists():
        pkg = toy_tasks_root(root)
        if grade_s > 0:
            sh = pkg / DEV_TEST
            lines = sh.read_text().splitlines()
            sh.write_text("\n".join([lines[0], f"sleep {max(0.0, grade_s - 0.35):.2f}", *lines[1:]]) + "\n")
    return root


def run_once(tmp: Path, rounds: int, children: int, delay: float, grade_s: float = 0.0, depth: int = 2,
             workers: int = 1, model=kernel_engineer) -> Path:
    root = toy(tmp.parent / f"tasks-{grade_s:g}", grade_s)

    def responder(req):
        r = model(req)
        r.delay_s = delay
        return r

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-0123456789abcdef")
    with ScriptedLLMServer(responder) as server:
        cfg = load_config(sets=["llm.default=openai:bench-model", f"llm.base_url={server.openai_base_url}",
                                f"loop.rounds={rounds}", f"loop.children={children}", f"run.out={tmp / 'traces'}",
                                "run.quiet=true", f"evaluator.local.cache_dir={tmp.parent / 'cache'}",
                                f"loop.pipeline_depth={depth}", f"loop.grading_workers={workers}",
                                f"evaluator.workers={workers}",
                                "loop.score_final_with_hidden=false", "loop.final_regrade_top=1"])
        run_dir, _ = start_run(cfg, "kfc/toy-sum", [str(root)])
    return run_dir


def prompt_tokens(run_dir: Path) -> dict[int, dict[str, list[int]]]:
    tokens: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for e in journal.read(run_dir / "journal.jsonl"):
        d = e["data"]
        if e["kind"] == "llm_call" and d.get("usage"):
            k = int(d["tag"].split("/")[0][1:])  # the round is in the call's tag (r<k>/...)
            tokens[k][d["role"]].append(d["usage"]["input_tokens"])
    return tokens


def overhead(run_dir: Path) -> dict[int, tuple[float, float, float]]:
    """With one round at a time: per round, (wall, LLM + grading busy, the rest)."""
    per_round: dict[int, dict[str, list]] = defaultdict(lambda: {"busy": [], "span": []})
    k = 0
    for e in journal.read(run_dir / "journal.jsonl"):
        d = e["data"]
        if e["kind"] == "selection":
            k = d["round"]
        if e["kind"] == "llm_call" and d.get("usage"):
            per_round[k]["busy"].append((ts(e) - (d.get("latency_s") or 0), ts(e)))
        if e["kind"] == "verdict" and not d.get("reused"):
            per_round[k]["busy"].append((ts(e) - (d.get("grading_seconds") or 0.0), ts(e)))
        per_round[k]["span"].append(ts(e))
    out = {}
    for r, v in per_round.items():
        if r and v["span"]:
            wall = max(v["span"]) - min(v["span"])
            busy = merged(v["busy"])
            out[r] = (wall, busy, max(0.0, wall - busy))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--slow", type=float, default=0.5, help="seconds each scripted answer takes in the utilization runs")
    ap.add_argument("--grade", type=float, default=1.0, help="seconds a grading takes in the utilization runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pesflow-loop-bench-") as tmp:
        fast = run_once(Path(tmp) / "fast", args.rounds, args.children, 0.0)
        tokens = prompt_tokens(fast)
        print("prompt tokens per call (mean) by round")
        roles = sorted({role for r in tokens.values() for role in r})
        print(f"{'round':>5} " + " ".join(f"{r:>11}" for r in roles))
        for r in sorted(tokens):
            print(f"{r:>5} " + " ".join(f"{statistics.mean(tokens[r][role]) if tokens[r][role] else 0:11.0f}" for role in roles))
        first, last = min(tokens), max(tokens)
        growth = {role: statistics.mean(tokens[last][role]) / statistics.mean(tokens[first][role])
                  for role in roles if tokens[first][role] and tokens[last][role]}
        peak = {role: max(statistics.mean(tokens[r][role]) for r in tokens if tokens[r][role]) / statistics.mean(tokens[first][role])
                for role in roles if tokens[first][role]}
        print("growth, last round / first round: " + ", ".join(f"{r} {g:.2f}x" for r, g in growth.items()))
        print("largest round / first round:      " + ", ".join(f"{r} {g:.2f}x" for r, g in peak.items()))
        print()
        sync = run_once(Path(tmp) / "sync-fast", args.rounds, args.children, 0.0, depth=1)
        over = overhead(sync)
        print("the loop's own overhead per round, one round at a time, instant model (seconds)")
        print(f"{'round':>5} {'wall':>7} {'llm+grading':>12} {'overhead':>9}")
        for r, (wall, busy, o) in sorted(over.items()):
            print(f"{r:>5} {wall:7.3f} {busy:12.3f} {o:9.3f}")
        print(f"median overhead per round: {statistics.median(o for _, _, o in over.values()):.3f} s")
        print()
        print(f"grader utilization: model answering in {args.slow:.2f} s, a grading taking ~{args.grade:.2f} s, "
              f"{args.rounds} rounds x {args.children} children")
        print(f"{'loop':34} {'graders':>7} {'wall s':>7} {'grading s':>9} {'busy':>6} {'each':>13} {'LLM busy':>8} "
              f"{'queue mean/max':>14} {'best':>8}")
        for label, depth, workers in (("one round at a time (depth 1)", 1, 1), ("pipelined, depth 2", 2, 1),
                                      ("one round at a time (depth 1)", 1, 2), ("pipelined, depth 3", 3, 2),
                                      ("pipelined, depth 4", 4, 2)):
            d = run_once(Path(tmp) / f"util-{depth}-{workers}", args.rounds, args.children, args.slow, args.grade,
                         depth=depth, workers=workers, model=distinct_children)
            run = json.loads((d / "run.json").read_text())
            u = run["utilization"]
            graded = [e["data"]["grading_seconds"] for e in journal.read(d / "journal.jsonl")
                      if e["kind"] == "verdict" and not e["data"].get("reused")]
            each = "/".join(f"{x:.0%}" for x in u["grader_busy_each"])
            print(f"{label:34} {workers:>7} {u['wall_seconds']:7.1f} {statistics.mean(graded):9.2f} "
                  f"{u['grader_busy_share']:6.1%} {each:>13} {u['llm_busy_share']:8.1%} "
                  f"{u['queue_depth_mean']:9.2f}/{u['queue_depth_max']:<4} {run['best']['id'] or '-':>8}")
        print("(busy: the share of the wall time the graders graded, preparing, baseline and final pick included; "
              "each: every pool grader's share from the end of the baseline to the last round applied)")


if __name__ == "__main__":
    main()
