"""pesflow's population database: islands, MAP-Elites cells, parent sampling, checkpoints.

What it holds
-------------
Every graded candidate is a `Solution`, kept for the whole run (`all()`), failures included
(`failures()`: not correct, evaluator.verdict's one rule, or not a result, evaluator.trust's one
rule: a suspect or one awaiting review, unless a person accepted it). Only correct results with a
positive, finite speedup (`fitness`) become *members* of an island, and only members are parents or
inspirations. `review` applies a person's decision afterwards (a resumed run's journal). A correct
solution without a usable speedup is stored but never a member:
there is nothing to rank it by. A solution whose `duplicate_of` is set (same code as an
earlier one, verdict reused) is stored but never a member, never in a cell, never in
`best()`/`top()` and never returned by `by_hash()`: the code is already there once.
The baseline (round 0) is a member of every island and the parent of last resort.

Features and cells
------------------
- code_lines: total lines of the scope files.
- diff_lines: lines added plus lines removed against the baseline's scope files
  (difflib, per file; a file present on one side only counts all its lines).
Both are binned on a FIXED log2 scale tied to the baseline's line count L0, so a
solution's cell never moves as the population grows:
- code_lines: bin = bins//2 + floor(2*log2(code_lines / L0)), half-octave steps around the
  baseline's size. With bins=4: < 0.71*L0, 0.71-1*L0, 1-1.41*L0, >= 1.41*L0.
- diff_lines: with u = max(1, L0/16), bin = floor(log2(1 + diff_lines / u)). With bins=4
  and L0=200: 0-12, 13-37, 38-87, >= 88 changed lines.
Both are clamped to [0, bins-1]. A cell key is the bins joined by "-" ("2-1"); each island
keeps per cell the member with the highest fitness (the first one on a tie). Cells are
the elite archive: a member pushed out of an island's member list by
`max_members_per_island` stays in its cell, and in `all()`.

Selection (`sample`)
--------------------
Fitness is normalized over the island's members: min-max on log(speedup), all equal -> all
1.0. Then, with one draw u: u < exploration_ratio -> uniform member; u < exploration +
exploitation -> the island's best; otherwise Boltzmann weights exp(norm / temperature).
Only the normalized value ever enters the Boltzmann weight, so multiplying every speedup
by a constant changes nothing. Inspirations (distinct from the parent): the best other
elite of the island's cells, then a random draw from the island's other cell elites, then
if short from other islands' cell elites, then from the island's remaining members.
Every draw comes from the caller's `random.Random`; candidate lists are ordered by the
order of addition, so the same state and seed give the same picks.
LoongFlow's checkpoint layout of a population: agent/population/loongflow_format.py.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent.population.code_key import code_key
from agent.population.sampling import FEATURES, code_lines, diff_lines, feature_bin, select_parent
from agent.population.solution import PopulationError, Solution, UnknownSolution  # noqa: F401 - the population's names
from evaluator.trust.findings import Trust

FORMAT = "pesflow.population/1"
_STATE_KEYS = ("config", "baseline_files", "solutions", "members", "cells", "sample_counts", "last_migration")


class PopulationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    islands: int = Field(2, ge=1)
    features: list[str] = Field(default_factory=lambda: list(FEATURES))
    bins: int = Field(4, ge=1)
    temperature: float = Field(0.3, gt=0)  # on normalized fitness in [0, 1]
    exploration_ratio: float = Field(0.2, ge=0, le=1)
    exploitation_ratio: float = Field(0.3, ge=0, le=1)
    inspirations: int = Field(2, ge=0)
    migration_interval: int = Field(4, ge=0)  # rounds; 0 = never
    migration_count: int = Field(1, ge=0)
    max_members_per_island: int = Field(64, ge=1)

    @field_validator("features")
    @classmethod
    def _known_features(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if f not in FEATURES]
        if bad:
            raise ValueError(f"unknown feature(s) {bad}; use some of {list(FEATURES)}")
        if len(set(v)) != len(v):
            raise ValueError(f"features {v} repeat a name; list each once")
        return v

    @model_validator(mode="after")
    def _ratios(self) -> PopulationConfig:
        if self.exploration_ratio + self.exploitation_ratio > 1:
            raise ValueError("exploration_ratio + exploitation_ratio must be <= 1; lower one of them")
        return self


# ---------------------------------------------------------------- the database


class Population:
    def __init__(self, config: PopulationConfig, baseline_files: dict[str, str]):
        self.config = config
        self.baseline_files = dict(baseline_files)
        self._baseline_lines = code_lines(self.baseline_files)
        self._sols: dict[str, Solution] = {}  # insertion order is the order of addition
        self._index: dict[str, int] = {}
        self._first_by_hash: dict[str, str] = {}
        self._first_by_code: dict[str, str] = {}  # code_key -> the first graded spelling of that program
        self._baseline_id: str | None = None
        self._members: list[list[str]] = [[] for _ in range(config.islands)]
        self._cells: list[dict[str, str]] = [{} for _ in range(config.islands)]
        self._sample_counts: dict[str, int] = {}
        self._last_migration = 0  # a round migrates once, even if a resumed run asks again

    # -- reading

    def get(self, id: str) -> Solution:
        try:
            return self._sols[id]
        except KeyError:
            raise UnknownSolution(f"unknown solution id {id!r}; ids come from Population.all()") from None

    def __contains__(self, id: object) -> bool:
        return id in self._sols

    def __len__(self) -> int:
        return len(self._sols)

    def all(self) -> list[Solution]:
        return list(self._sols.values())

    def failures(self) -> list[Solution]:
        return [s for s in self._sols.values() if not s.correct or not s.is_result]

    def by_hash(self, content_hash: str) -> Solution | None:
        sid = self._first_by_hash.get(content_hash)
        return self._sols[sid] if sid is not None else None

    def by_code(self, key: str) -> Solution | None:
        """The first solution that is the same program (agent/search/code_key.py), however spelled."""
        sid = self._first_by_code.get(key)
        return self._sols[sid] if sid is not None else None

    def _index_code(self, sol: Solution) -> None:
        if sol.duplicate_of is None and not sol.content_hash.startswith("none-"):  # none-: no code of its own
            self._first_by_code.setdefault(code_key(sol.files), sol.id)

    def members(self, island: int) -> list[Solution]:
        self._check_island(island)
        return [self._sols[i] for i in self._ordered(self._members[island])]

    def elites(self, island: int) -> dict[str, Solution]:
        """Cell key -> the best member ever placed in that cell of this island."""
        self._check_island(island)
        return {key: self._sols[sid] for key, sid in self._cells[island].items()}

    def cell_of(self, sol: Solution) -> str:
        feats = sol.features or self._features(sol.files)
        coords = [feature_bin(f, feats[f], self._baseline_lines, self.config.bins) for f in self.config.features]
        return "-".join(map(str, coords)) or "_"

    def top(self, n: int) -> list[Solution]:
        if n < 0:
            raise PopulationError(f"top(n) needs n >= 0 (got {n})")
        ranked = [s for s in self._sols.values() if s.fitness is not None and s.duplicate_of is None]
        ranked.sort(key=lambda s: (-s.fitness, self._index[s.id]))  # type: ignore[operator]
        return ranked[:n]

    def best(self) -> Solution | None:
        """The fittest whose probes have run: a deferred one (trust.deferred) is never the best."""
        return next((s for s in self.top(len(self._sols)) if not s.trust.deferred), None)

    def settle(self, sid: str, trust: Trust, counts: bool, profile: dict | None = None) -> None:
        """A deferred solution screened in full (trust: its own grading's; profile: that grading's,
        where it made one): it stays a member where that grading `counts` (correct, a result), else
        it leaves its islands and cells."""
        sol = self._sols[sid]
        sol.trust = trust.model_copy(update={"deferred": False, "review": sol.trust.review})
        if profile:
            sol.profile = dict(profile)
        if not counts:
            sol.trust = sol.trust.model_copy(update={"suspect": True, "reasons": sol.trust.reasons or [
                "not reproduced: graded again with every probe when picked, it was not correct"]})
            self._leave(sid)

    def island_for_round(self, round: int) -> int:
        if round < 1:
            raise PopulationError(f"island_for_round needs round >= 1 (got {round}); round 0 is the baseline")
        return (round - 1) % self.config.islands

    # -- writing

    def add(self, sol: Solution) -> None:
        if sol.id in self._sols:
            raise PopulationError(f"solution id {sol.id!r} is already in the population; give each candidate a new id")
        self._check_island(sol.island)
        if sol.parent_id is not None and sol.parent_id not in self._sols:
            raise PopulationError(f"solution {sol.id!r}: parent {sol.parent_id!r} is unknown; add the parent first")
        if sol.duplicate_of is not None and sol.duplicate_of not in self._sols:
            raise PopulationError(
                f"solution {sol.id!r}: duplicate_of {sol.duplicate_of!r} is unknown; add the original first"
            )
        sol = sol.model_copy(deep=True, update={"features": self._features(sol.files)})
        self._index[sol.id] = len(self._sols)
        self._sols[sol.id] = sol
        if sol.duplicate_of is None:
            self._first_by_hash.setdefault(sol.content_hash, sol.id)
        self._index_code(sol)
        if sol.round == 0 and self._baseline_id is None:
            self._baseline_id = sol.id
        if sol.fitness is None or sol.duplicate_of is not None:
            return
        # The baseline seeds every island; everyone else lives where it was bred.
        for island in range(self.config.islands) if sol.round == 0 else [sol.island]:
            self._join(sol.id, island)

    def sample(self, island: int, rng: random.Random) -> tuple[Solution, list[Solution]]:
        self._check_island(island)
        ids = self._ordered(self._members[island])
        if ids:
            fit = [self._sols[i].fitness for i in ids]
            k, _ = select_parent(
                fit,  # type: ignore[arg-type]
                rng,
                exploration_ratio=self.config.exploration_ratio,
                exploitation_ratio=self.config.exploitation_ratio,
                temperature=self.config.temperature,
            )
            parent_id = ids[k]
        elif self._baseline_id is not None:
            parent_id = self._baseline_id
        else:
            raise PopulationError(f"island {island} has no correct member and there is no baseline; "
                                  "add the baseline (round 0) first")
        self._sample_counts[parent_id] = self._sample_counts.get(parent_id, 0) + 1
        return self._sols[parent_id], [self._sols[i] for i in self._inspirations(island, parent_id, rng)]

    def review(self, content_hash: str, decision: dict[str, Any]) -> list[str]:
        """A person's decision (pesflow review) on the code of that hash, on every solution of it;
        an accepted one becomes a member where `add` would have put it, a rejected one leaves its
        islands and cells (each cell then holds its best remaining member). Returns the ids."""
        ids = [s.id for s in self._sols.values() if s.content_hash == content_hash]
        for sid in ids:
            sol = self._sols[sid]
            sol.trust = sol.trust.model_copy(update={"review": dict(decision)})
        first = self._first_by_hash.get(content_hash)
        if first is None:
            return ids
        sol = self._sols[first]
        islands = range(self.config.islands) if sol.round == 0 else [sol.island]
        if sol.fitness is None:
            self._leave(first)
        else:
            for island in islands:
                if first not in self._members[island]:
                    self._join(first, island)
        return ids

    def _leave(self, sid: str) -> None:
        for island in range(self.config.islands):
            if sid in self._members[island]:
                self._members[island].remove(sid)
            cells = self._cells[island]
            for key in [k for k, v in cells.items() if v == sid]:
                rest = [i for i in self._ordered(self._members[island]) if self.cell_of(self._sols[i]) == key]
                if rest:
                    cells[key] = min(rest,
                                     key=lambda i: (-self._sols[i].fitness, self._index[i]))  # type: ignore[operator]
                else:
                    del cells[key]

    def migrate(self, round: int) -> list[tuple[str, int, int]]:
        """At multiples of migration_interval the best migration_count members of each island
        not already on the next island join it (ring). Each round migrates at most once."""
        cfg = self.config
        if cfg.migration_interval == 0 or cfg.islands < 2 or round <= 0 or round % cfg.migration_interval:
            return []
        if round <= self._last_migration:
            return []
        self._last_migration = round
        # Chosen from every island before anyone moves: a migrant does not hop twice in one call.
        picks = []
        for src in range(cfg.islands):
            dst = (src + 1) % cfg.islands
            ranked = sorted(self._members[src],
                            key=lambda i: (-self._sols[i].fitness, self._index[i]))  # type: ignore[operator]
            picks += [(sid, src, dst) for sid in ranked if sid not in self._members[dst]][: cfg.migration_count]
        for sid, _, dst in picks:
            self._join(sid, dst)
        return picks

    # -- persistence

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "config": self.config.model_dump(),
            "baseline_files": dict(self.baseline_files),
            "solutions": [s.model_dump() for s in self._sols.values()],
            "members": [list(m) for m in self._members],
            "cells": [dict(c) for c in self._cells],
            "sample_counts": dict(self._sample_counts),
            "last_migration": self._last_migration,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Population:
        if d.get("format") != FORMAT:
            raise PopulationError(f"not a pesflow population (format {d.get('format')!r}, expected {FORMAT!r})")
        missing = [k for k in _STATE_KEYS if k not in d]
        if missing:
            raise PopulationError(f"population dict lacks {missing}; the file is damaged or from another version")
        pop = cls(PopulationConfig.model_validate(d["config"]), d["baseline_files"])
        for raw in d["solutions"]:
            sol = Solution.model_validate(raw)  # stored as computed: features are not recomputed
            pop._index[sol.id] = len(pop._sols)
            pop._sols[sol.id] = sol
            if sol.duplicate_of is None:
                pop._first_by_hash.setdefault(sol.content_hash, sol.id)
            pop._index_code(sol)
            if sol.round == 0 and pop._baseline_id is None:
                pop._baseline_id = sol.id
        if len(d["members"]) != pop.config.islands or len(d["cells"]) != pop.config.islands:
            raise PopulationError("population dict: members/cells do not match config.islands; the file is damaged")
        refs = ([i for m in d["members"] for i in m] + [i for c in d["cells"] for i in c.values()]
                + list(d["sample_counts"]))
        missing = sorted({i for i in refs if i not in pop._sols})
        if missing:
            raise PopulationError(f"population dict refers to unknown solutions {missing[:5]}; the file is damaged")
        pop._members = [list(m) for m in d["members"]]
        pop._cells = [dict(c) for c in d["cells"]]
        pop._sample_counts = {k: int(v) for k, v in d["sample_counts"].items()}
        pop._last_migration = int(d["last_migration"])
        return pop

    # -- internals

    def _check_island(self, island: int) -> None:
        if not 0 <= island < self.config.islands:
            raise PopulationError(f"island {island} does not exist; islands are 0..{self.config.islands - 1}")

    def _ordered(self, ids: Any) -> list[str]:
        return sorted(ids, key=self._index.__getitem__)

    def _features(self, files: dict[str, str]) -> dict[str, float]:
        return {
            "code_lines": float(code_lines(files)),
            "diff_lines": float(diff_lines(self.baseline_files, files)),
        }

    def _island_top(self, island: int) -> list[Solution]:
        ranked = sorted(self._members[island],
                        key=lambda i: (-self._sols[i].fitness, self._index[i]))  # type: ignore[operator]
        return [self._sols[i] for i in ranked]

    def _join(self, sid: str, island: int) -> None:
        sol = self._sols[sid]
        if sid not in self._members[island]:
            self._members[island].append(sid)
        key = self.cell_of(sol)
        cells = self._cells[island]
        holder = cells.get(key)
        if holder is None or sol.fitness > self._sols[holder].fitness:  # type: ignore[operator]
            cells[key] = sid
        self._evict(island)

    def _evict(self, island: int) -> None:
        members = self._members[island]
        while len(members) > self.config.max_members_per_island:
            # The worst non-baseline member leaves (the later one on a tie); its cell keeps it.
            candidates = [i for i in members if self._sols[i].round != 0]
            if not candidates:
                return
            worst = min(candidates, key=lambda i: (self._sols[i].fitness, -self._index[i]))
            members.remove(worst)

    def _inspirations(self, island: int, parent_id: str, rng: random.Random) -> list[str]:
        n = self.config.inspirations
        chosen: list[str] = []
        fit = lambda i: (-self._sols[i].fitness, self._index[i])  # type: ignore[operator]  # noqa: E731
        # not screened in full: its code is shown to no model
        waiting = {i for i, s in self._sols.items() if s.trust.deferred}
        own = self._ordered({i for i in self._cells[island].values() if i != parent_id} - waiting)
        if own and n:
            first = min(own, key=fit)
            rest = [i for i in own if i != first]
            chosen = [first] + rng.sample(rest, min(n - 1, len(rest)))
        others = self._ordered(
            {i for j, c in enumerate(self._cells) if j != island for i in c.values()} - {parent_id, *chosen} - waiting
        )
        chosen += rng.sample(others, min(n - len(chosen), len(others)))
        left = self._ordered(set(self._members[island]) - {parent_id, *chosen} - waiting)
        chosen += rng.sample(left, min(n - len(chosen), len(left)))
        return chosen

    def generation(self, sid: str) -> int:
        depth, seen = 0, {sid}
        while (p := self._sols[sid].parent_id) is not None and p in self._sols and p not in seen:
            depth, sid = depth + 1, p
            seen.add(p)
        return depth

    # -- what the LoongFlow export reads (agent/population/loongflow_format.py)

    def order(self, sid: str) -> int:
        """When a solution was added (0, 1, 2, ...)."""
        return self._index[sid]

    def sample_count(self, sid: str) -> int:
        return self._sample_counts.get(sid, 0)

    def member_ids(self, island: int) -> list[str]:
        return self._ordered(self._members[island])

    def cells(self, island: int) -> dict[str, str]:
        return dict(sorted(self._cells[island].items()))

    def island_top(self, island: int) -> list[Solution]:
        return self._island_top(island)

    @property
    def last_migration(self) -> int | None:
        return self._last_migration
