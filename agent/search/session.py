"""A run put together: start, resume and replay share one construction.

Each builds the same things (the task, the evaluator, the LLM clients and their gateway, the
progress display, the search) and differs only in where it starts: a new run directory, the
last checkpoint of a stopped one (serving every recorded answer and verdict again instead of
paying or grading twice), or a copy of a finished one answered from its journal alone (no
network; with --regrade every candidate graded again and compared).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.config import Config
from agent.llm import Budget, PriceTable, RetryPolicy, make_client, parse_spec
from agent.llm.gateway import Gateway, ModelUnreachable, Recorded
from agent.llm.leak_guard import LeakGuard
from agent.rundir.faults import MachineFault, is_machine
from agent.rundir.journal import read as read_journal
from agent.rundir.schema import Event, journal_totals, new_run_dir, run_metadata
from agent.rundir.store import RunDirError, RunStore
from agent.search import graph
from agent.search.grading import RecordedVerdicts
from agent.search.progress import Progress
from agent.search.protocol import Protocol, named
from agent.search.steps import Search
from evaluator.backends.base import InfraError
from evaluator import ceilings
from evaluator.benchmark import say_source
from evaluator.evaluation import Evaluator
from evaluator.task import Task, TaskError, load_task

ROLES = ("planner", "executor", "summarizer")
HOW_TO_CONFIGURE = (
    "no LLM configured: pass --llm openai:MODEL (key in OPENAI_API_KEY; an OpenAI-compatible server via "
    "OPENAI_BASE_URL or --set llm.base_url=URL) or --llm anthropic:MODEL (key in ANTHROPIC_API_KEY)"
)


class NoLLMConfigured(Exception):
    def __init__(self, run_dir: Path):
        super().__init__(HOW_TO_CONFIGURE)
        self.run_dir = run_dir


def check_grader(task: Task, grader: str) -> None:
    """A search driven by the dev engine needs one: refused at start, in one line, otherwise."""
    if grader == "dev" and not task.has_dev_engine():
        raise ValueError(f"{task.name} has no dev engine (environment/loop/score_engine.sh or "
                         "private/*/test.sh) to drive a search; pass --grader hidden (each grading "
                         f"then spends one of the task's {task.max_submissions} submission(s), and run.json records "
                         "how far over budget the run went)")


def apply_run_flags(cfg: Config, args: argparse.Namespace) -> Config:
    """Command-line flags win over the config files."""
    data = cfg.model_dump()
    if args.llm:
        parse_spec(args.llm)  # a bad spec is a one-line error now, not after the baseline
        data["llm"]["default"] = args.llm
    for flag, (section, key) in {"rounds": ("loop", "rounds"), "children": ("loop", "children"),
                                 "seed": ("loop", "seed"), "backend": ("evaluator", "backend"),
                                 "grader": ("evaluator", "grader"), "out": ("run", "out")}.items():
        if getattr(args, flag, None) is not None:
            data[section][key] = getattr(args, flag)
    if args.quiet:
        data["run"]["quiet"] = True
    return Config.model_validate(data)


def make_clients(cfg: Config, spent_usd: float = 0.0) -> dict[str, object] | None:
    """One client per role, sharing one USD cap (`spent_usd`: what the run paid before a resume)."""
    specs = {role: getattr(cfg.llm, role) or cfg.llm.default for role in ROLES}
    if not any(specs.values()):
        return None
    missing = [r for r, s in specs.items() if not s]
    if missing:
        raise ValueError(f"no model for role(s) {', '.join(missing)}: set llm.default or llm.{missing[0]}")
    budget = Budget(cfg.llm.max_usd, spent_usd)
    prices = PriceTable.load(cfg.llm.prices)
    retry = RetryPolicy(max_attempts=cfg.llm.max_attempts, backoff_base_s=cfg.llm.backoff_base_sec,
                        backoff_max_s=cfg.llm.backoff_max_sec, timeout_s=cfg.llm.timeout_sec)
    default_provider = parse_spec(cfg.llm.default)[0] if cfg.llm.default else None
    clients: dict[str, object] = {}
    for role, spec in specs.items():
        provider, _ = parse_spec(spec)
        base_url = (getattr(cfg.llm, f"{provider}_base_url")
                    or (cfg.llm.base_url if provider == default_provider else None))
        clients[role] = make_client(spec, base_url=base_url, retry=retry, budget=budget, prices=prices,
                                    **({"max_tokens_param": cfg.llm.max_tokens_param} if provider == "openai" else {}))
    clients["default"] = clients["executor"]
    by_spec = {getattr(c, "provider", "") + ":" + getattr(c, "model", ""): c for c in list(clients.values())}
    # a role's bandit: one client a model
    for spec in dict.fromkeys(s for specs in cfg.llm.models.values() for s in specs):
        provider, _ = parse_spec(spec)
        base_url = (getattr(cfg.llm, f"{provider}_base_url")
                    or (cfg.llm.base_url if provider == default_provider else None))
        clients[f"model:{spec}"] = by_spec.get(spec) or make_client(
            spec, base_url=base_url, retry=retry, budget=budget, prices=prices,
            **({"max_tokens_param": cfg.llm.max_tokens_param} if provider == "openai" else {}))
    return clients


def check_keys(clients: dict[str, object]) -> None:
    """A model without its key is refused before a run directory exists (one line naming the fix)."""
    for c in dict.fromkeys(clients.values()):
        if hasattr(c, "_api_key") and not getattr(c, "_api_key"):
            raise ValueError(f"{c.provider}:{c.model}: no API key; set {c.key_env} "  # type: ignore[attr-defined]
                             "(any non-empty value for a local "
                             "server that ignores keys), or pick another model with --llm")


def unpriced_models(cfg: Config, clients: dict[str, object]) -> list[str]:
    prices = PriceTable.load(cfg.llm.prices)
    return sorted({c.model for c in clients.values() if prices.lookup(c.model) is None})  # type: ignore[attr-defined]


class RecordedOnly:
    """A client that can only be served from the record: replay never reaches a network."""

    def __init__(self, provider: str, model: str):
        self.provider, self.model = provider, model

    def complete(self, request: Any) -> Any:  # pragma: no cover - the gateway never calls it offline
        raise RuntimeError("replay makes no LLM call")


@dataclass
class Session:
    """What a run is made of, built once by `assemble`."""

    search: Search
    evaluator: Evaluator
    progress: Progress
    store: RunStore

    def run(self, start: dict[str, Any] | None = None) -> str:
        try:
            graph.run(self.search, start)
        except ModelUnreachable as e:
            # no retry cures it: stop now, resumable once fixed (the last checkpoint stands)
            self._stop()
            self.store.journal.append(Event.run_end, status="stopped", error=str(e))
            self.store.update_run(status="stopped", error=str(e), totals=self.search.totals(),
                                  utilization=self.search.utilization())
            e.run_dir = self.store.root  # type: ignore[attr-defined]
            raise
        except InfraError as e:
            # the machinery cannot grade at all (the sandbox cannot start, an engine is down) even
            # after its retries: the command says so in one line (exit 3); resumable once fixed
            self._stop()
            e.run_dir = self.store.root  # type: ignore[attr-defined]
            raise
        except (MachineFault, OSError) as e:
            if isinstance(e, OSError) and not is_machine(e):
                raise
            # the disk refused a write (here, or in the evaluator's cache): stop every thread now and
            # write nothing more (run.json still says running, the last checkpoint stands, so
            # `pesflow resume` goes on from it)
            self._stop()
            if isinstance(e, MachineFault):
                raise
            raise MachineFault(e.filename or Path(self.search.ev.config.local.cache_dir).expanduser(), e,
                               self.store.root) from None
        finally:
            self.progress.close()
            self.evaluator.close()
        return self.store.read_json("run.json")["status"]

    def _stop(self) -> None:
        """Every thread of the search stopped, its results unread (the run is ending early)."""
        if self.search.gw is not None:
            self.search.gw.closing = True  # type: ignore[union-attr]
        self.search.pipeline.abandon(timeout_s=10)
        if self.search.pool is not None:
            self.search.pool.close()


def assemble(cfg: Config, task: Task, store: RunStore, roots: list[str], clients: dict[str, object] | None,
             console: Console | None = None, quiet: bool | None = None,
             events: list[dict[str, Any]] = (),  # type: ignore[assignment]
             offline: bool = False, learned: list[str] = (), warn_unpriced: bool = False,  # type: ignore[assignment]
             machine: str | None = None) -> Session:
    """The one construction: evaluator, gateway (leak guard, record, budget), progress, search.
    `machine`: the prompts' machine section as the run recorded it (a resume, a replay: the same
    prompts on any machine); None: made now (a new run)."""
    ev = Evaluator(cfg.evaluator, tasks_roots=roots, log_root=Path(cfg.run.out).resolve(),
                   official_url=cfg.benchmark.url)
    progress = Progress(quiet=cfg.run.quiet if quiet is None else quiet, console=console, task=task.name,
                        rounds=cfg.loop.rounds)
    gateway = None
    if clients:
        if warn_unpriced and cfg.llm.max_usd is not None:
            for model in unpriced_models(cfg, clients):
                msg = (f"model {model} has no price in the table: the USD cap cannot limit it "
                       "(add it to configs/prices.yaml)")
                store.journal.append(Event.warning, message=msg)
                progress.console.print(f"warning: {msg}", highlight=False, soft_wrap=True)
        gateway = Gateway(clients, store.journal, LeakGuard(task),  # type: ignore[arg-type]
                          max_tokens=cfg.llm.max_tokens, temperature=cfg.llm.temperature, top_p=cfg.llm.top_p,
                          recorded=Recorded(list(events)) if events else None, offline=offline, learned=list(learned),
                          models=cfg.llm.models, explore=cfg.llm.bandit_explore, history=list(events))
    shown = named(cfg.search.feedback)  # the run's protocol, chosen here once
    search = Search(cfg.loop, cfg.population, cfg.evaluator.grader, task, ev, store, gateway, progress=progress,
                    protocol=shown)
    search.grading.recorded = RecordedVerdicts(list(events))
    search.grading.count_recorded(list(events))
    facts = machine_facts(cfg, shown, task)
    search.ctx.machine = machine_section(cfg, shown, facts) if machine is None else machine
    search.grading.profile_facts = (facts or {}) if shown.profiles else None
    store.update_run(machine=search.ctx.machine)
    return Session(search, ev, progress, store)


def machine_facts(cfg: Config, shown: Protocol, task: Task) -> dict[str, Any] | None:
    """The grading machine's facts and ceilings, where the protocol shows the machine or profiles:
    measured here once per device and cached (evaluator/ceilings.py) where the backend grades on
    this machine, else None."""
    if not (shown.machine or shown.profiles) or cfg.evaluator.backend not in ("local", "docker"):
        return None
    return ceilings.facts("cuda" if task.gpus else "cpu", Path(cfg.evaluator.local.cache_dir).expanduser())


def machine_section(cfg: Config, shown: Protocol, facts: dict[str, Any] | None) -> str:
    """The grading machine and its ceilings as a prompt section, where the protocol shows it."""
    if not shown.machine:
        return ""
    if cfg.evaluator.backend in ("local", "docker"):
        lines = ceilings.describe(facts)
    else:
        lines = [f"(not measured: the gradings run on the {cfg.evaluator.backend} backend's machines)"]
    return "\n# The machine the grader runs on\n" + "\n".join(f"- {ln}" for ln in lines) + "\n"


def start_run(cfg: Config, task_name: str, roots: list[str], console: Console | None = None,
              run_dir: Path | None = None) -> tuple[Path, str]:
    task = load_task(task_name, roots, cfg.benchmark.url)
    check_grader(task, cfg.evaluator.grader)
    say_source(task.name, task.root, task.source)
    run_dir = run_dir or new_run_dir(Path(cfg.run.out).resolve(), task.bench, task.dir, cfg.loop.seed)
    clients = make_clients(cfg)
    if clients:
        check_keys(clients)
    meta = run_metadata(json.loads(cfg.model_dump_json()), task, run_dir.name, cfg.loop.seed, cfg.evaluator.grader,
                        cfg.evaluator.backend)
    store = RunStore.create(run_dir, meta)
    store.journal.append(Event.run_start, run_id=run_dir.name, task=task.name, seed=cfg.loop.seed,
                         grader=cfg.evaluator.grader,
                         models={r: getattr(c, "model", None) for r, c in (clients or {}).items()})
    status = assemble(cfg, task, store, roots, clients, console, warn_unpriced=True).run()
    if status == "no_llm":
        raise NoLLMConfigured(run_dir)
    return run_dir, status


def load_run(run_dir: Path) -> tuple[dict[str, Any], Config, Task]:
    run_json = run_dir / "run.json"
    if not run_json.is_file():
        raise RunDirError(f"{run_dir} is not a pesflow run directory (no run.json); pass "
                          "the folder `pesflow run` printed")
    run = json.loads(run_json.read_text())
    if "config" not in run or "task" not in run:
        raise RunDirError(f"{run_json} lacks its config or task (an imported trace?); it cannot be resumed or replayed")
    cfg = Config.model_validate(run["config"])
    try:
        task = load_task(run["task"]["path"], official_url=cfg.benchmark.url)
    except TaskError as e:
        raise RunDirError(f"the run's task package is gone: {e}") from None
    return run, cfg, task


def answers_until(events: list[dict[str, Any]], round_: int) -> list[str]:
    """The model's answers of rounds up to `round_` (tags "r<k>/..."): what a resumed run's leak
    screen counts as the model's own text, as the uninterrupted run did by then."""
    out = []
    for e in events:
        d = e["data"]
        m = re.match(r"r(\d+)/", d.get("tag") or "") if e["kind"] == Event.llm_call else None
        if m and int(m.group(1)) <= round_ and d.get("text"):
            out.append(d["text"])
    return out


def _start_state(search: Search, state: dict[str, Any] | None) -> dict[str, Any]:
    if state is None:  # killed before the baseline's checkpoint: start over, serving what was recorded
        return {"round": 0, "enter": "baseline"}
    search.restore(state)
    k = state["round"]
    if search.gw is None:
        return {"round": k, "enter": "finalize", "stop": "no_llm"}
    if k >= search.loop.rounds:
        return {"round": k, "enter": "finalize", "stop": "rounds_done"}
    return {"round": k + 1, "enter": "launch"}


def resume_run(run_dir: Path, from_round: int | None = None, rounds: int | None = None,
               console: Console | None = None, quiet: bool | None = None,
               max_usd: float | None = None) -> tuple[Path, str]:
    run_dir = run_dir.resolve()
    run, cfg, task = load_run(run_dir)
    if rounds is not None:
        cfg.loop.rounds = rounds
    if max_usd is not None:  # the cap is the whole run's: raise it to go on after budget_exhausted
        cfg.llm.max_usd = max_usd
    store = RunStore(run_dir)  # also cuts a journal line torn by the crash
    for note in store.recover():  # said in one line each, and journaled
        store.journal.append(Event.warning, message=note)
        print(f"pesflow resume: warning: {note}", file=sys.stderr)
    events = read_journal(store.root / "journal.jsonl")
    if task.content_hash != run["task"]["content_hash"]:
        store.journal.append(Event.warning, message="the task package changed since the run started")
    state = store.latest_state(from_round)
    store.journal.append(Event.resume, from_round=state["round"] if state else None, rounds=cfg.loop.rounds)
    store.update_run(config=json.loads(cfg.model_dump_json()), status="running",
                     resumed=[*run.get("resumed", []), datetime.now(timezone.utc).isoformat(timespec="seconds")])
    clients = make_clients(cfg, spent_usd=journal_totals(events)["usd"])
    if clients:
        check_keys(clients)
    session = assemble(cfg, task, store, [], clients, console, quiet, events,
                       learned=answers_until(events, state["round"] if state else -1), machine=run.get("machine", ""))
    return run_dir, session.run(_start_state(session.search, state))


def replay_run(run_dir: Path, out: Path | None = None, regrade: bool = False, console: Console | None = None,
               quiet: bool | None = None) -> tuple[Path, str, list[dict[str, Any]]]:
    """The whole search again from the journal's answers (no network); with `regrade`, every
    candidate graded again and compared with its recorded verdict."""
    run_dir = run_dir.resolve()
    run, cfg, task = load_run(run_dir)
    events = read_journal(run_dir / "journal.jsonl")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    dest = (out or run_dir.parent / f"{run_dir.name}-replay-{stamp}").resolve()
    if dest.exists() and any(dest.iterdir()):
        raise RunDirError(f"{dest} already exists and is not empty; pass another --out")
    kept = {k: v for k, v in run.items() if k in ("run_id", "pesflow", "task", "config", "seed", "grader", "backend",
                                                  "versions")}
    store = RunStore.create(dest, {**kept, "replay_of": str(run_dir), "status": "running"})
    models = {e["data"]["role"]: (e["data"]["provider"], e["data"]["model"])
              for e in events if e["kind"] == Event.llm_call}
    clients: dict[str, object] | None = None
    if models:
        clients = {role: RecordedOnly(*pm) for role, pm in models.items()}
        clients["default"] = next(iter(clients.values()))
        for pm in {(e["data"]["provider"], e["data"]["model"]) for e in events if e["kind"] == Event.llm_call}:
            clients[f"model:{pm[0]}:{pm[1]}"] = RecordedOnly(*pm)
        if "repair" in clients and "executor" not in clients:
            clients["executor"] = clients["repair"]
    store.journal.append(Event.run_start, run_id=dest.name, task=task.name, seed=cfg.loop.seed, replay_of=str(run_dir))
    session = assemble(cfg, task, store, [], clients, console, quiet, events, offline=True,
                       machine=run.get("machine", ""))
    if regrade:
        session.search.grading.regrade = []
    status = session.run()
    comparisons = session.search.grading.regrade or []
    if regrade:
        store.write_json("regrade.json", comparisons)
    return dest, status, comparisons
