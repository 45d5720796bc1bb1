"""What the prompt cache saves a search: the same scripted search on a bundled package's real
prompts, with the code under test and with the code of an earlier revision (`--before`), each
run's requests then priced by one model of each provider's cache (tests/llm_cache.py):

- OpenAI (automatic): a request's longest prefix that an earlier request shared is read from
  the cache, in blocks of 128 tokens once it reaches 1024; priced at gpt-4.1's rates.
- Anthropic (explicit): only what the request marks (Message.breaks, sent as cache_control by
  agent/llm/anthropic_provider.py) is written and read; priced at claude-sonnet-4-6's rates
  (a read 0.1x the input rate, a write 1.25x).

Tokens are characters / 4 (the scripted server's count). The model proposes the parent's own
scope files with one new line (each child a new program, graded), plans one line and summarizes in
JSON, so the prompts are the package's and pesflow's own, grown round by round as in a search.

    python3 benchmarks/prompt_cache.py [--task kfc/wre-router-power-of-two-choices-loop16] \
        [--rounds 16] [--children 2] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def proposer():
    """Executors answer with the parent's scope files and one new line; the planner with a line;
    the summarizer with JSON naming the children it was shown."""
    from tests.llm_server import Reply  # the revision's own (run under --code); so no variant_line, which it may lack
    n = [0]

    def reply(req):
        user = req.messages[-1]["content"]
        if "You are the summarizer" in user:
            ids = re.findall(r"^## (r\d\d-c\d+(?:-f\d+)?):", user, re.M)
            return Reply(text=json.dumps({"children": {i: "kept the parent's speed" for i in ids}, "memory": ["comments change nothing"]}))
        if "You are the planner" in user:
            return Reply(text="Keep the algorithm; tidy the code.")
        scope = [s.strip() for s in re.search(r"Files you may change: (.*)", user).group(1).split(",")]
        code: dict[str, str] = {}
        for path, body in re.findall(r"^### (\S+)\n```\w*\n(.*?)\n```", user, re.M | re.S):
            if path in scope and path not in code:
                code[path] = body
        n[0] += 1
        return Reply(text="".join(f"{p}\n```\n{c.rstrip()}\n{_variant_line(p, n[0])}\n```\n" for p, c in code.items()))
    return reply


def _variant_line(path: str, n: int) -> str:
    """A line that makes the file another program (a comment would be a near-duplicate, not graded)."""
    return f"_pesflow_variant = {n}" if path.endswith(".py") else f"# variant {n}"


def run(args: argparse.Namespace) -> int:
    """One scripted search with the code at --code (its first place on sys.path): prints its run folder."""
    sys.path.insert(0, args.code)
    from agent.config import load_config
    from agent.search.session import start_run
    from tests.llm_server import ScriptedLLMServer
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-server-needs-no-key")
    with ScriptedLLMServer(proposer()) as server:
        cfg = load_config(sets=["llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}",
                                f"loop.rounds={args.rounds}", f"loop.children={args.children}", f"run.out={args.out}",
                                "run.quiet=true", f"evaluator.local.cache_dir={args.cache}", "llm.timeout_sec=30",
                                "loop.score_final_with_hidden=false", "evaluator.trust.probes=false"])
        run_dir, status = start_run(cfg, args.task, [args.tasks_root])
    print(json.dumps({"run_dir": str(run_dir), "status": status}))
    return 0


def priced(run_dir: Path) -> dict[str, float]:
    """The run's requests through both cache models, per round."""
    sys.path.insert(0, str(REPO))
    from agent.llm.anthropic_provider import cached_messages
    from agent.llm.pricing import PriceTable, usd_of
    from agent.llm.types import Message, Usage
    from tests.llm_cache import PromptCache, tokens
    prices = PriceTable.load()
    gpt, claude = prices.lookup("gpt-4.1"), prices.lookup("claude-sonnet-4-6")
    openai_cache, anthropic_cache = PromptCache(), PromptCache()
    out = {"requests": 0, "input": 0, "openai_read": 0, "anthropic_read": 0, "anthropic_write": 0,
           "usd_openai": 0.0, "usd_openai_plain": 0.0, "usd_anthropic": 0.0, "usd_anthropic_plain": 0.0}
    rounds = set()
    for line in (run_dir / "journal.jsonl").read_text().splitlines():
        e = json.loads(line)
        d = e["data"]
        if e["kind"] != "llm_call" or d.get("text") is None:
            continue
        rounds.add(str(d.get("tag", "")).split("/")[0])
        msgs = [Message(**m) for m in d["messages"]]
        n_in = tokens(sum(len(m.content) for m in msgs))
        n_out = int((d.get("usage") or {}).get("output_tokens") or 0)
        o_read = min(openai_cache.openai("m", [{"role": m.role, "content": m.content} for m in msgs]), n_in)
        body = {"model": "m", "system": next((m.content for m in msgs if m.role == "system"), ""),
                "messages": cached_messages([m for m in msgs if m.role != "system"])}
        a_read, a_write = anthropic_cache.anthropic(body)
        out["requests"] += 1
        out["input"] += n_in
        out["openai_read"] += o_read
        out["anthropic_read"] += a_read
        out["anthropic_write"] += a_write
        out["usd_openai"] += usd_of(gpt, Usage(input_tokens=n_in, output_tokens=n_out, cache_read_tokens=o_read))
        out["usd_openai_plain"] += usd_of(gpt, Usage(input_tokens=n_in, output_tokens=n_out))
        out["usd_anthropic"] += usd_of(claude, Usage(input_tokens=n_in, output_tokens=n_out, cache_read_tokens=a_read,
                                                     cache_write_tokens=a_write))
        out["usd_anthropic_plain"] += usd_of(claude, Usage(input_tokens=n_in, output_tokens=n_out))
    out["rounds"] = len(rounds - {"r0"}) or 1
    return out


def searched(code: Path, args: argparse.Namespace, name: str, work: Path) -> Path:
    cmd = [sys.executable, str(Path(__file__).resolve()), "run", "--code", str(code), "--tasks-root", args.tasks_root,
           "--task", args.task, "--rounds", str(args.rounds), "--children", str(args.children),
           "--out", str(work / name), "--cache", str(work / "cache")]
    done = subprocess.run(cmd, cwd=code, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(code)})
    if done.returncode != 0:
        raise SystemExit(f"prompt_cache: the {name} search failed:\n{done.stderr[-2000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if got["status"] != "finished":
        raise SystemExit(f"prompt_cache: the {name} search ended {got['status']}")
    return Path(got["run_dir"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("verb", nargs="?", default="compare", choices=("compare", "run"))
    ap.add_argument("--tasks-root", default=str(REPO / "tasks"))
    ap.add_argument("--task", default="kfc/wre-router-power-of-two-choices-loop16")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--before", default=None, help="a git revision whose prompts to compare against (its own worktree)")
    ap.add_argument("--code", default=str(REPO), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.verb == "run":
        return run(args)
    work = Path(tempfile.mkdtemp(prefix="pesflow-prompt-cache-"))
    codes = {"this code": REPO}
    if args.before:
        tree = work / "before"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), args.before], check=True, capture_output=True)
        codes = {f"before ({args.before})": tree, **codes}
    print(f"{args.task}: {args.rounds} scripted rounds, {args.children} executors a round; tokens = characters / 4")
    print("| prompts of | requests | input tokens / round | OpenAI: cached share | gpt-4.1 USD / round | "
          "Anthropic: cached share (written) | claude-sonnet-4-6 USD / round | without a cache |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        for name, code in codes.items():
            f = priced(searched(code, args, re.sub(r"\W+", "-", name), work))
            r = f["rounds"]
            print(f"| {name} | {f['requests']} | {f['input'] / r:.0f} | {f['openai_read'] / f['input']:.1%} | "
                  f"{f['usd_openai'] / r:.4f} | {f['anthropic_read'] / f['input']:.1%} ({f['anthropic_write'] / f['input']:.1%}) | "
                  f"{f['usd_anthropic'] / r:.4f} | gpt-4.1 {f['usd_openai_plain'] / r:.4f}, claude {f['usd_anthropic_plain'] / r:.4f} |")
    finally:
        if args.before:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(work / "before")], capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
