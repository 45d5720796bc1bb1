"""The search as a LangGraph graph: named steps and explicit transitions, easy to follow in a trace.

    START -> baseline -> select -> plan -> execute -> evaluate -> summarize -> record -+-> select
               |                                                                    |
               +-- (no LLM configured) ---------------------------------------------+-> finalize -> END
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from agent.search import RoundState, Search


def _after(search: Search, state: RoundState) -> str:
    return "finalize" if state.get("stop") else "select"


def build(search: Search):
    g = StateGraph(RoundState)
    for name in ("baseline", "select", "plan", "execute", "evaluate", "summarize", "record", "finalize"):
        g.add_node(name, getattr(search, name))
    # A resumed run enters at `select` (or `finalize`) with the state of its last checkpoint.
    g.add_conditional_edges(START, lambda s: s.get("enter", "baseline"),
                            {"baseline": "baseline", "select": "select", "finalize": "finalize"})
    g.add_conditional_edges("baseline", lambda s: _after(search, s), {"select": "select", "finalize": "finalize"})
    g.add_edge("select", "plan")
    g.add_edge("plan", "execute")
    g.add_edge("execute", "evaluate")
    g.add_edge("evaluate", "summarize")
    g.add_edge("summarize", "record")
    g.add_conditional_edges("record", lambda s: _after(search, s), {"select": "select", "finalize": "finalize"})
    g.add_edge("finalize", END)
    return g.compile()


def run(search: Search, start: RoundState | None = None) -> RoundState:
    graph = build(search)
    # Each round is 7 steps; the default recursion limit (25) would stop a long search.
    limit = 10 * (search.cfg.loop.rounds + 2)
    return graph.invoke(start or {"round": 0, "enter": "baseline"}, config={"recursion_limit": limit})
