"""What the search loop itself costs, measured on a real run against the scripted LLM server.

Prints, for a search on the toy package (deterministic grader, scripted model):
  1. prompt tokens per call by round and role: prompts must not grow round after round;
  2. the loop's own overhead per round: round wall time minus the time the LLM calls and the
     gradings were busy (their intervals merged), i.e. pesflow's bookkeeping;
  3. grader utilization (share of wall time a grading was running) when the LLM answers
     instantly and when each answer takes --slow seconds.

    python3 benchmarks/loop.py [--rounds 16] [--children 2] [--slow 0.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent import journal  # noqa: E402
from agent.config import load_config  # noqa: E402
from agent.runner import start_run  # noqa: E402
from tests.conftest import toy_tasks_root  # noqa: E402
from tests.llm_server import ScriptedLLMServer  # noqa: E402
from tests.test_loop import kernel_engineer  # noqa: E402


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


def run_once(tmp: Path, rounds: int, children: int, delay: float) -> Path:
    root = tmp / "tasks"
    if not root.exists():
        toy_tasks_root(root)

    def responder(req):
        r = kernel_engineer(req)
        r.delay_s = delay
        return r

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-0123456789abcdef")
    with ScriptedLLMServer(responder) as server:
        cfg = load_config(sets=["llm.default=openai:bench-model", f"llm.base_url={server.openai_base_url}",
                                f"loop.rounds={rounds}", f"loop.children={children}", f"run.out={tmp / 'traces'}",
                                "run.quiet=true", f"evaluator.local.cache_dir={tmp / 'cache'}",
                                "loop.score_final_with_hidden=false", "loop.final_regrade_top=1"])
        run_dir, _ = start_run(cfg, "kfc/toy-sum", [str(root)])
    return run_dir


def analyse(run_dir: Path) -> tuple[dict, dict, float]:
    events = journal.read(run_dir / "journal.jsonl")
    tokens: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    per_round: dict[int, dict[str, list]] = defaultdict(lambda: {"llm": [], "grade": [], "span": []})
    k = 0
    grading_total = 0.0
    for e in events:
        d = e["data"]
        if e["kind"] == "selection":
            k = d["round"]
        if e["kind"] == "llm_call" and d.get("usage"):
            tokens[k][d["role"]].append(d["usage"]["input_tokens"])
            per_round[k]["llm"].append((ts(e) - (d.get("latency_s") or 0), ts(e)))
        if e["kind"] == "verdict" and not d.get("reused"):
            secs = d.get("grading_seconds") or 0.0
            grading_total += secs
            per_round[k]["grade"].append((ts(e) - secs, ts(e)))
        per_round[k]["span"].append(ts(e))
    overhead = {}
    for r, v in per_round.items():
        if r == 0 or not v["span"]:
            continue
        wall = max(v["span"]) - min(v["span"])
        busy = merged(v["llm"] + v["grade"])
        overhead[r] = (wall, busy, max(0.0, wall - busy))
    total_wall = ts(events[-1]) - ts(events[0])
    return tokens, overhead, grading_total / total_wall if total_wall else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--slow", type=float, default=0.5, help="seconds each scripted answer takes in the slow run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pesflow-loop-bench-") as tmp:
        fast = run_once(Path(tmp) / "fast", args.rounds, args.children, 0.0)
        tokens, overhead, util_fast = analyse(fast)
        print("prompt tokens per call (mean) by round")
        roles = sorted({role for r in tokens.values() for role in r})
        print(f"{'round':>5} " + " ".join(f"{r:>11}" for r in roles))
        for r in sorted(tokens):
            print(f"{r:>5} " + " ".join(f"{statistics.mean(tokens[r][role]) if tokens[r][role] else 0:11.0f}" for role in roles))
        first = min(r for r in tokens if r > 0)
        last = max(tokens)
        growth = {role: (statistics.mean(tokens[last][role]) / statistics.mean(tokens[first][role]))
                  for role in roles if tokens[first][role] and tokens[last][role]}
        print("growth, last round / first round: " + ", ".join(f"{r} {g:.2f}x" for r, g in growth.items()))
        print()
        print("the loop's own overhead per round (seconds)")
        print(f"{'round':>5} {'wall':>7} {'llm+grading':>12} {'overhead':>9}")
        for r, (wall, busy, over) in sorted(overhead.items()):
            print(f"{r:>5} {wall:7.3f} {busy:12.3f} {over:9.3f}")
        print(f"median overhead per round: {statistics.median(o for _, _, o in overhead.values()):.3f} s")
        print()
        slow = run_once(Path(tmp) / "slow", max(4, args.rounds // 4), args.children, args.slow)
        _, _, util_slow = analyse(slow)
        print(f"grader utilization (share of wall time grading): instant LLM {util_fast:.1%}; "
              f"LLM answering in {args.slow:.2f} s {util_slow:.1%}")
        print("(the loop grades a round's children after its executors answer: with a slow LLM the grader idles "
              "while the next round's plan and code are written)")


if __name__ == "__main__":
    main()
