"""What near-duplicate reuse saves a search: a scripted search whose executors offer the same two
programs (the toy package's loop and its closed form) in a new spelling every time (comments,
blank lines, a parenthesis: tests/test_near_duplicates.py `spellings`). Prints the children, the
distinct texts among them (what a search that only skips identical text would grade), the
gradings this search made, and the grading seconds it spent against what each skipped grading
would have cost at the mean of those it made.

    python3 benchmarks/near_duplicates.py [--rounds 10] [--children 4]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.config import load_config  # noqa: E402
from agent.search.session import start_run  # noqa: E402
from tests.conftest import toy_tasks_root  # noqa: E402
from tests.llm_server import Reply, ScriptedLLMServer, roles  # noqa: E402
from tests.test_near_duplicates import CLOSED, LOOP, spellings  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--children", type=int, default=4)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-server-needs-no-key")
    work = Path(tempfile.mkdtemp(prefix="pesflow-near-dup-"))
    toy_tasks_root(work / "tasks")
    offers = {"loop": spellings(LOOP.replace("total += i * i", "total = total + i * i")), "closed": spellings(CLOSED)}
    turn = itertools.count()

    def executor(req):
        return Reply(text=f"toy/kernel.py\n```python\n{next(offers['closed' if next(turn) % 2 else 'loop'])}```\n")
    with ScriptedLLMServer(roles(executor, "Try either form.")) as server:
        cfg = load_config(sets=["llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}",
                                f"loop.rounds={args.rounds}", f"loop.children={args.children}", f"run.out={work / 'traces'}",
                                "run.quiet=true", f"evaluator.local.cache_dir={work / 'cache'}", "loop.score_final_with_hidden=false"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(work / "tasks")])
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]
    kids = {e["data"]["content_hash"] for e in events if e["kind"] == "candidate" and e["data"].get("round", 0) > 0}
    n_kids = sum(1 for e in events if e["kind"] == "candidate" and e["data"].get("round", 0) > 0)
    made = [e["data"] for e in events if e["kind"] == "verdict" and not e["data"].get("reused")
            and e["data"].get("label") == "" and e["data"]["content_hash"] in kids]
    secs = sum(float(v.get("grading_seconds") or 0) for v in made)
    mean = secs / len(made) if made else 0.0
    print(f"kfc/toy-sum (the test fixture), {args.rounds} rounds x {args.children} executors, status {status}")
    print("| children | distinct texts | gradings made | near-duplicates not graded | grading s spent | grading s saved (at the mean) |")
    print("|---|---|---|---|---|---|")
    print(f"| {n_kids} | {len(kids)} | {len(made)} | {len(kids) - len(made)} | {secs:.1f} | {(len(kids) - len(made)) * mean:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
