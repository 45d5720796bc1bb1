"""A round's proposal: its plan, then its executors' children, each child handed to the graders
the moment its code exists.

Runs on a thread of its own (agent/search/pipeline.py) while earlier rounds are graded, so it
touches nothing shared: it reads the solutions and the memory its selection named (resolved by
the search before it starts), and writes only through the gateway's journal. What it made is
written to the run directory when its round is applied, in round order (agent/search/steps.py).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from agent.llm.gateway import BudgetExhausted, Gateway
from agent.population.database import Solution
from agent.search import roles
from agent.search.pipeline import in_parallel
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


@dataclass
class Proposal:
    work: Work
    plan: str = roles.FALLBACK_PLAN
    planner_called: bool = False
    plan_prompt: str = ""
    plan_ok: bool = True
    drafts: list[roles.Child] = field(default_factory=list)
    verdicts: list[Future | None] = field(default_factory=list)  # per child; None: no code to grade
    stop: str | None = None  # budget_exhausted: the USD cap was reached while proposing (drafts: those made)


def propose(gw: Gateway, ctx: roles.Context, work: Work, submit: Submit, *, use_planner: bool,
            repair_attempts: int) -> Proposal:
    sel = work.selection
    k, n = sel.round, sel.children
    p = Proposal(work)
    try:
        if use_planner:
            p.plan, p.plan_prompt, p.plan_ok = roles.plan(gw, ctx, work.parent, work.inspirations, work.failures,
                                                          sel.memory, tag=f"r{k}/plan")
            p.planner_called = True
    except BudgetExhausted as e:
        p.stop = e.stop
        return p

    def one(i: int) -> tuple[roles.Child, Future | None]:
        try:
            child = roles.propose(gw, ctx, work.parent, p.plan, i, n, tag=f"r{k}/c{i}", repair_attempts=repair_attempts)
        except BudgetExhausted as e:  # the children written before the cap are still graded and kept
            p.stop = e.stop
            return roles.Child(None, "llm_error", CAP_REACHED), None
        # graded as soon as it exists; the same code in two children is graded once
        return child, (submit(child.files, (k, i)) if child.files is not None else None)

    done = in_parallel([lambda i=i: one(i) for i in range(n)])
    p.drafts = [c for c, _ in done]
    p.verdicts = [f for _, f in done]
    return p
