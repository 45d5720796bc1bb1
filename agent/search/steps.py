"""One search run: the state it carries from round to round, and what each step does to it.

The steps (select, plan, execute, evaluate, summarize, record, finalize) are wired into a
LangGraph graph by agent/graph.py; each is a method here that reads the round state and
returns the fields it sets. Everything that must survive a crash is checkpointed at the end
of every round (record), and every event is journaled as it happens.
"""

from __future__ import annotations

import hashlib
import json
import platform
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

from agent import faults, roles
from agent.config import Config
from agent.gateway import BudgetExhausted, Gateway
from agent.population import Population, Solution, write_dir_atomically
from agent.progress import Progress
from agent.run_store import RunStore
from evaluator.candidate import Candidate
from evaluator.grader import CandidateSource, Evaluator
from evaluator.task import Task
from evaluator.verdict import Status, Verdict, code_reasons

VERSION = "0.1.0"
def journal_totals(events: list[dict[str, Any]]) -> dict[str, Any]:
    """LLM use and gradings of a run, each paid call and each grading counted once."""
    t: dict[str, Any] = {"llm_calls": 0, "failed_llm_calls": 0, "replayed_llm_calls": 0, "input_tokens": 0,
                         "output_tokens": 0, "usd": 0.0, "llm_seconds": 0.0, "calls_by_role": {},
                         "evaluations": 0, "reused_verdicts": 0, "duplicates_not_regraded": 0,
                         "scorings": {"dev": 0, "hidden": 0}, "grading_seconds": 0.0}
    for e in events:
        d = e["data"]
        if e["kind"] == "llm_call":
            if d.get("replayed"):
                t["replayed_llm_calls"] += 1
                continue
            if d.get("error_kind") in ("leak", "not_recorded", "budget"):
                continue  # never sent
            t["llm_calls"] += 1
            t["calls_by_role"][d["role"]] = t["calls_by_role"].get(d["role"], 0) + 1
            if d.get("text") is None:
                t["failed_llm_calls"] += 1
            usage = d.get("usage") or {}
            t["input_tokens"] += usage.get("input_tokens", 0)
            t["output_tokens"] += usage.get("output_tokens", 0)
            t["usd"] += d.get("cost_usd") or 0.0
            t["llm_seconds"] += d.get("latency_s") or 0.0
        elif e["kind"] == "verdict":
            if d.get("reused"):
                t["reused_verdicts"] += 1
                continue
            t["evaluations"] += 1
            t["scorings"][d["grader"]] = t["scorings"].get(d["grader"], 0) + 1
            t["grading_seconds"] += d.get("grading_seconds") or 0.0
        elif e["kind"] == "duplicate":
            t["duplicates_not_regraded"] += 1
    t["usd"] = round(t["usd"], 6)
    t["llm_seconds"] = round(t["llm_seconds"], 3)
    t["grading_seconds"] = round(t["grading_seconds"], 3)
    return t


class RecordedVerdicts:
    """Verdicts already journaled, by (code hash, label, grader), each served once per occurrence."""

    def __init__(self, events: list[dict[str, Any]]):
        self._by_key: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for e in events:
            d = e["data"]
            if e["kind"] == "verdict" and not d.get("reused"):
                self._by_key.setdefault((d["content_hash"], d.get("label", ""), d["grader"]), []).append(d["verdict"])
        self._served: dict[tuple[str, str, str], int] = {}

    def take(self, h: str, label: str, grader: str) -> dict[str, Any] | None:
        key = (h, label, grader)
        n = self._served.get(key, 0)
        found = self._by_key.get(key, [])
        if n < len(found):
            self._served[key] = n + 1
            return found[n]
        return None


def compare_verdicts(h: str, label: str, grader: str, recorded: Verdict, new: Verdict) -> dict[str, Any]:
    """Correctness must agree exactly; speed within the grader's measured noise (its cv, at least 10%)."""
    same_correctness = (recorded.status == new.status and sorted(recorded.hard_fail_reasons) == sorted(new.hard_fail_reasons)
                        and recorded.tests == new.tests)
    noise = 0.10
    for cv in (recorded.cv, new.cv):
        if isinstance(cv, (int, float)):
            noise = max(noise, 3 * float(cv))
    speed_agrees = None
    if recorded.speedup and new.speedup:
        import math

        speed_agrees = abs(math.log(new.speedup / recorded.speedup)) <= math.log1p(noise)
    return {"content_hash": h, "label": label, "grader": grader, "recorded_status": recorded.status.value,
            "new_status": new.status.value, "recorded_speedup": recorded.speedup, "new_speedup": new.speedup,
            "correctness_agrees": same_correctness, "speed_agrees": speed_agrees, "noise": round(noise, 4)}


class RoundState(TypedDict, total=False):
    round: int
    island: int
    parent_id: str
    inspiration_ids: list[str]
    plan: str
    proposals: list[dict[str, Any]]  # per child: id, status, detail, files (or None), repaired
    child_ids: list[str]
    stop: str  # why the search ends: rounds_done | budget_exhausted | no_llm | interrupted
    enter: str  # where the graph starts: baseline (a new run), select or finalize (a resumed one)


def files_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(files.items()), ensure_ascii=False).encode()).hexdigest()


def rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, state: list[Any]) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))


class Search:
    def __init__(self, cfg: Config, task: Task, evaluator: Evaluator, store: RunStore, gateway: Gateway | None,
                 progress: Progress | None = None):
        self.cfg, self.task, self.ev, self.store, self.gw = cfg, task, evaluator, store, gateway
        self.ev.dev_reference_dir = store.root / "evaluations" / "dev-reference"  # the run keeps its own
        self.grader = cfg.evaluator.grader
        self.rng = random.Random(cfg.loop.seed)
        self.progress = progress or Progress(quiet=True)
        self.ctx = roles.Context(instruction=task.instruction(), title=task.toml.task.title or task.name, scope=task.scope,
                                 memory_items=cfg.loop.memory_items, lesson_chars=cfg.loop.lesson_chars,
                                 plan_chars=cfg.loop.plan_chars, inspiration_chars=cfg.loop.inspiration_chars,
                                 whole_files_only=cfg.loop.edit_format == "whole_file")
        self.population: Population | None = None
        self.baseline_files: dict[str, str] = {}
        self.started = time.monotonic()
        self.recorded_verdicts = RecordedVerdicts([])
        self.current_round = 0
        self.regrade: list[dict[str, Any]] | None = None  # set by replay --regrade
        self.best_by_round: list[dict[str, Any]] = []
        self.pending: list[Solution] = []  # this round's children, added to the population by `record`

    # ------------------------------------------------------------------ helpers
    def journal(self, kind: str, **data: Any) -> None:
        self.store.journal.append(kind, **data)

    def totals(self) -> dict[str, Any]:
        """Counted from the journal, the run's one source of truth: a resumed run counts what was
        paid or graded before the crash once, and what it served again from the record never."""
        t = journal_totals(self.store.journal.events())
        t["scorings"] = {**t["scorings"], "task_budget": self.task.max_submissions,
                         "hidden_over_budget": t["scorings"]["hidden"] > self.task.max_submissions}
        t["elapsed_seconds"] = round(time.monotonic() - self.started, 3)
        return t

    def grade(self, files: dict[str, str], *, label: str = "", grader: str | None = None) -> Verdict:
        grader = grader or self.grader
        h = files_hash(files)
        recorded = self.recorded_verdicts.take(h, label, grader)
        if recorded is not None:  # graded before the crash (resume) or in the run replayed
            v = Verdict.model_validate(recorded)
            self.journal("verdict", content_hash=h, label=label, grader=grader, verdict=recorded, reused=True)
            if self.regrade is not None:
                self.regrade.append(self._regrade(files, h, label, grader, v))
            return v
        changed = {p: t for p, t in files.items() if t != self.baseline_files.get(p)}
        out = self.store.evaluation_dir(h, label)
        faults.pause("grading", self.current_round, self.store.root)
        v = self.ev.evaluate(self.task, candidate=CandidateSource(files=changed), grader=grader, out_dir=out)
        if v.status == Status.infra_error:  # our trouble, not the candidate's: once more
            v = self.ev.evaluate(self.task, candidate=CandidateSource(files=changed), grader=grader, out_dir=out / "retry")
        self.journal("verdict", content_hash=h, label=label, grader=grader, verdict=v.model_dump(mode="json", exclude={"raw"}),
                     grading_seconds=v.seconds)
        return v

    def _regrade(self, files: dict[str, str], h: str, label: str, grader: str, recorded: Verdict) -> dict[str, Any]:
        """Replay --regrade: grade again and compare with what the run recorded."""
        changed = {p: t for p, t in files.items() if t != self.baseline_files.get(p)}
        v = self.ev.evaluate(self.task, candidate=CandidateSource(files=changed), grader=grader,
                             out_dir=self.store.evaluation_dir(h, f"regrade-{label or 'search'}"))
        return compare_verdicts(h, label, grader, recorded, v)

    @staticmethod
    def solution_from(v: Verdict, **fields: Any) -> Solution:
        # Gates about speed alone (not beating the baseline or the anchor) say nothing against the
        # code's correctness: for the search such a candidate is correct, with its (low) speedup.
        reasons = code_reasons(v.hard_fail_reasons)
        status = "ok" if v.status == Status.hard_fail and not reasons else v.status.value
        dev = v.dev if v.dev is not None and v.speedup is None else None
        return Solution(status=status, speedup=v.speedup, reward=v.reward, hard_fail_reasons=reasons,
                        dev_figure=dev.value if dev else None, dev_kind=dev.kind if dev else None,
                        tests_passed=v.tests.passed, tests_total=v.tests.total, **fields)

    def checkpoint(self, k: int) -> None:
        assert self.population is not None
        files = self.population.loongflow_files(iteration=k, extra_metadata={"task": self.task.name, "pesflow_round": k})
        files["pesflow_state.json"] = {
            "round": k, "next_round": k + 1, "population": self.population.to_dict(), "rng_state": rng_state(self.rng),
            "memory": self.ctx.memory, "best_by_round": self.best_by_round, "totals": self.totals(),
        }
        write_dir_atomically(self.store.checkpoint_dir(k), files,
                              before_rename=lambda: faults.pause("checkpoint", k, self.store.root))
        self.journal("checkpoint", round=k, path=str(self.store.checkpoint_dir(k).relative_to(self.store.root)))

    def restore(self, state: dict[str, Any]) -> None:
        """The search as checkpointed at the end of a round (pesflow_state.json)."""
        self.population = Population.from_dict(state["population"])
        self.baseline_files = dict(self.population.get("baseline").files)
        if state.get("rng_state"):
            set_rng_state(self.rng, state["rng_state"])
        self.ctx.memory = list(state.get("memory") or [])
        self.best_by_round = [b for b in state.get("best_by_round", []) if b["round"] <= state["round"]]

    # ------------------------------------------------------------------ steps
    def baseline(self, state: RoundState) -> RoundState:
        """Round 0: grade the unchanged scope files; they seed every island."""
        prepared = self.ev.prepare(self.task)
        self.baseline_files = {rel: self.ev.backend.baseline_text(prepared, rel) or "" for rel in self.task.scope}
        self.store.update_run(started=datetime.now(timezone.utc).isoformat(timespec="seconds"), status="running")
        self.progress.phase(0, "grading the baseline")
        v = self.grade(self.baseline_files, label="baseline")
        base = self.solution_from(v, id="baseline", parent_id=None, island=0, round=0, files=self.baseline_files,
                                  content_hash=files_hash(self.baseline_files), lessons="The unchanged baseline.")
        self.population = Population(self.cfg.population, self.baseline_files)
        self.population.add(base)
        self.journal("candidate", id="baseline", round=0, parent_id=None, content_hash=base.content_hash, status=base.status)
        self.best_by_round.append({"round": 0, "best_id": "baseline", "speedup": base.speedup})
        self.checkpoint(0)
        self.progress.round_done(0, proposed=0, graded=1, failed=0 if base.correct else 1, best=base, totals=self.totals())
        if self.gw is None:
            return {"stop": "no_llm"}
        return {"round": 1}

    def select(self, state: RoundState) -> RoundState:
        assert self.population is not None
        k = state["round"]
        self.current_round = k
        island = self.population.island_for_round(k)
        before = rng_state(self.rng)
        parent, inspirations = self.population.sample(island, self.rng)
        self.journal("selection", round=k, island=island, parent_id=parent.id, inspiration_ids=[s.id for s in inspirations],
                     rng_state_before=before)
        return {"island": island, "parent_id": parent.id, "inspiration_ids": [s.id for s in inspirations]}

    def plan(self, state: RoundState) -> RoundState:
        assert self.population is not None and self.gw is not None
        k = state["round"]
        self.progress.phase(k, "planning")
        parent = self.population.get(state["parent_id"])
        inspirations = [self.population.get(i) for i in state["inspiration_ids"]]
        recent = [s for s in self.population.failures() if s.round > 0][-self.cfg.loop.recent_failures :] if self.cfg.loop.recent_failures else []
        if not self.cfg.loop.use_planner:
            self.journal("plan", round=k, parent_id=parent.id, ok=True, plan=roles.FALLBACK_PLAN, planner=False)
            return {"plan": roles.FALLBACK_PLAN}
        try:
            text, prompt, ok = roles.plan(self.gw, self.ctx, parent, inspirations, recent, tag=f"r{k}/plan")
        except BudgetExhausted:
            return {"stop": "budget_exhausted"}
        d = f"{self.store.round_dir(k)}/planner"
        self.store.write(f"{d}/prompt.md", prompt)
        self.store.write(f"{d}/response.md", text if ok else f"(no usable answer; fallback plan)\n\n{text}")
        self.journal("plan", round=k, parent_id=parent.id, ok=ok, plan=text)
        return {"plan": text}

    def execute(self, state: RoundState) -> RoundState:
        assert self.population is not None and self.gw is not None
        if state.get("stop"):
            return {}
        k, n = state["round"], self.cfg.loop.children
        self.progress.phase(k, f"{n} executors writing code")
        parent = self.population.get(state["parent_id"])

        def one(i: int) -> roles.Proposal:
            return roles.propose(self.gw, self.ctx, parent, state["plan"], i, n, tag=f"r{k}/c{i}",
                                 repair_attempts=self.cfg.loop.repair_attempts)

        try:
            with ThreadPoolExecutor(max_workers=n) as pool:
                proposals = list(pool.map(one, range(n)))  # results in child order, whatever finished first
        except BudgetExhausted:
            return {"stop": "budget_exhausted"}
        out = []
        for i, p in enumerate(proposals):
            cid = f"r{k:02d}-c{i}"
            d = f"{self.store.round_dir(k)}/executor/{cid}"
            for j, (prompt, response) in enumerate(p.transcript):
                name = "" if j == 0 else f"repair_{j}_"
                self.store.write(f"{d}/{name}prompt.md", prompt)
                self.store.write(f"{d}/{name}response.md", response)
            if p.files is not None:
                self.store.write(f"{d}/candidate.diff", Candidate(files=p.files).diff(parent.files))
            self.journal("candidate", id=cid, round=k, parent_id=parent.id, status=p.status, detail=p.detail,
                         repaired=p.repaired, content_hash=files_hash(p.files) if p.files else None)
            out.append({"id": cid, "status": p.status, "detail": p.detail, "files": p.files, "repaired": p.repaired})
        return {"proposals": out}

    def evaluate(self, state: RoundState) -> RoundState:
        """Grade each distinct new candidate once; the same code is never graded twice."""
        assert self.population is not None
        if state.get("stop"):
            return {}
        k = state["round"]
        parent = self.population.get(state["parent_id"])
        todo: dict[str, dict[str, str]] = {}
        for p in state["proposals"]:
            if p["files"] is not None:
                h = files_hash(p["files"])
                if self.population.by_hash(h) is None:
                    todo.setdefault(h, p["files"])
        self.progress.phase(k, f"grading {len(todo)} candidates")
        with ThreadPoolExecutor(max_workers=self.cfg.loop.grading_workers) as pool:
            verdicts = dict(zip(todo, pool.map(lambda files: self.grade(files, label=""), todo.values())))
        self.pending = []
        first_of: dict[str, str] = {}
        for p in state["proposals"]:
            common = dict(id=p["id"], parent_id=parent.id, island=state["island"], round=k, plan=state["plan"][:2000])
            if p["files"] is None:
                self.pending.append(Solution(**common, files=parent.files, content_hash=f"none-{p['id']}",
                                             status="no_code", lessons=p["detail"][:400]))
                continue
            h = files_hash(p["files"])
            earlier = self.population.by_hash(h)
            if earlier is not None or h in first_of:
                ref = earlier if earlier is not None else next(s for s in self.pending if s.id == first_of[h])
                self.journal("duplicate", id=p["id"], of=ref.id, content_hash=h)
                self.pending.append(ref.model_copy(update={**common, "files": p["files"], "content_hash": h,
                                                           "duplicate_of": ref.id, "lessons": ""}))
                continue
            first_of[h] = p["id"]
            v = verdicts[h]
            self.pending.append(self.solution_from(v, **common, files=p["files"], content_hash=h))
            self.store.write_json(f"{self.store.round_dir(k)}/executor/{p['id']}/verdict.json",
                                  v.model_dump(mode="json", exclude={"raw"}))
        return {"child_ids": [s.id for s in self.pending]}

    def summarize(self, state: RoundState) -> RoundState:
        assert self.population is not None and self.gw is not None
        if state.get("stop"):
            return {}
        k = state["round"]
        self.progress.phase(k, "summarizing")
        parent = self.population.get(state["parent_id"])
        diffs = {s.id: Candidate(files=s.files).diff(parent.files) for s in self.pending}
        if not self.cfg.loop.use_summarizer:
            lessons = {s.id: roles.default_lesson(s) for s in self.pending}
            self.pending = [s.model_copy(update={"lessons": f"{lessons[s.id]} {s.lessons}".strip()}) for s in self.pending]
            self.journal("summary", round=k, ok=True, lessons=lessons, memory=self.ctx.memory, summarizer=False)
            return {}
        try:
            lessons, memory, prompt, response, ok = roles.summarize(self.gw, self.ctx, k, parent, state["plan"], self.pending,
                                                                    diffs, tag=f"r{k}/summary")
        except BudgetExhausted:
            lessons, memory, prompt, response, ok = ({s.id: roles.default_lesson(s) for s in self.pending}, self.ctx.memory,
                                                     "", None, False)
            state = {**state, "stop": "budget_exhausted"}
        self.pending = [s.model_copy(update={"lessons": lessons.get(s.id, s.lessons) if s.status != "no_code" else
                                             f"{lessons.get(s.id, '')} {s.lessons}".strip()}) for s in self.pending]
        self.ctx.memory = memory
        d = f"{self.store.round_dir(k)}/summarizer"
        if prompt:
            self.store.write(f"{d}/prompt.md", prompt)
            self.store.write(f"{d}/response.md", response or "(no answer)")
        self.store.write_json(f"{d}/lessons.json", {"ok": ok, "children": lessons, "memory": memory})
        self.journal("summary", round=k, ok=ok, lessons=lessons, memory=memory)
        return {"stop": state["stop"]} if state.get("stop") else {}

    def record(self, state: RoundState) -> RoundState:
        assert self.population is not None
        k = state["round"]
        for s in getattr(self, "pending", []):
            self.population.add(s)
        moved = self.population.migrate(k)
        if moved:
            self.journal("migration", round=k, moved=[list(m) for m in moved])
        best = self.population.best()
        self.best_by_round.append({"round": k, "best_id": best.id if best else None, "speedup": best.speedup if best else None})
        self.checkpoint(k)
        kids = getattr(self, "pending", [])
        self.progress.round_done(k, proposed=len(kids), graded=sum(1 for s in kids if s.status != "no_code" and not s.duplicate_of),
                                 failed=sum(1 for s in kids if not s.correct), best=best, totals=self.totals())
        self.store.update_run(totals=self.totals(), rounds_done=k)
        self.pending = []
        if state.get("stop"):
            return {"stop": state["stop"]}
        if k >= self.cfg.loop.rounds:
            return {"stop": "rounds_done"}
        return {"round": k + 1}

    def finalize(self, state: RoundState) -> RoundState:
        """Re-grade the best few, pick one, score it once with the hidden grader, write final/."""
        assert self.population is not None
        stop = state.get("stop", "rounds_done")
        self.progress.phase(state.get("round", 0), "final pick")
        top = [s for s in self.population.top(self.cfg.loop.final_regrade_top) if s.correct]
        pick, pick_verdict, pick_mean, remeasured = None, None, 0.0, []
        for s in top:
            v = self.grade(s.files, label="final-regrade")
            correct = v.correct
            mean = (s.speedup + v.speedup) / 2 if correct and v.speedup and s.speedup else None
            remeasured.append({"id": s.id, "recorded": s.speedup, "regraded": v.speedup, "correct": correct, "mean": mean})
            if mean is not None and (pick is None or mean > pick_mean):
                pick, pick_verdict, pick_mean = s, v, mean
        best: dict[str, Any] = {"id": None, "speedup": None, "reward": None, "grader": None}
        if pick is not None:
            self.store.write("final/candidate.patch", Candidate(files=pick.files).diff(self.baseline_files))
            for rel, text in pick.files.items():
                self.store.write(f"final/files/{rel}", text)
            self.store.write_json("final/verdict.json", pick_verdict.model_dump(mode="json", exclude={"raw"}))
            best = {"id": pick.id, "speedup": pick_verdict.speedup, "reward": pick_verdict.reward, "grader": self.grader}
            if self.grader == "dev" and self.cfg.loop.score_final_with_hidden:
                hv = self.grade(pick.files, label="final-hidden", grader="hidden")
                self.store.write_json("final/hidden_verdict.json", hv.model_dump(mode="json", exclude={"raw"}))
                best = {"id": pick.id, "speedup": hv.speedup, "reward": hv.reward, "grader": "hidden",
                        "status": hv.status.value, "hard_fail_reasons": hv.hard_fail_reasons,
                        "dev_speedup": pick_verdict.speedup}
            self.store.write("final/report.md", self._report(pick, remeasured, best, stop))
        self.journal("final", stop=stop, remeasured=remeasured, best=best)
        status = {"rounds_done": "finished", "budget_exhausted": "budget_exhausted", "no_llm": "no_llm"}.get(stop, stop)
        self.store.update_run(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"), totals=self.totals(),
                              best_by_round=self.best_by_round, final_regrade=remeasured, status=status, best=best)
        self.journal("run_end", status=status)
        return {"stop": stop}

    def _report(self, pick: Solution, remeasured: list[dict[str, Any]], best: dict[str, Any], stop: str) -> str:
        t = self.totals()
        lines = [f"# {self.task.name}: final pick {pick.id}", "",
                 f"- search grader: {self.grader}; stopped: {stop}",
                 f"- picked {pick.id} (parent {pick.parent_id}, round {pick.round}, island {pick.island})",
                 f"- best: {json.dumps(best)}",
                 f"- LLM calls {t.get('llm_calls', 0)}, tokens {t.get('input_tokens', 0)} in / {t.get('output_tokens', 0)} out, "
                 f"USD {t.get('usd', 0)}", f"- gradings: {json.dumps(t['scorings'])}", "", "## Final re-grade", ""]
        lines += [f"- {r['id']}: recorded {r['recorded']}, re-graded {r['regraded']}, correct {r['correct']}" for r in remeasured]
        lines += ["", "## Best by round", ""] + [f"- round {b['round']}: {b['best_id']} {b['speedup']}" for b in self.best_by_round]
        lines += ["", "## Lessons on the pick", "", pick.lessons or "(none)"]
        return "\n".join(lines) + "\n"


def run_metadata(cfg: Config, task: Task, run_id: str) -> dict[str, Any]:
    import anthropic
    import langgraph
    import openai
    import pydantic

    def version(mod: Any) -> str:
        return getattr(mod, "__version__", "?")

    return {
        "run_id": run_id, "pesflow": VERSION,
        "task": {"name": task.name, "path": str(task.root), "content_hash": task.content_hash,
                 "source": task.source.model_dump(),
                 "scope": task.scope, "max_submissions": task.max_submissions, "reward_class": task.reward_class},
        "config": json.loads(cfg.model_dump_json()),
        "seed": cfg.loop.seed, "grader": cfg.evaluator.grader, "backend": cfg.evaluator.backend,
        "versions": {"python": sys.version.split()[0], "platform": platform.platform(), "openai": version(openai),
                     "anthropic": version(anthropic), "langgraph": getattr(langgraph, "__version__", "installed"),
                     "pydantic": version(pydantic)},
    }


def new_run_dir(out: Path, task: Task, seed: int) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = out / task.bench / task.dir
    for n in range(1000):
        p = base / (f"{stamp}-s{seed}" + (f"-{n}" if n else ""))
        if not p.exists():
            return p
    raise RuntimeError("cannot find a free run directory name")
