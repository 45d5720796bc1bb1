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
from agent.population.database import Solution
from agent.search import roles
from agent.search.fixes import child_id, needs_fix, solution_from
from agent.search.pipeline import in_parallel
from agent.search.prompts import Prompt, verdict_text
from agent.search.state import Selection

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


def propose(gw: Gateway, ctx: roles.Context, work: Work, submit: Submit, *, use_planner: bool,
            repair_attempts: int, fix_turns: int = 0) -> Proposal:
    sel = work.selection
    k, n = sel.round, sel.children
    p = Proposal(work)
    try:
        if use_planner:
            p.plan, p.plan_prompt, p.plan_ok = roles.plan(gw, ctx, work.parent, work.inspirations, work.failures,
                                                          sel.memory, tag=f"r{k}/plan", best=work.best)
            p.planner_called = True
    except BudgetExhausted as e:
        p.stop = e.stop
        return p

    def one(i: int) -> list[tuple[roles.Child, Future | None]]:
        try:
            child = roles.propose(gw, ctx, work.parent, p.plan, i, n, tag=f"r{k}/c{i}", repair_attempts=repair_attempts,
                                  inspirations=work.inspirations)
        except BudgetExhausted as e:  # the children written before the cap are still graded and kept
            p.stop = e.stop
            return [(roles.Child(None, "llm_error", CAP_REACHED), None)]
        # graded as soon as it exists; the same code in two children is graded once
        turns = [(child, submit(child.files, (k, i)) if child.files is not None else None)]
        for t in range(1, fix_turns + 1):
            last, future = turns[-1]
            said = _said(last, future, t - 1, i)
            if said is None:
                break
            try:
                fixed = roles.fix(gw, ctx, child.prompt or Prompt([child.transcript[0][0]]), last, said[1], said[0], tag=f"r{k}/c{i}/fix{t}")
            except BudgetExhausted as e:
                p.stop = e.stop
                break
            turns.append((fixed, submit(fixed.files, (k, i)) if fixed.files is not None else None))
        return turns

    def _said(last: roles.Child, future: Future | None, t: int, i: int) -> tuple[str, str] | None:
        """(why, what the grading said) of a child that gets a fix turn, else None."""
        if future is None or last.files is None or p.stop:
            return None
        try:
            v = future.result()
        except CancelledError:  # the search is stopping
            return None
        why = needs_fix(v, work.parent)
        if why is None:
            return None
        sol = solution_from(v, id=child_id(k, i, t), parent_id=work.parent.id, island=sel.island,
                            round=k, files=last.files, content_hash=v.candidate_hash or "")
        return why, verdict_text(sol, ctx.feedback)

    done = in_parallel([lambda i=i: one(i) for i in range(n)])
    for i, turns in enumerate(done):
        for t, (c, f) in enumerate(turns):
            p.drafts.append(c)
            p.verdicts.append(f)
            p.turns.append((i, t))
    return p
