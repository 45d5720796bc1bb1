"""Putting a run together from the configuration: task, evaluator, LLM clients, run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from agent import graph
from agent.config import Config
from agent.gateway import Gateway, Recorded
from agent.llm import Budget, PriceTable, RetryPolicy, make_client, parse_spec
from agent.progress import Progress
from agent.leak_guard import LeakGuard
from agent.run_store import RunStore
from agent.search import Search, new_run_dir, run_metadata
from evaluator.grader import Evaluator
from evaluator.benchmark import say_source
from evaluator.task import load_task

ROLES = ("planner", "executor", "summarizer")
HOW_TO_CONFIGURE = (
    "no LLM configured: pass --llm openai:MODEL (key in OPENAI_API_KEY; an OpenAI-compatible server via "
    "OPENAI_BASE_URL or --set llm.base_url=URL) or --llm anthropic:MODEL (key in ANTHROPIC_API_KEY)"
)


class NoLLMConfigured(Exception):
    def __init__(self, run_dir: Path):
        super().__init__(HOW_TO_CONFIGURE)
        self.run_dir = run_dir


def check_grader(task, grader: str) -> None:  # noqa: ANN001 - an evaluator.task.Task
    """A search driven by the dev engine needs one: refused at start, in one line, otherwise."""
    if grader == "dev" and not task.has_dev_engine():
        raise ValueError(f"{task.name} has no dev engine (environment/loop/score_engine.sh or private/*/test.sh) to drive a "
                         f"search; pass --grader hidden (each grading then spends one of the task's "
                         f"{task.max_submissions} submission(s), and run.json records how far over budget the run went)")


def apply_run_flags(cfg: Config, args: argparse.Namespace) -> Config:
    """Command-line flags win over the config files."""
    data = cfg.model_dump()
    if args.llm:
        parse_spec(args.llm)  # a bad spec is a one-line error now, not after the baseline
        data["llm"]["default"] = args.llm
    for flag, (section, key) in {"rounds": ("loop", "rounds"), "children": ("loop", "children"), "seed": ("loop", "seed"),
                                 "backend": ("evaluator", "backend"), "grader": ("evaluator", "grader"),
                                 "out": ("run", "out")}.items():
        if getattr(args, flag, None) is not None:
            data[section][key] = getattr(args, flag)
    if args.quiet:
        data["run"]["quiet"] = True
    return Config.model_validate(data)


def make_clients(cfg: Config) -> dict[str, object] | None:
    specs = {role: getattr(cfg.llm, role) or cfg.llm.default for role in ROLES}
    if not any(specs.values()):
        return None
    missing = [r for r, s in specs.items() if not s]
    if missing:
        raise ValueError(f"no model for role(s) {', '.join(missing)}: set llm.default or llm.{missing[0]}")
    budget = Budget(cfg.llm.max_usd)
    prices = PriceTable.load(cfg.llm.prices)
    retry = RetryPolicy(max_attempts=cfg.llm.max_attempts, backoff_base_s=cfg.llm.backoff_base_sec,
                        backoff_max_s=cfg.llm.backoff_max_sec, timeout_s=cfg.llm.timeout_sec)
    default_provider = parse_spec(cfg.llm.default)[0] if cfg.llm.default else None
    clients: dict[str, object] = {}
    for role, spec in specs.items():
        provider, _ = parse_spec(spec)
        base_url = getattr(cfg.llm, f"{provider}_base_url") or (cfg.llm.base_url if provider == default_provider else None)
        clients[role] = make_client(spec, base_url=base_url, retry=retry, budget=budget, prices=prices,
                                    **({"max_tokens_param": cfg.llm.max_tokens_param} if provider == "openai" else {}))
    clients["default"] = clients["executor"]
    return clients


def unpriced_models(cfg: Config, clients: dict[str, object]) -> list[str]:
    prices = PriceTable.load(cfg.llm.prices)
    return sorted({c.model for c in clients.values() if prices.lookup(c.model) is None})  # type: ignore[attr-defined]


def start_run(cfg: Config, task_name: str, roots: list[str], console: Console | None = None,
              run_dir: Path | None = None, recorded: Recorded | None = None) -> tuple[Path, str]:
    task = load_task(task_name, roots, cfg.benchmark.url)
    check_grader(task, cfg.evaluator.grader)
    say_source(task.name, task.root, task.source)
    out = Path(cfg.run.out).resolve()
    run_dir = run_dir or new_run_dir(out, task, cfg.loop.seed)
    clients = make_clients(cfg)
    store = RunStore.create(run_dir, run_metadata(cfg, task, run_dir.name))
    store.journal.append("run_start", run_id=run_dir.name, task=task.name, seed=cfg.loop.seed,
                         grader=cfg.evaluator.grader, models={r: getattr(c, "model", None) for r, c in (clients or {}).items()})
    ev = Evaluator(cfg.evaluator, tasks_roots=roots, log_root=out, official_url=cfg.benchmark.url)
    gateway = None
    progress = Progress(quiet=cfg.run.quiet, console=console, task=task.name, rounds=cfg.loop.rounds)
    if clients:
        for model in unpriced_models(cfg, clients):
            if cfg.llm.max_usd is not None:
                msg = f"model {model} has no price in the table: the USD cap cannot limit it (add it to configs/prices.yaml)"
                store.journal.append("warning", message=msg)
                progress.console.print(f"warning: {msg}", highlight=False, soft_wrap=True)
        gateway = Gateway(clients, store.journal, LeakGuard(task), max_tokens=cfg.llm.max_tokens,  # type: ignore[arg-type]
                          temperature=cfg.llm.temperature, top_p=cfg.llm.top_p, recorded=recorded)
    search = Search(cfg, task, ev, store, gateway, progress=progress)
    try:
        graph.run(search)
    finally:
        progress.close()
        ev.close()
    status = store.read_json("run.json")["status"]
    if status == "no_llm":
        raise NoLLMConfigured(run_dir)
    return run_dir, status
