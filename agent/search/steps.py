"""One search run: what each step does (agent/search/graph.py wires them).

A steady state: `launch` starts the proposals of the rounds selected so far (each on a thread;
its children go to the graders as they are written), `collect` applies the next round in order
once its verdicts are in, `summarize` and `record` fold it into the population and select the
round pipeline_depth ahead. The RNG, the population, the memory and every decision event advance
in round and candidate order, whatever finishes first, so a resumed or replayed run ends where
the uninterrupted one ends; only the calls' and verdicts' own events are journaled as they
happen. What outlives a round is the SearchState, checkpointed by `record` (pending selections
included).
"""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import Future
from datetime import datetime, timezone
from typing import Any

from agent.config import LoopConfig
from agent.llm.bandit import gain
from agent.llm.gateway import CAP_RAISED_LATER, BudgetExhausted, Gateway
from agent.population.code_key import code_key
from agent.population.database import Population, PopulationConfig, Solution
from agent.population.loongflow_format import loongflow_files
from agent.rundir.schema import Event, flagged, journal_totals, reviews_of
from agent.rundir.store import RunStore
from agent.search import faults, history, roles
from agent.search.grading import Grading
from agent.search.pipeline import GraderPool, Pipeline
from agent.search.progress import Progress, best_entry
from agent.search.protocol import DEFAULT, Protocol
from agent.search.fixes import STOP_RULES, child_id, solution_from, stop_rule
from agent.search.proposal import Proposal, Turns, Work, propose
from agent.search.state import RoundState, SearchState, Selection, rng_state
from agent.search.utilization import Busy, Depth, one_line, utilization
from evaluator.candidate import Candidate, candidate_hash
from evaluator.evaluation import Evaluator
from evaluator.task import Task
from evaluator.verdict import Verdict

SETTLE_TRIES = 3  # a picked parent whose full screen says it does not count: drawn again at most this often


class Search:
    def __init__(self, loop: LoopConfig, population: PopulationConfig, grader: str, task: Task, evaluator: Evaluator,
                 store: RunStore, gateway: Gateway | None, progress: Progress | None = None,
                 protocol: Protocol = DEFAULT):
        self.loop, self.population_config, self.task, self.ev, self.store, self.gw = (loop, population, task, evaluator,
                                                                                      store, gateway)
        self.ev.dev_reference_dir = store.root / "evaluations" / "dev-reference"  # the run keeps its own
        self.grader = grader
        self.state = SearchState(rng=random.Random(loop.seed))
        self.progress = progress or Progress(quiet=True)
        self.ctx = roles.Context(instruction=task.instruction(), title=task.toml.task.title or task.name,
                                 scope=task.scope, memory_items=loop.memory_items, lesson_chars=loop.lesson_chars,
                                 plan_chars=loop.plan_chars, inspiration_chars=loop.inspiration_chars,
                                 context_share=loop.context_share, whole_files_only=loop.edit_format == "whole_file",
                                 protocol=protocol)
        self.started = time.monotonic()
        self.grading = Grading(evaluator, task, store, grader)
        self.children: list[Solution] = []  # the round being applied, added to the population by `record`
        self.grader_busy, self.queue = Busy(), Depth()
        self.pool: GraderPool | None = None  # started by the first `launch`
        self.pipeline = Pipeline()
        self.plans: dict[int, Future] = {}  # each launched round's plan, for the planners of the rounds after it

    @property
    def population(self):  # noqa: ANN201 - the state's population (set by `baseline` or `restore`)
        return self.state.population

    @property
    def baseline_files(self) -> dict[str, str]:
        return self.grading.baseline_files

    # ------------------------------------------------------------------ helpers
    def journal(self, kind: Event, **data: Any) -> None:
        self.store.journal.append(kind, **data)

    def totals(self) -> dict[str, Any]:
        """Counted from the journal, the run's one source of truth: a resumed run counts what was
        paid or graded before the crash once, and what it served again from the record never."""
        t = journal_totals(self.store.journal.events())
        cap = self.task.loop_cap  # the package's own loop's cap on a solver's dev submissions
        t["scorings"] = {**t["scorings"], "task_budget": self.task.max_submissions,
                         "hidden_over_budget": t["scorings"]["hidden"] > self.task.max_submissions,
                         "dev_cap": cap, "dev_over_cap": cap is not None and t["scorings"]["dev"] > cap}
        t["elapsed_seconds"] = round(time.monotonic() - self.started, 3)
        return t

    def utilization(self) -> dict[str, Any]:
        llm = self.gw.busy if self.gw is not None else Busy()
        u = utilization(time.monotonic() - self.started, self.grader_busy, self.loop.grading_workers, llm, self.queue,
                        self.loop.pipeline_depth)
        u["grader_busy_each"] = self.pool.busy_each() if self.pool is not None else []
        # a cluster backend's gradings and busy seconds per node (ray): where the gradings ran
        backend = getattr(self.ev.backend, "inner", self.ev.backend)
        per_node = getattr(backend, "utilization", None)
        if callable(per_node):
            u["nodes"] = per_node()
        return u

    def grade(self, files: dict[str, str], *, label: str = "", grader: str | None = None, round_: int = 0) -> Verdict:
        with self.grader_busy.running():
            return self.grading.grade(files, label=label, grader=grader, round_=round_)

    def checkpoint(self, k: int) -> None:
        assert self.population is not None
        files = loongflow_files(self.population, iteration=k,
                                extra_metadata={"task": self.task.name, "pesflow_round": k})
        self.state.memory = self.ctx.memory
        files["pesflow_state.json"] = self.state.to_checkpoint(k, self.totals())
        d = self.store.write_checkpoint(k, files, before_rename=lambda: faults.pause("checkpoint", k, self.store.root))
        self.journal(Event.checkpoint, round=k, path=str(d.relative_to(self.store.root)))

    def restore(self, state: dict[str, Any]) -> None:
        """The search as checkpointed at the end of a round (pesflow_state.json), with every decision
        a person journaled since (pesflow review) applied to its population and to later verdicts."""
        self.state.restore(state)
        self.grading.baseline_files = dict(self.population.get("baseline").files)
        self.ctx.memory = self.state.memory
        self.grading.reviews = reviews_of(self.store.journal.events())
        for h, decision in self.grading.reviews.items():
            self.population.review(h, decision)

    def suspects(self) -> list[dict[str, Any]]:
        """run.json's `suspects` (agent/rundir/schema.py flagged), from the journal."""
        return flagged(self.store.journal.events())

    def select(self, k: int) -> Selection:
        """Round k's parent, inspirations, failures and memory: the RNG's only use, always in round order."""
        assert self.population is not None
        island = self.population.island_for_round(k)
        before = rng_state(self.state.rng)
        parent, inspirations = self.population.sample(island, self.state.rng)
        for _ in range(SETTLE_TRIES):  # a parent is a result: one whose probes waited is screened now
            if not parent.trust.deferred:
                break
            v = self.grade(parent.files, label="parent-check", round_=k)
            counts = v.correct and v.is_result
            self.population.settle(parent.id, v.trust, counts=counts, profile=v.profile)
            self.journal(Event.settled, round=k, id=parent.id, counts=counts, reasons=list(v.trust.reasons))
            if not counts:
                parent, inspirations = self.population.sample(island, self.state.rng)
        n = self.loop.recent_failures
        failures = [s for s in self.population.failures() if s.round > 0][-n:] if n else []
        best = self.population.best()
        sel = Selection(k, island, parent.id, [s.id for s in inspirations], [s.id for s in failures],
                        list(self.ctx.memory), self.loop.children_in(k),
                        best.id if best is not None and best.id != parent.id else None)
        self.journal(Event.selection, round=k, island=island, parent_id=parent.id, inspiration_ids=sel.inspiration_ids,
                     rng_state_before=before)
        return sel

    def raise_bar(self) -> None:
        """The figure a child's grading must pass to become a result now: the best so far (at or
        under it, the grading's probes wait until it is picked: evaluator.trust.defer_below_best)."""
        assert self.population is not None
        best = self.population.best()
        self.grading.result_bar = best.fitness if best is not None else None

    def plans_before(self, m: int) -> list[tuple[int, str, Future]]:
        """The plans of the rounds selected before round m and not applied when it was selected
        (m - pipeline_depth + 1 to m - 1): each still in flight here, or, after a resume, applied
        since and read from the journal, so that round m's planner sees the same plans either way."""
        out: list[tuple[int, str, Future]] = []
        recorded: dict[int, dict[str, Any]] | None = None
        for r in range(max(1, m - self.loop.pipeline_depth + 1), m):
            if r in self.state.pending and r in self.plans:
                out.append((r, self.state.pending[r].parent_id, self.plans[r]))
                continue
            if recorded is None:
                recorded = {e["data"]["round"]: e["data"] for e in self.store.journal.events()
                            if e["kind"] == Event.plan}
            if r in recorded:
                done: Future = Future()
                done.set_result(recorded[r]["plan"])
                out.append((r, recorded[r]["parent_id"], done))
        return out

    def select_ahead(self, applied: int) -> None:
        """After round `applied`: the rounds up to applied + pipeline_depth are selected."""
        for m in range(applied + 1, min(applied + self.loop.pipeline_depth, self.loop.rounds) + 1):
            if m not in self.state.pending:
                self.state.pending[m] = self.select(m)

    def _propose(self, work: Work) -> Proposal:
        assert self.gw is not None and self.pool is not None
        turns = Turns(self.loop.repair_attempts, self.loop.fix_turns, tuple(self.loop.fix_on),
                      self.loop.resample_duplicates)
        return propose(self.gw, self.ctx, work, self.pool.submit, use_planner=self.loop.use_planner, turns=turns)

    def work_for(self, sel: Selection) -> Work:
        """A selection's solutions and what its prompts show of the search, resolved on the
        search's thread from what the selection could know: the rounds applied when it was made
        (round - pipeline_depth and before), and the plans of the rounds selected before it."""
        pop, m, depth = self.population, sel.round, self.loop.pipeline_depth
        parent = pop.get(sel.parent_id)
        seen = history.applied_before(pop.all(), m, depth)
        known = {code_key(s.files): (s.id, history.outcome(s)) for s in [pop.get("baseline"), *seen]
                 if s.status != "no_code" and not s.duplicate_of}
        known[code_key(parent.files)] = (parent.id,
                                         history.outcome(parent) if parent.round else "the unchanged baseline")
        plan_out = self.plans.setdefault(m, Future())
        before = self.plans_before(m) if self.loop.use_planner else []
        return Work(sel, parent, inspirations_for(pop, parent, [pop.get(i) for i in sel.inspiration_ids]),
                    [pop.get(i) for i in sel.failure_ids], pop.get(sel.best_id) if sel.best_id else None,
                    history=history.table(seen, self.loop.history_rows), plans_before=before,
                    plan_out=plan_out, known=known, baseline=self.baseline_files)

    # ------------------------------------------------------------------ steps
    def baseline(self, state: RoundState) -> RoundState:
        """Round 0: grade the unchanged scope files; they seed every island."""
        prepared = self.ev.prepare(self.task)
        self.grading.baseline_files = {rel: self.ev.backend.baseline_text(prepared, rel) or ""
                                       for rel in self.task.scope}
        self.store.update_run(started=datetime.now(timezone.utc).isoformat(timespec="seconds"), status="running")
        self.progress.phase(0, "grading the baseline")
        v = self.grade(self.baseline_files, label="baseline")
        base = solution_from(v, id="baseline", parent_id=None, island=0, round=0, files=self.baseline_files,
                                  content_hash=candidate_hash(self.baseline_files, self.baseline_files),
                                  lessons="The unchanged baseline.")
        self.state.start(self.population_config, self.baseline_files).add(base)
        self.journal(Event.candidate, id="baseline", round=0, parent_id=None, content_hash=base.content_hash,
                     status=base.status)
        best0 = self.population.best()  # None when the baseline's own grading does not count
        self.state.best_by_round.append(best_entry(0, best0))
        self.raise_bar()
        if self.gw is not None:
            self.select_ahead(0)
        self.checkpoint(0)
        self.progress.round_done(0, proposed=0, graded=1, failed=0 if base.correct and base.is_result else 1,
                                 best=self.population.best(), totals=self.totals())
        if self.gw is None:
            return {"stop": "no_llm"}
        return {"round": 1}

    def launch(self, state: RoundState) -> RoundState:
        """Start the proposal of every selected round not yet running (all of them after a resume)."""
        assert self.population is not None
        self.raise_bar()  # a resumed search's too
        if self.pool is None:
            grade = lambda files, k: self.grading.grade(files, round_=k)  # noqa: E731 - the pool counts busy itself
            self.pool = GraderPool(grade, self.loop.grading_workers, self.grader_busy, self.queue)
            self.pool.known([code_key(s.files) for s in self.population.all()
                             if not s.content_hash.startswith("none-")])
        self.select_ahead(state["round"] - 1)  # a checkpoint from before pipelining holds no selection
        for m, sel in sorted(self.state.pending.items()):
            if not self.pipeline.running(m):
                work = self.work_for(sel)
                self.pipeline.start(m, lambda w=work: self._propose(w))
        return {}

    def collect(self, state: RoundState) -> RoundState:
        """Round k's proposal and verdicts, applied in candidate order whatever finished first: the
        same code is graded once, and code the population holds is a duplicate, not graded again."""
        assert self.population is not None
        k = state["round"]
        self.progress.phase(k, "planning and writing code")
        p: Proposal = self.pipeline.result(k)
        sel, parent = p.work.selection, p.work.parent
        self.children = []
        if p.stop and not p.drafts:  # the USD cap reached while planning: the round is recorded without children
            return {"stop": p.stop, "plan": p.plan}
        d = self.store.round_dir(k)
        if p.planner_called:
            self.store.write(f"{d}/planner/prompt.md", p.plan_prompt)
            self.store.write(f"{d}/planner/response.md",
                             p.plan if p.plan_ok else f"(no usable answer; fallback plan)\n\n{p.plan}")
            self.journal(Event.plan, round=k, parent_id=parent.id, ok=p.plan_ok, plan=p.plan)
        else:
            self.journal(Event.plan, round=k, parent_id=parent.id, ok=True, plan=p.plan, planner=False)
        ids = [child_id(k, i, t) for i, t in p.turns]
        fixes = {j: ids[j - 1] for j, (_, t) in enumerate(p.turns) if t}  # a fix turn: a child of the one it fixes
        for i, c in enumerate(p.drafts):
            cid = ids[i]
            for j, (prompt, response) in enumerate(c.transcript):
                name = "" if j == 0 else f"repair_{j}_"
                self.store.write(f"{d}/executor/{cid}/{name}prompt.md", prompt)
                self.store.write(f"{d}/executor/{cid}/{name}response.md", response)
            if c.files is not None:
                self.store.write(f"{d}/executor/{cid}/candidate.diff", Candidate(files=c.files).diff(parent.files))
            self.journal(Event.candidate, id=cid, round=k, parent_id=fixes.get(i, parent.id), status=c.status,
                         detail=c.detail, repaired=c.repaired,
                         content_hash=candidate_hash(c.files, self.baseline_files) if c.files else None)
        self.progress.phase(k, "grading")
        first_of: dict[str, str] = {}
        for i, (c, future) in enumerate(zip(p.drafts, p.verdicts)):
            cid = ids[i]
            common = dict(id=cid, parent_id=fixes.get(i, parent.id), island=sel.island, round=k, plan=p.plan[:2000])
            if c.files is None or future is None:
                self.children.append(Solution(**common, files=parent.files, content_hash=f"none-{cid}",
                                              status="no_code", lessons=c.detail[:400]))
                continue
            h, key = candidate_hash(c.files, self.baseline_files), code_key(c.files)
            # the same program, however spelled (comments, blank lines, formatting): its verdict, no grading
            earlier = self.population.by_hash(h) or self.population.by_code(key)
            if earlier is not None or key in first_of:
                ref = earlier if earlier is not None else next(s for s in self.children if s.id == first_of[key])
                self.journal(Event.duplicate, id=cid, of=ref.id, content_hash=h,
                             **({"near": True} if h != ref.content_hash else {}))
                self.children.append(ref.model_copy(update={**common, "files": c.files, "content_hash": h,
                                                            "duplicate_of": ref.id, "lessons": ""}))
                continue
            first_of[key] = cid
            v = future.result()
            self.children.append(solution_from(v, **common, files=c.files, content_hash=h))
            self.store.write_json(f"{d}/executor/{cid}/verdict.json", v.model_dump(mode="json", exclude={"raw"}))
        self._credit_models(k, p.turns, parent)
        if p.stop:  # the cap reached among the executors: what was made is recorded, without a summary
            self.children, _ = with_default_lessons(self.children)
            return {"stop": p.stop, "plan": p.plan}
        return {"plan": p.plan}

    def _credit_models(self, k: int, turns: list[tuple[int, int]], parent: Solution) -> None:
        """What each child earned, for the model that wrote it, and the round's best for the
        planner's (a role with several models: agent/llm/bandit.py). A duplicate earns nothing."""
        if self.gw is None or not self.gw.bandits:
            return
        gains = []
        for (i, t), c in zip(turns, self.children):
            g = gain(c.is_result and c.duplicate_of is None, c.fitness, parent.fitness)
            self.gw.credit(f"r{k}/c{i}" + (f"/fix{t}" if t else ""), g)
            gains.append(g)
        self.gw.credit(f"r{k}/plan", max(gains, default=0.0))

    def summarize(self, state: RoundState) -> RoundState:
        assert self.population is not None and self.gw is not None
        k = state["round"]
        self.progress.phase(k, "summarizing")
        parent = self.population.get(self.state.pending[k].parent_id)
        diffs = {s.id: Candidate(files=s.files).diff(parent.files) for s in self.children}
        if not self.loop.use_summarizer:
            self.children, lessons = with_default_lessons(self.children)
            self.journal(Event.summary, round=k, ok=True, lessons=lessons, memory=self.ctx.memory, summarizer=False)
            return {}
        try:
            lessons, memory, prompt, response, ok = roles.summarize(self.gw, self.ctx, k, parent, state["plan"],
                                                                    self.children, diffs, tag=f"r{k}/summary")
        except BudgetExhausted as e:
            lessons, memory, prompt, response, ok = ({s.id: roles.default_lesson(s) for s in self.children},
                                                     self.ctx.memory, "", None, False)
            state = {**state, "stop": e.stop}
        self.children = [s.model_copy(update={"lessons": lessons.get(s.id, s.lessons) if s.status != "no_code" else
                                             f"{lessons.get(s.id, '')} {s.lessons}".strip()}) for s in self.children]
        self.ctx.memory = memory
        d = f"{self.store.round_dir(k)}/summarizer"
        if prompt:
            self.store.write(f"{d}/prompt.md", prompt)
            self.store.write(f"{d}/response.md", response or "(no answer)")
        self.store.write_json(f"{d}/lessons.json", {"ok": ok, "children": lessons, "memory": memory})
        self.journal(Event.summary, round=k, ok=ok, lessons=lessons, memory=memory)
        return {"stop": state["stop"]} if state.get("stop") else {}

    def record(self, state: RoundState) -> RoundState:
        assert self.population is not None
        k = state["round"]
        for s in self.children:
            self.population.add(s)
        moved = self.population.migrate(k)
        if moved:
            self.journal(Event.migration, round=k, moved=[list(m) for m in moved])
        best = self.population.best()
        self.state.best_by_round.append(best_entry(k, best))
        self.raise_bar()
        self.state.pending.pop(k, None)
        self.plans.pop(k, None)  # applied: later planners read its plan from the journal (plans_before)
        stop = state.get("stop")
        if stop == CAP_RAISED_LATER:  # a replay past the cap a resume raised: on, as the resumed run went
            stop = None
            self.propose_again()
        stop = (stop or stop_rule(self.state.best_by_round, self.loop.patience, self.loop.target,
                                  self.loop.roofline_stop)
                or ("rounds_done" if k >= self.loop.rounds else None))
        if not stop:
            self.select_ahead(k)  # round k + depth is chosen from the population as it is now
        self.checkpoint(k)
        kids = self.children
        u = self.utilization()
        self.progress.round_done(k, proposed=len(kids),
                                 graded=sum(1 for s in kids if s.status != "no_code" and not s.duplicate_of),
                                 failed=sum(1 for s in kids if not s.correct or not s.is_result), best=best,
                                 totals=self.totals(), note=one_line(u))
        self.store.update_run(totals=self.totals(), rounds_done=k, utilization=u, suspects=self.suspects())
        self.children = []
        return {"stop": stop} if stop else {"round": k + 1, "stop": ""}  # the graph's state keeps a key until reset

    def propose_again(self) -> None:
        """A replay where the original stopped at the USD cap and a resume with a higher one went on:
        the resume proposed the rounds then in flight anew (their plans, refused calls included), so
        the replay drops their first proposals and `launch` starts them again, served the resume's
        answers."""
        for m in sorted(self.state.pending):
            if self.pipeline.running(m):
                try:
                    self.pipeline.result(m)
                except Exception:  # noqa: BLE001 - a proposal the resume did not keep
                    pass
                self.plans.pop(m, None)

    def stop_work(self) -> None:
        """No round will be applied any more: let the proposals in flight end, drop the queued
        gradings, wait for the running ones (each bounded by its timeout; their verdicts journaled)."""
        if self.gw is not None:
            self.gw.closing = True
        self.pipeline.abandon()
        if self.pool is not None:
            self.pool.close()

    def finalize(self, state: RoundState) -> RoundState:
        """Re-grade the best few, pick one, score it once with the hidden grader, write final/. A
        grading whose figures do not count (evaluator.trust's is_result) never makes a pick: a
        re-grade that comes back suspect drops the candidate, and so does a suspect hidden score,
        for the next honest one."""
        assert self.population is not None
        stop = state.get("stop", "rounds_done")
        k = state.get("round", 0)
        self.stop_work()
        self.progress.phase(k, "final pick")
        top = [s for s in self.population.top(self.loop.final_regrade_top) if s.correct]
        ranked, remeasured, dropped = [], [], []
        for s in top:
            v = self.grade(s.files, label="final-regrade", round_=k)
            again = v.speedup if v.speedup is not None else (v.dev.value if v.dev and s.speedup is None else None)
            mean = (s.fitness + again) / 2 if v.correct and v.is_result and again and s.fitness else None
            remeasured.append({"id": s.id, "recorded": s.speedup, "regraded": v.speedup, "correct": v.correct,
                               "mean": mean, "counts": v.is_result, "trust_reasons": list(v.trust.reasons)})
            if not v.is_result:
                dropped.append({"id": s.id, "grader": v.grader, "label": "final-regrade",
                                "reasons": list(v.trust.reasons)})
            elif mean is not None:
                ranked.append((mean, s, v))
        ranked.sort(key=lambda r: -r[0])  # stable: the earlier (better recorded) one wins a tie
        best: dict[str, Any] = {"id": None, "speedup": None, "reward": None, "grader": None}
        pick = None
        for _, s, pick_verdict in ranked:
            best = {"id": s.id, "content_hash": s.content_hash, "speedup": pick_verdict.speedup,
                    "reward": pick_verdict.reward, "grader": self.grader,
                    "trust": pick_verdict.trust.model_dump(mode="json")}
            hv = None
            if self.grader == "dev" and self.loop.score_final_with_hidden:
                hv = self.grade(s.files, label="final-hidden", grader="hidden")
                if not hv.is_result:
                    dropped.append({"id": s.id, "grader": "hidden", "label": "final-hidden",
                                    "reasons": list(hv.trust.reasons)})
                    continue
                best = {"id": s.id, "content_hash": s.content_hash, "speedup": hv.speedup, "reward": hv.reward,
                        "grader": "hidden", "status": hv.status.value, "hard_fail_reasons": hv.hard_fail_reasons,
                        "dev_speedup": pick_verdict.speedup, "trust": hv.trust.model_dump(mode="json")}
            pick = s
            self.store.write("final/candidate.patch", Candidate(files=s.files).diff(self.baseline_files))
            for rel, text in s.files.items():
                self.store.write(f"final/files/{rel}", text)
            self.store.write_json("final/verdict.json", pick_verdict.model_dump(mode="json", exclude={"raw"}))
            if hv is not None:
                self.store.write_json("final/hidden_verdict.json", hv.model_dump(mode="json", exclude={"raw"}))
            self.store.write("final/report.md", self._report(s, remeasured, best, stop, dropped))
            break
        if pick is None:
            best = {"id": None, "speedup": None, "reward": None, "grader": None}
        if dropped:
            best["dropped"] = dropped
        self.journal(Event.final, stop=stop, remeasured=remeasured, best=best)
        status = {"rounds_done": "finished", "budget_exhausted": "budget_exhausted", "no_llm": "no_llm",
                  **{rule: "finished" for rule in STOP_RULES}}.get(stop, stop)
        self.store.update_run(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"), totals=self.totals(),
                              stopped_by=stop,
                              best_by_round=self.state.best_by_round, final_regrade=remeasured,
                              suspects=self.suspects(), status=status, best=best, utilization=self.utilization())
        self.journal(Event.run_end, status=status)
        return {"stop": stop}

    def _report(self, pick: Solution, remeasured: list[dict[str, Any]], best: dict[str, Any], stop: str,
                dropped: list[dict[str, Any]]) -> str:
        t = self.totals()
        lines = [f"# {self.task.name}: final pick {pick.id}", "",
                 f"- search grader: {self.grader}; stopped: {stop}",
                 f"- picked {pick.id} (parent {pick.parent_id}, round {pick.round}, island {pick.island})",
                 f"- best: {json.dumps(best)}",
                 f"- LLM calls {t.get('llm_calls', 0)}, tokens {t.get('input_tokens', 0)} in "
                 f"({t.get('cache_read_tokens', 0)} of them read from the provider's cache) / "
                 f"{t.get('output_tokens', 0)} out, USD {t.get('usd', 0)}", f"- gradings: {json.dumps(t['scorings'])}",
                 "", "## Final re-grade", ""]
        lines += [f"- {r['id']}: recorded {r['recorded']}, re-graded {r['regraded']}, correct {r['correct']}"
                  + ("" if r["counts"] else f", NOT counted ({'; '.join(r['trust_reasons'])})") for r in remeasured]
        if dropped:
            lines += ["", "## Dropped from the pick (their gradings do not count)", ""]
            lines += [f"- {d['id']} ({d['label']}, {d['grader']} grader): "
                      f"{'; '.join(d['reasons']) or 'rejected by review'}"
                      for d in dropped]
        lines += (["", "## Best by round", ""] + [f"- round {b['round']}: {b['best_id']} {b['speedup']}"
                                                  for b in self.state.best_by_round])
        lines += ["", "## Lessons on the pick", "", pick.lessons or "(none)"]
        return "\n".join(lines) + "\n"


def inspirations_for(pop: Population, parent: Solution, chosen: list[Solution]) -> list[Solution]:
    """The selection's inspirations as a planner can use them: not the parent's own ancestors (their
    diff against it is only its own change undone) and the best first, so that what the budget
    cuts is the least worth reading."""
    line, at = set(), parent
    while at.parent_id is not None and at.parent_id in pop and at.parent_id not in line:
        line.add(at.parent_id)
        at = pop.get(at.parent_id)
    kept = [s for s in chosen if s.id not in line and s.id != parent.id]
    return sorted(kept, key=lambda s: -(s.fitness or 0.0))


def with_default_lessons(children: list[Solution]) -> tuple[list[Solution], dict[str, str]]:
    """Children with the lesson their verdict alone gives (no summarizer), and those lessons."""
    lessons = {s.id: roles.default_lesson(s) for s in children}
    return [s.model_copy(update={"lessons": f"{lessons[s.id]} {s.lessons}".strip()}) for s in children], lessons
