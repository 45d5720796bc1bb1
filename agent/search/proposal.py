"""A round's proposal: its plan, then its executors' children, each child handed to the graders
the moment its code exists.

Runs on a thread of its own (agent/search/pipeline.py) while earlier rounds are graded, so it
touches nothing shared: it reads the solutions and the memory its selection named (resolved by
the search before it starts), and writes only through the gateway's journal. What it made is
written to the run directory when its round is applied, in round order (agent/search/steps.py).
"""

from __future__ import annotations

from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Callable

from agent.llm.gateway import BudgetExhausted, Gateway
from agent.population.code_key import code_key
from agent.population.database import Solution
from agent.search import history, roles
from agent.search.fixes import child_id, needs_fix, solution_from
from agent.search.pipeline import in_parallel
from agent.search.prompts import Prompt, verdict_text
from agent.search.state import Selection
from evaluator.candidate import candidate_hash

CAP_REACHED = "the USD cap (llm.max_usd) was reached before this child's code was asked for"
Submit = Callable[[dict[str, str], tuple[int, int]], Future]


@dataclass
class Work:
    """A selection with the solutions it names, resolved on the search's thread."""

    selection: Selection
    parent: Solution
    inspirations: list[Solution]
    failures: list[Solution]
    best: Solution | None = None  # the population's best, where it is not the parent
    history: str = ""  # the planner's table of attempts (agent/search/history.py), as the selection saw them
    # rounds in flight: (round, parent, its plan)
    plans_before: list[tuple[int, str, Future]] = field(default_factory=list)
    plan_out: Future | None = None  # this round's plan, once planned, for the rounds selected after it
    # code key -> (id, outcome) of programs the search has
    known: dict[str, tuple[str, str]] = field(default_factory=dict)
    baseline: dict[str, str] = field(default_factory=dict)  # the baseline's scope files (a verdict's candidate hash)


@dataclass
class Proposal:
    work: Work
    plan: str = roles.FALLBACK_PLAN
    planner_called: bool = False
    plan_prompt: str = ""
    plan_ok: bool = True
    drafts: list[roles.Child] = field(default_factory=list)
    verdicts: list[Future | None] = field(default_factory=list)  # per child; None: no code to grade
    turns: list[tuple[int, int]] = field(default_factory=list)  # per child: (executor, turn); turn > 0 a fix turn
    stop: str | None = None  # budget_exhausted: the USD cap was reached while proposing (drafts: those made)


@dataclass(frozen=True)
class Turns:
    """How many more answers a child's slot may ask for: the run's loop.repair_attempts,
    loop.fix_turns, loop.fix_on and loop.resample_duplicates (their defaults are the config's)."""

    repair_attempts: int
    fix_turns: int
    fix_on: tuple[str, ...]
    resample_duplicates: int


def _plan(gw: Gateway, ctx: roles.Context, work: Work, p: Proposal) -> None:
    """The round's plan, shown the plans of the rounds in flight before it (it waits for them: a
    planner call, never a grading); this plan then reaches the rounds after it, whatever happens."""
    sel = work.selection
    try:
        flying = history.in_flight([(k, pid, f.result()) for k, pid, f in work.plans_before])
        p.plan, p.plan_prompt, p.plan_ok = roles.plan(gw, ctx, work.parent, work.inspirations, work.failures,
                                                      sel.memory, tag=f"r{sel.round}/plan", best=work.best,
                                                      history=work.history, in_flight=flying)
        p.planner_called = True
    finally:
        if work.plan_out is not None and not work.plan_out.done():
            work.plan_out.set_result(p.plan)


def propose(gw: Gateway, ctx: roles.Context, work: Work, submit: Submit, *, use_planner: bool,
            turns: Turns) -> Proposal:
    sel = work.selection
    k, n = sel.round, sel.children
    p = Proposal(work)
    try:
        if use_planner:
            _plan(gw, ctx, work, p)
        elif work.plan_out is not None:
            work.plan_out.set_result(p.plan)
    except BudgetExhausted as e:
        p.stop = e.stop
        return p

    def one(i: int) -> list[tuple[roles.Child, Future | None]]:
        try:
            child = roles.propose(gw, ctx, work.parent, p.plan, i, n, tag=f"r{k}/c{i}",
                                  repair_attempts=turns.repair_attempts, inspirations=work.inspirations, best=work.best)
            child = _fresh(child, i)
        except BudgetExhausted as e:  # the children written before the cap are still graded and kept
            p.stop = e.stop
            return [(roles.Child(None, "llm_error", CAP_REACHED), None)]
        # graded as soon as it exists; the same code in two children is graded once
        made = [(child, submit(child.files, (k, i)) if child.files is not None else None)]
        for t in range(1, turns.fix_turns + 1):
            last, future = made[-1]
            said = _said(last, future, t - 1, i)
            if said is None:
                break
            try:
                fixed = roles.fix(gw, ctx, child.prompt or Prompt([child.transcript[0][0]]), last, said[1], said[0],
                                  tag=f"r{k}/c{i}/fix{t}", parent_files=work.parent.files, graded=said[2])
            except BudgetExhausted as e:
                p.stop = e.stop
                break
            made.append((fixed, submit(fixed.files, (k, i)) if fixed.files is not None else None))
        return made

    def _fresh(child: roles.Child, i: int) -> roles.Child:
        """A child that is a program the search had when this round was selected asks again, up to
        loop.resample_duplicates times, instead of taking its slot with a grading it cannot get."""
        for r in range(1, turns.resample_duplicates + 1):
            seen = work.known.get(code_key(child.files)) if child.files is not None else None
            if seen is None:
                break
            child = roles.resample(gw, child, work.parent.files, seen[0], seen[1], tag=f"r{k}/c{i}/resample{r}")
        return child

    def _said(last: roles.Child, future: Future | None, t: int, i: int) -> tuple[str, str, str] | None:
        """(why, what the grading said, whose grading it was) of a child that gets a fix turn, else None."""
        if future is None or last.files is None or p.stop:
            return None
        try:
            v = future.result()
        except CancelledError:  # the search is stopping
            return None
        why = needs_fix(v, work.parent, turns.fix_on)
        if why is None:
            return None
        sol = solution_from(v, id=child_id(k, i, t), parent_id=work.parent.id, island=sel.island,
                            round=k, files=last.files, content_hash=v.candidate_hash or "")
        # the pool grades a program once: a sibling's other spelling of it got this very grading
        own = not work.baseline or not v.candidate_hash or candidate_hash(last.files, work.baseline) == v.candidate_hash
        return why, verdict_text(sol, ctx.protocol), roles.GRADED if own else roles.GRADED_AS_ANOTHER

    done = in_parallel([lambda i=i: one(i) for i in range(n)])
    for i, made in enumerate(done):
        for t, (c, f) in enumerate(made):
            p.drafts.append(c)
            p.verdicts.append(f)
            p.turns.append((i, t))
    return p
