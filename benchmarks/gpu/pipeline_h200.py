"""A pipelined search on a real GPU package, the scripted server standing in for the model: how
much of the wall time the GPU spends grading once the first grading is done.

Every executor answers with its parent's file plus one comment line naming the call, so each
candidate is distinct and graded in full (the package's own dev grader); the model answers
after --delay seconds. Prints the share of the wall time, from the end of the baseline's
grading to the end of the last search grading, during which a grading ran, and run.json's
`utilization`.

    python3 benchmarks/gpu/pipeline_h200.py --tasks-root DIR --out DIR [--task kfc/...] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.config import load_config  # noqa: E402
from agent.rundir import journal  # noqa: E402
from agent.search.session import start_run  # noqa: E402
from tests.llm_server import Reply, Request, ScriptedLLMServer, distinct_children  # noqa: E402

def ts(e: dict) -> float:
    return datetime.fromisoformat(e["ts"]).timestamp()


def busy_after_first(run_dir: Path) -> tuple[float, float, int]:
    """(share, seconds, gradings) from the end of the baseline's grading to the end of the last search grading."""
    vs = [e for e in journal.read(run_dir / "journal.jsonl") if e["kind"] == "verdict" and not e["data"].get("reused")]
    base = next(e for e in vs if e["data"]["label"] == "baseline")
    search = [e for e in vs if e["data"]["label"] == ""]
    start, end = ts(base), max(ts(e) for e in search)
    spans = sorted((max(start, ts(e) - e["data"]["grading_seconds"]), ts(e)) for e in search)
    total, reach = 0.0, start
    for a, b in spans:
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total / (end - start), end - start, len(search)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks-root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--task", default="kfc/ssm-selective-scan-firstorder")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--delay", type=float, default=2.0)
    args = ap.parse_args()

    def slow(req: Request) -> Reply:
        r = distinct_children(req)
        r.delay_s = args.delay
        return r

    os.environ.setdefault("OPENAI_API_KEY", "sk-probe-0123456789abcdef")
    with ScriptedLLMServer(slow) as server:
        cfg = load_config(sets=["llm.default=openai:probe", f"llm.base_url={server.openai_base_url}",
                                f"loop.rounds={args.rounds}", f"loop.children={args.children}", f"run.out={args.out}",
                                "run.quiet=true", "loop.score_final_with_hidden=false", "loop.final_regrade_top=1",
                                "loop.edit_format=whole_file", "evaluator.local.install_steps=skip"])
        run_dir, status = start_run(cfg, args.task, [args.tasks_root])
    share, seconds, n = busy_after_first(run_dir)
    u = json.loads((run_dir / "run.json").read_text())["utilization"]
    print(f"{args.task}: status {status}; {n} search gradings; after the first grading the GPU graded "
          f"{share:.1%} of {seconds:.0f} s; run.json utilization {json.dumps(u)}")


if __name__ == "__main__":
    main()
