"""What each feedback protocol (search.feedback) costs and buys, on real searches against the
scripted LLM server, all runs of one invocation side by side on this machine.

1. The toy package with a loop in the benchmark's form (tests/test_feedback_search.py): every
   executor's first answer fails with an error whose fix is said only in its message (a new
   number each time); a fix turn (loop.fix_turns=1) can repair it only when it is shown that
   message. Per protocol: prompt characters and input tokens per round, grading seconds per
   round, and the share of failing children repaired in their fix turn.
2. A search that reaches loop.target early against the same search without it: the LLM calls
   and gradings the stop rule saved.
3. With --tasks-root and --task (the benchmark's own packages, graded unchanged): a 4-round
   search under each protocol whose model appends to the scope file (an import-time error in
   round 1's first answer, a comment otherwise), kept under --examples as one planner and one
   executor prompt of each: what the model sees.

    python3 benchmarks/feedback_protocols.py [--rounds 4] [--out FILE.md]
        [--tasks-root DIR --task T [--task T ...] --examples DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.config import load_config  # noqa: E402
from agent.search.session import start_run  # noqa: E402
from tests.llm_server import Reply, Request, ScriptedLLMServer, variant_line  # noqa: E402
from tests.test_feedback_search import V_CLOSED, closed_at_once, loop_package  # noqa: E402

PROTOCOLS = ("benchmark", "engineer")


class ErrorThenFix:
    """A model whose executor's first answer fails with 'the table must be built with BLOCK=<n>'
    (a new n each time, built at run time: the code never holds it) and whose fix turn writes the
    right code, naming that n, only where the prompt shows it."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            ids = re.findall(r"^## (r\d\d-c\d+(?:-f\d+)?):", user, re.M)
            return Reply(text=json.dumps({"children": {i: "tried" for i in ids}, "memory": ["tables need a block size"]}))
        if "You are the planner" in user:
            return Reply(text="Build a lookup table.")
        if "Your code was graded" in user:
            m = re.search(r"BLOCK=(\d+)", user)
            if m:
                return Reply(text=f"toy/kernel.py\n```python\n{V_CLOSED}# BLOCK={m.group(1)}\n```\n")
            with self.lock:
                self.n += 1
                j = self.n
            return Reply(text=f"toy/kernel.py\n```python\ndef sum_squares(n):\n    return n * n + {j}\n```\n")
        with self.lock:
            self.n += 1
            j = self.n
        code = (f"def _table(n):\n    raise RuntimeError('the table must be built with BLOCK=%d' % ({j} * 16 + 1))\n\n\n"
                f"def sum_squares(n):\n    return _table(n)\n")
        return Reply(text=f"toy/kernel.py\n```python\n{code}```\n")


def search(root: Path, out: Path, cache: Path, model, task: str = "kfc/toy-sum", **sets: object) -> tuple[Path, int]:
    with ScriptedLLMServer(model) as server:
        items = [f"llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}", "loop.children=1",
                 "loop.pipeline_depth=1", f"run.out={out}", "run.quiet=true", f"evaluator.local.cache_dir={cache}",
                 "llm.timeout_sec=30", "loop.score_final_with_hidden=false"] + [f"{k}={v}" for k, v in sets.items()]
        run_dir, _ = start_run(load_config(sets=items), task, [str(root)])
        return run_dir, len(server.requests)


def events(run_dir: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]


def per_round(run_dir: Path) -> dict[str, float]:
    ev = events(run_dir)
    calls = [e["data"] for e in ev if e["kind"] == "llm_call"]
    rounds = max((int(re.match(r"r(\d+)/", c.get("tag", "r0/")).group(1)) for c in calls), default=1) or 1
    prompts = sum(len(p.read_text()) for p in run_dir.glob("rounds/*/*/**/prompt.md")) + \
        sum(len(p.read_text()) for p in run_dir.glob("rounds/*/planner/prompt.md"))
    grading = [float(e["data"].get("grading_seconds") or 0) for e in ev if e["kind"] == "verdict" and e["data"].get("label") == ""]
    pop = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    sols = pop["population"]["solutions"]
    fixes = [s for s in sols if "-f" in s["id"]]
    failing = [s for s in sols if s["round"] > 0 and "-f" not in s["id"] and s["status"] != "ok"]
    return {"rounds": rounds, "input_tokens_per_round": sum(int((c.get("usage") or {}).get("input_tokens") or 0) for c in calls) / rounds,
            "prompt_chars_per_round": prompts / rounds, "grading_s_per_round": sum(grading) / rounds,
            "failing_children": len(failing), "repaired": sum(1 for s in fixes if s["status"] == "ok"),
            "llm_calls": len(calls)}


def ours_only(prompt: str) -> str:
    """A prompt kept as an example: its structure and what pesflow said, the package's own
    instruction and code (another project's text) replaced by their sizes."""
    prompt = re.sub(r"(# The task\n)(.*?)(\n# The machine the grader runs on|\n# What may change|\n# The parent program|\n# The plan for this round)",
                    lambda m: f"{m.group(1)}(the package's instruction.md, {m.group(2).count(chr(10)) + 1} lines, not kept here)\n"
                              f"{m.group(3)}", prompt, count=1, flags=re.S)
    return re.sub(r"(```[^\n]*\n)(.*?)\n```",
                  lambda m: f"{m.group(1)}(the package's code, {m.group(2).count(chr(10)) + 1} lines, not kept here)\n```", prompt, flags=re.S)


def examples(tasks_root: Path, tasks: list[str], rounds: int, dest: Path, cache: Path, work: Path) -> list[str]:
    """A 4-round search per protocol on each of the benchmark's packages; one planner and one
    executor prompt of each kept under `dest`."""
    lines = []

    def appender(req: Request) -> Reply:
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            ids = re.findall(r"^## (r\d\d-c\d+(?:-f\d+)?):", user, re.M)
            return Reply(text=json.dumps({"children": {i: "noted" for i in ids}, "memory": ["keep the contract"]}))
        if "You are the planner" in user:
            return Reply(text="Keep the code; try a small change.")
        m = re.search(r"### (\S+)\n```\w*\n(.*?)\n```", user, re.S)
        if not m:
            return Reply(text="")
        path, code = m.group(1), m.group(2)
        tail = "\nraise RuntimeError('the module needs a %d-byte arena' % (1 << 12))\n" if "You are executor 1 of" in user \
            and "Your code was graded" not in user and "_pesflow_variant" not in code else f"\n{variant_line(path, len(user) % 997)}\n"
        return Reply(text=f"{path}\n```\n{code}{tail}```\n")

    for task in tasks:
        for protocol in PROTOCOLS:
            out = work / task.replace("/", "__") / protocol
            run_dir, _ = search(tasks_root, out, cache, appender, task=task, **{"search.feedback": protocol,
                                "loop.rounds": rounds, "loop.fix_turns": 1})
            keep = dest / task.replace("/", "__") / protocol
            keep.mkdir(parents=True, exist_ok=True)
            planner = run_dir / "rounds/02/planner/prompt.md"
            fix = next(iter(sorted(run_dir.glob("rounds/*/executor/*-f1/prompt.md"))), None)
            executor = fix or next(iter(sorted(run_dir.glob("rounds/*/executor/*/prompt.md"))), None)
            for name, p in (("planner.md", planner), ("executor.md", executor)):
                if p is not None and p.is_file():
                    (keep / name).write_text(ours_only(p.read_text()))
            row = per_round(run_dir)
            lines.append(f"| {task} | {protocol} | {row['rounds']} | {row['input_tokens_per_round']:.0f} | "
                         f"{row['prompt_chars_per_round']:.0f} | {row['grading_s_per_round']:.1f} | {row['llm_calls']} |")
    return lines


def main() -> int:
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-server-needs-no-key")  # the scripted server ignores it
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", default=None, help="write the tables as Markdown here too")
    ap.add_argument("--tasks-root", default=None)
    ap.add_argument("--task", action="append", default=[])
    ap.add_argument("--examples", default=str(REPO / "benchmarks/results/feedback-examples"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pesflow-feedback-bench-"))
    cache = work / "cache"
    root = work / "tasks"
    loop_package(root)
    out = ["## 1. Per protocol (toy package, its loop in the benchmark's form; fix_turns 1; "
           f"{args.rounds} rounds x 1 child)", "",
           "| protocol | input tokens / round | prompt chars / round | grading s / round | failing children | repaired in a fix turn | LLM calls |",
           "|---|---|---|---|---|---|---|"]
    rows = {}
    for protocol in PROTOCOLS:
        run_dir, _ = search(root, work / f"runs-{protocol}", cache, ErrorThenFix(), **{"search.feedback": protocol,
                            "loop.rounds": args.rounds, "loop.fix_turns": 1})
        r = rows[protocol] = per_round(run_dir)
        share = f"{r['repaired']}/{r['failing_children']}"
        out.append(f"| {protocol} | {r['input_tokens_per_round']:.0f} | {r['prompt_chars_per_round']:.0f} | "
                   f"{r['grading_s_per_round']:.2f} | {r['failing_children']} | {share} | {r['llm_calls']} |")
    e, b = rows["engineer"], rows["benchmark"]
    out += ["", f"engineer over benchmark: {e['input_tokens_per_round'] - b['input_tokens_per_round']:+.0f} input tokens "
            f"and {e['grading_s_per_round'] - b['grading_s_per_round']:+.2f} grading s per round.", ""]
    # 2. the stop rules' saved calls
    full, full_calls = search(root, work / "runs-full", cache, closed_at_once, **{"loop.rounds": args.rounds})
    early, early_calls = search(root, work / "runs-target", cache, closed_at_once, **{"loop.rounds": args.rounds, "loop.target": 50})
    fr, er = (json.loads((d / "run.json").read_text()) for d in (full, early))
    out += ["## 2. loop.target=50 on a search whose first child reaches it", "",
            "| run | rounds done | LLM calls | dev gradings | stopped by |", "|---|---|---|---|---|",
            f"| without a target | {fr['rounds_done']} | {full_calls} | {fr['totals']['scorings']['dev']} | {fr.get('stopped_by')} |",
            f"| loop.target=50 | {er['rounds_done']} | {early_calls} | {er['totals']['scorings']['dev']} | {er.get('stopped_by')} |", ""]
    if args.tasks_root and args.task:
        out += ["## 3. The benchmark's own packages, graded unchanged (what the model sees: "
                f"{Path(args.examples).relative_to(REPO) if Path(args.examples).is_relative_to(REPO) else args.examples})", "",
                "| package | protocol | rounds | input tokens / round | prompt chars / round | grading s / round | LLM calls |",
                "|---|---|---|---|---|---|---|"]
        out += examples(Path(args.tasks_root), args.task, args.rounds, Path(args.examples), cache, work)
    text = "\n".join(out)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
