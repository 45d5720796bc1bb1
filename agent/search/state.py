"""What a search carries: the round's fields the graph passes from step to step, and all that a
checkpoint holds (pesflow_state.json), so that a resumed run continues from exactly there."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, TypedDict

from agent.population.database import Population, PopulationConfig


class RoundState(TypedDict, total=False):
    """The graph's state: the round applied next and why the search ends (agent/search/graph.py)."""

    round: int  # the round `collect` applies next
    plan: str
    stop: str  # why the search ends: rounds_done | budget_exhausted | no_llm ("": it goes on)
    enter: str  # where the graph starts: baseline (a new run), launch or finalize (a resumed one)


@dataclass(frozen=True)
class Selection:
    """What a round works on, chosen when its turn to be selected comes (after round
    `round - pipeline_depth` was applied): everything its prompts are built from, so that a
    resumed run proposes it exactly as the uninterrupted one did."""

    round: int
    island: int
    parent_id: str
    inspiration_ids: list[str]
    failure_ids: list[str]
    memory: list[str]
    children: int
    best_id: str | None = None  # the population's best when chosen, where it is not the parent (its profile)

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "island": self.island, "parent_id": self.parent_id,
                "inspiration_ids": list(self.inspiration_ids), "failure_ids": list(self.failure_ids),
                "memory": list(self.memory), "children": self.children, "best_id": self.best_id}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Selection":
        return Selection(d["round"], d["island"], d["parent_id"], list(d["inspiration_ids"]), list(d["failure_ids"]),
                         list(d["memory"]), d["children"], d.get("best_id"))


def rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, state: list[Any]) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))


@dataclass
class SearchState:
    """All that survives a round: the population, the RNG, the run's memory, the best so far, and
    the rounds selected but not yet applied (in flight when the checkpoint was written)."""

    rng: random.Random
    population: Population | None = None
    memory: list[str] = field(default_factory=list)
    best_by_round: list[dict[str, Any]] = field(default_factory=list)
    pending: dict[int, Selection] = field(default_factory=dict)

    def to_checkpoint(self, k: int, totals: dict[str, Any]) -> dict[str, Any]:
        assert self.population is not None
        return {"round": k, "next_round": k + 1, "population": self.population.to_dict(),
                "rng_state": rng_state(self.rng), "memory": self.memory, "best_by_round": self.best_by_round,
                "totals": totals, "pending": [self.pending[m].to_dict() for m in sorted(self.pending)]}

    def restore(self, state: dict[str, Any]) -> None:
        """The search as checkpointed at the end of a round."""
        self.population = Population.from_dict(state["population"])
        if state.get("rng_state"):
            set_rng_state(self.rng, state["rng_state"])
        self.memory = list(state.get("memory") or [])
        self.best_by_round = [b for b in state.get("best_by_round", []) if b["round"] <= state["round"]]
        # A checkpoint from before pipelining has none: its next round is selected afresh, as then.
        self.pending = {d["round"]: Selection.from_dict(d) for d in state.get("pending") or []}

    def start(self, config: PopulationConfig, baseline_files: dict[str, str]) -> Population:
        self.population = Population(config, baseline_files)
        return self.population
