"""Runs that survive anything: resume a stopped or killed run, replay a finished one offline.

Both rebuild the search from the run directory alone: run.json for the configuration and the
task, the last checkpoint for the population, the RNG and the memory, and the journal for
every LLM answer and every verdict already obtained, which are served again instead of being
paid or graded twice. The same seed and the same answers then give the same search.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from agent import graph
from agent.config import Config
from agent.gateway import Gateway, Recorded
from agent.journal import read as read_journal
from agent.progress import Progress
from agent.leak_guard import LeakGuard
from agent.run_store import RunDirError, RunStore
from agent.runner import make_clients
from agent.search import RecordedVerdicts, Search
from evaluator.grader import Evaluator
from evaluator.task import Task, TaskError, load_task


class RecordedOnly:
    """A client that can only be served from the record: replay never reaches a network."""

    def __init__(self, provider: str, model: str):
        self.provider, self.model = provider, model

    def complete(self, request: Any) -> Any:  # pragma: no cover - the gateway never calls it offline
        raise RuntimeError("replay makes no LLM call")


def load_run(run_dir: Path) -> tuple[dict[str, Any], Config, Task]:
    run_json = run_dir / "run.json"
    if not run_json.is_file():
        raise RunDirError(f"{run_dir} is not a pesflow run directory (no run.json); pass the folder `pesflow run` printed")
    run = json.loads(run_json.read_text())
    if "config" not in run or "task" not in run:
        raise RunDirError(f"{run_json} lacks its config or task (an imported trace?); it cannot be resumed or replayed")
    cfg = Config.model_validate(run["config"])
    try:
        task = load_task(run["task"]["path"])
    except TaskError as e:
        raise RunDirError(f"the run's task package is gone: {e}") from None
    return run, cfg, task


def _checkpoint(store: RunStore, from_round: int | None) -> dict[str, Any] | None:
    found = sorted(p for p in store.root.glob("checkpoints/round-*") if (p / "pesflow_state.json").is_file())
    if from_round is not None:
        found = [p for p in found if int(p.name.split("-")[1]) <= from_round]
    return json.loads((found[-1] / "pesflow_state.json").read_text()) if found else None


def answers_until(events: list[dict[str, Any]], round_: int) -> list[str]:
    """The model's answers of rounds up to `round_` (tags "r<k>/..."): what a resumed run's leak
    screen counts as the model's own text, as the uninterrupted run did by then."""
    out = []
    for e in events:
        d = e["data"]
        m = re.match(r"r(\d+)/", d.get("tag") or "") if e["kind"] == "llm_call" else None
        if m and int(m.group(1)) <= round_ and d.get("text"):
            out.append(d["text"])
    return out


def _search(cfg: Config, task: Task, store: RunStore, gateway: Gateway | None, quiet: bool, console: Console | None,
            recorded_verdicts: RecordedVerdicts, roots: list[str]) -> tuple[Search, Evaluator, Progress]:
    ev = Evaluator(cfg.evaluator, tasks_roots=roots, log_root=Path(cfg.run.out).resolve())
    progress = Progress(quiet=quiet, console=console, task=task.name, rounds=cfg.loop.rounds)
    search = Search(cfg, task, ev, store, gateway, progress=progress)
    search.recorded_verdicts = recorded_verdicts
    return search, ev, progress


def _start_state(search: Search, state: dict[str, Any] | None) -> dict[str, Any]:
    if state is None:  # killed before the baseline's checkpoint: start over, serving what was recorded
        return {"round": 0, "enter": "baseline"}
    search.restore(state)
    k = state["round"]
    if search.gw is None:
        return {"round": k, "enter": "finalize", "stop": "no_llm"}
    if k >= search.cfg.loop.rounds:
        return {"round": k, "enter": "finalize", "stop": "rounds_done"}
    return {"round": k + 1, "enter": "select"}


def resume_run(run_dir: Path, from_round: int | None = None, rounds: int | None = None,
               console: Console | None = None, quiet: bool | None = None) -> tuple[Path, str]:
    run_dir = run_dir.resolve()
    run, cfg, task = load_run(run_dir)
    if rounds is not None:
        cfg.loop.rounds = rounds
    store = RunStore(run_dir)  # also drops a journal line torn by the crash
    events = read_journal(store.root / "journal.jsonl")
    if task.content_hash != run["task"]["content_hash"]:
        store.journal.append("warning", message="the task package changed since the run started")
    clients = make_clients(cfg)
    state = _checkpoint(store, from_round)
    gateway = None
    if clients:
        gateway = Gateway(clients, store.journal, LeakGuard(task), max_tokens=cfg.llm.max_tokens,  # type: ignore[arg-type]
                          temperature=cfg.llm.temperature, top_p=cfg.llm.top_p, recorded=Recorded(events),
                          learned=answers_until(events, state["round"] if state else -1))
    store.journal.append("resume", from_round=state["round"] if state else None, rounds=cfg.loop.rounds)
    store.update_run(config=json.loads(cfg.model_dump_json()), status="running",
                     resumed=[*run.get("resumed", []), datetime.now(timezone.utc).isoformat(timespec="seconds")])
    search, ev, progress = _search(cfg, task, store, gateway, cfg.run.quiet if quiet is None else quiet, console,
                                   RecordedVerdicts(events), [])
    try:
        graph.run(search, _start_state(search, state))
    finally:
        progress.close()
        ev.close()
    return run_dir, store.read_json("run.json")["status"]


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
    store = RunStore(dest)
    store.update_run(**{k: v for k, v in run.items() if k in ("run_id", "pesflow", "task", "config", "seed", "grader",
                                                                "backend", "versions")},
                     replay_of=str(run_dir), status="running")
    models = {e["data"]["role"]: (e["data"]["provider"], e["data"]["model"]) for e in events if e["kind"] == "llm_call"}
    gateway = None
    if models:
        clients = {role: RecordedOnly(*pm) for role, pm in models.items()}
        clients["default"] = next(iter(clients.values()))
        if "repair" in clients and "executor" not in clients:
            clients["executor"] = clients["repair"]
        gateway = Gateway(clients, store.journal, LeakGuard(task), max_tokens=cfg.llm.max_tokens,  # type: ignore[arg-type]
                          temperature=cfg.llm.temperature, top_p=cfg.llm.top_p, recorded=Recorded(events), offline=True)
    store.journal.append("run_start", run_id=dest.name, task=task.name, seed=cfg.loop.seed, replay_of=str(run_dir))
    search, ev, progress = _search(cfg, task, store, gateway, cfg.run.quiet if quiet is None else quiet, console,
                                   RecordedVerdicts(events), [])
    if regrade:
        search.regrade = []
    try:
        graph.run(search)
    finally:
        progress.close()
        ev.close()
    comparisons = search.regrade or []
    if regrade:
        store.write_json("regrade.json", comparisons)
    return dest, store.read_json("run.json")["status"], comparisons
