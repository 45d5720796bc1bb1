"""The search as a LangGraph graph: named steps and explicit transitions, easy to follow in a trace.

    START -> baseline -> launch -> collect -> summarize -> record -+-> launch
               |                      |                      ^     |
               |                      +-- (the USD cap) -----+     |
               +-- (no LLM configured) ----------------------------+-> finalize -> END

`launch` starts the proposals of the rounds selected so far (pipeline_depth of them in flight);
`collect` applies the next round, in order, once its verdicts are in (agent/search/steps.py).
"""

from __future__ import annotations

from agent.search.state import RoundState
from agent.search.steps import Search


def _after(state: RoundState) -> str:
    return "finalize" if state.get("stop") else "launch"


def build(search: Search):
    from langgraph.graph import END, START, StateGraph  # slow to import: commands without a search skip it

    g = StateGraph(RoundState)
    for name in ("baseline", "launch", "collect", "summarize", "record", "finalize"):
        g.add_node(name, getattr(search, name))
    # A resumed run enters at `launch` (or `finalize`) with the state of its last checkpoint.
    g.add_conditional_edges(START, lambda s: s.get("enter", "baseline"),
                            {"baseline": "baseline", "launch": "launch", "finalize": "finalize"})
    g.add_conditional_edges("baseline", _after, {"launch": "launch", "finalize": "finalize"})
    g.add_edge("launch", "collect")
    # The USD cap reached while proposing: the round is recorded as it stands, and the search ends.
    g.add_conditional_edges("collect", lambda s: "record" if s.get("stop") else "summarize",
                            {"record": "record", "summarize": "summarize"})
    g.add_edge("summarize", "record")
    g.add_conditional_edges("record", _after, {"launch": "launch", "finalize": "finalize"})
    g.add_edge("finalize", END)
    return g.compile()


def run(search: Search, start: RoundState | None = None) -> RoundState:
    graph = build(search)
    # Each round is 4 steps; the default recursion limit (25) would stop a long search.
    limit = 10 * (search.loop.rounds + 2)
    return graph.invoke(start or {"round": 0, "enter": "baseline"}, config={"recursion_limit": limit})
