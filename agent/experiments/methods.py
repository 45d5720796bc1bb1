"""The methods of a baselines matrix: what each kind means as configuration, and running one
cell of it (the evaluator alone for noop and oracle, a search for the others)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent.config import Config
from agent.population.database import Population, PopulationConfig
from agent.population.loongflow_format import loongflow_files
from agent.rundir.schema import STATE_FILE, Event, flagged, run_metadata
from agent.rundir.store import RunStore
from agent.search.steps import solution_from
from evaluator.candidate import Candidate, CandidateError, apply_diff, candidate_hash
from evaluator.evaluation import Evaluator
from evaluator.modes import artifacts
from evaluator.task import Task

FINISHED = ("finished", "budget_exhausted")  # a run that ended cleanly: never run again
EVALUATOR_ONLY = ("noop", "oracle")
MethodKind = Literal["noop", "oracle", "single_shot", "best_of_n", "loop", "no_summarizer", "uniform_parent",
                     "one_island", "whole_file"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Method(_Strict):
    kind: MethodKind
    n: int | None = Field(None, ge=1, le=32)  # best_of_n: how many independent answers
    rounds: int | None = Field(None, ge=1, le=1000)  # loop and its ablations; default: the config's loop.rounds
    grader: Literal["dev", "hidden"] = "hidden"  # noop, oracle: the grader that scores them
    set: dict[str, Any] = Field(default_factory=dict)  # config overrides for this method only (default.yaml keys)

    @model_validator(mode="after")
    def _fits_kind(self) -> Method:
        if self.kind == "best_of_n" and self.n is None:
            raise ValueError("kind best_of_n needs n (how many answers), e.g. n: 8")
        if self.kind != "best_of_n" and self.n is not None:
            raise ValueError(f"n is only for kind best_of_n, not {self.kind}; remove it")
        if self.rounds is not None and self.kind in (*EVALUATOR_ONLY, "single_shot", "best_of_n"):
            raise ValueError("rounds is only for the loop and its ablations, not "
                             f"{self.kind} (one round by definition)")
        return self

    @property
    def uses_llm(self) -> bool:
        return self.kind not in EVALUATOR_ONLY



def kind_overrides(m: Method) -> dict[str, Any]:
    """The config a method's kind means, as default.yaml keys."""
    # one answer per child, as the method's name says: no fix turn, no second ask for a duplicate
    no_roles = {"use_planner": False, "use_summarizer": False, "fix_turns": 0, "resample_duplicates": 0}
    loop: dict[str, Any] = {"rounds": m.rounds} if m.rounds else {}
    return {
        "noop": {}, "oracle": {},
        "single_shot": {"loop": {"rounds": 1, "children": 1, **no_roles}},
        "best_of_n": {"loop": {"rounds": 1, "children": m.n, **no_roles}},
        "loop": {"loop": loop},
        "no_summarizer": {"loop": {**loop, "use_summarizer": False}},
        "uniform_parent": {"loop": loop, "population": {"exploration_ratio": 1.0, "exploitation_ratio": 0.0}},
        "one_island": {"loop": loop, "population": {"islands": 1}},
        "whole_file": {"loop": {**loop, "edit_format": "whole_file"}},
    }[m.kind]



def run_evaluator_cell(cfg: Config, task: Task, kind: str, grader: str, roots: list[str], d: Path) -> None:
    """noop or oracle: one grading, recorded as a one-candidate run (run.json, journal, checkpoint, final/)."""
    t0 = time.monotonic()
    meta = run_metadata(json.loads(cfg.model_dump_json()), task, d.name, cfg.loop.seed, grader, cfg.evaluator.backend)
    store = RunStore.create(d, {**meta, "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                "status": "running"})
    store.journal.append(Event.run_start, run_id=d.name, task=task.name, seed=cfg.loop.seed, grader=grader, models={},
                         method=kind)
    ev = Evaluator(cfg.evaluator, tasks_roots=roots, log_root=d / "evaluations", official_url=cfg.benchmark.url)
    try:
        prepared = ev.prepare(task)
        baseline = {rel: ev.backend.baseline_text(prepared, rel) or "" for rel in task.scope}
        files, note = dict(baseline), "The unchanged baseline, graded alone."
        if kind == "oracle":  # the reviewer's files, for the record (the grader applies the patch itself)
            artifact = next(iter(artifacts(task, "oracle")), None)
            note = f"The reviewer's solution ({artifact.name if artifact else 'none shipped'}), graded alone."
            try:
                if artifact is not None and artifact.suffix == ".patch":
                    after = apply_diff(artifact.read_text(), dict(baseline))
                    files.update({rel: text for rel, text in after.items() if text is not None and rel in baseline})
                elif artifact is not None and len(task.scope) == 1:
                    files[task.scope[0]] = artifact.read_text()
            except CandidateError as e:
                note += f" (its files could not be reconstructed here: {e})"
        h = candidate_hash(files, baseline)
        v = ev.evaluate(task, mode=kind, grader=grader, out_dir=store.evaluation_dir(h, kind))  # type: ignore[arg-type]
    finally:
        ev.close()
    verdict = v.model_dump(mode="json", exclude={"raw"})
    store.journal.append(Event.verdict, content_hash=h, label=kind, grader=grader, verdict=verdict)
    sol = solution_from(v, id=kind, parent_id=None, island=0, round=0, files=files, content_hash=h, lessons=note)
    pop = Population(PopulationConfig(islands=1), baseline)
    pop.add(sol)
    store.journal.append(Event.candidate, id=kind, round=0, parent_id=None, content_hash=h, status=sol.status)
    scorings = {"dev": int(grader == "dev"), "hidden": int(grader == "hidden")}
    totals = {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0, "evaluations": 1,
              "scorings": {**scorings, "task_budget": task.max_submissions,
                           "hidden_over_budget": scorings["hidden"] > task.max_submissions},
              "grading_seconds": v.seconds, "elapsed_seconds": round(time.monotonic() - t0, 3)}
    best_by_round = [{"round": 0, "best_id": kind, "speedup": v.speedup}] if v.is_result else [
        {"round": 0, "best_id": None, "speedup": None}]  # a suspect's figure is no curve's point
    if v.is_result and not v.speedup and v.dev is not None:  # a dev engine that gave no speedup: its own figure
        best_by_round[0]["dev"] = {"value": v.dev.value, "kind": v.dev.kind}
    state = {"round": 0, "next_round": 1, "population": pop.to_dict(), "memory": [], "best_by_round": best_by_round,
             "totals": totals}
    files_out = loongflow_files(pop, iteration=0, extra_metadata={"task": task.name, "pesflow_round": 0})
    store.write_checkpoint(0, {**files_out, STATE_FILE: state})
    store.write("final/candidate.patch", Candidate(files=files).diff(baseline))
    store.write_json("final/verdict.json" if grader == "dev" else "final/hidden_verdict.json", verdict)
    best = {"id": kind, "content_hash": h, "speedup": v.speedup, "reward": v.reward, "grader": grader,
            "status": v.status.value, "hard_fail_reasons": v.hard_fail_reasons,
            "trust": v.trust.model_dump(mode="json")}
    store.journal.append(Event.final, stop="evaluated", best=best)
    store.update_run(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"), totals=totals, rounds_done=0,
                     best_by_round=best_by_round, suspects=flagged(store.journal.events()), status="finished",
                     best=best)
    store.journal.append(Event.run_end, status="finished")


