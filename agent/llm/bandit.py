"""Which of a role's models answers its next call: chosen by what each has earned per dollar.

A role given several models (`llm.models`) plays UCB1 over them. A model's value is its gain per
USD so far (gain: what the children it wrote earned, credited once they are graded; see
`gain`), divided by the best model's, so values lie in [0, 1]; its score is that value plus
`explore * sqrt(ln N / n)` (n its calls, N the role's). A model not yet called goes first, in
the listed order; ties go to the earlier one. Unpriced models (cost 0) are valued per call.
Pure and deterministic: the same history gives the same choice, and the journal holds the
history (each choice with its reason, each credit), so a resumed run rebuilds it and a replay
takes the recorded choices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Arm:
    calls: int = 0
    usd: float = 0.0
    gain: float = 0.0

    def value(self) -> float:
        if self.usd > 0:
            return self.gain / self.usd
        return self.gain / self.calls if self.calls else 0.0


@dataclass
class ModelBandit:
    models: list[str]
    explore: float = 1.0
    arms: dict[str, Arm] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for m in self.models:
            self.arms.setdefault(m, Arm())

    def choose(self) -> tuple[str, dict[str, Any]]:
        """(the model, why: each model's calls, USD, gain and score)."""
        for m in self.models:
            if self.arms[m].calls == 0:
                return m, {"rule": "not yet called", **self._table({})}
        best = max(a.value() for a in self.arms.values()) or 1.0
        total = sum(a.calls for a in self.arms.values())
        scores = {m: a.value() / best + self.explore * math.sqrt(math.log(total) / a.calls)
                  for m, a in self.arms.items()}
        pick = max(self.models, key=lambda m: (scores[m], -self.models.index(m)))
        return pick, {"rule": "ucb1", **self._table(scores)}

    def chosen(self, model: str) -> None:
        """A call given to `model` (counted at once: calls in flight together are spread)."""
        arm = self.arms.get(model)
        if arm is not None:
            arm.calls += 1

    def paid(self, model: str, usd: float) -> None:
        arm = self.arms.get(model)
        if arm is not None:
            arm.usd += max(usd, 0.0)

    def credit(self, model: str, gain: float) -> None:
        arm = self.arms.get(model)
        if arm is not None:
            arm.gain += max(gain, 0.0)

    def _table(self, scores: dict[str, float]) -> dict[str, Any]:
        return {"arms": {m: {"calls": a.calls, "usd": round(a.usd, 6), "gain": round(a.gain, 4),
                             **({"score": round(scores[m], 4)} if m in scores else {})} for m, a in self.arms.items()}}


def gain(counts: bool, fitness: float | None, parent_fitness: float | None) -> float:
    """What a child earned for the model that wrote it: nothing unless its grading counts and it is
    no slower than its parent; then 1, plus the doublings it gained on the parent."""
    if not counts or not fitness or fitness <= 0:
        return 0.0
    if parent_fitness and parent_fitness > 0:
        if fitness < parent_fitness * 0.999:
            return 0.0
        return 1.0 + max(math.log2(fitness / parent_fitness), 0.0)
    return 1.0
