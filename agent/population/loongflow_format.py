"""The LoongFlow checkpoint layout a population is exported in, so that LoongFlow's tools read ours.

Field names are those of LoongFlow's evolution memory: the `Solution` dataclass of
`agentsdk/memory/evolution/base_memory.py` and `InMemory.save_checkpoint` in
`agentsdk/memory/evolution/in_memory.py`, which writes dest/solutions/<solution_id>.json,
dest/metadata.json and dest/best_solution.json. The directory is written under a temporary
name next to dest, every file fsynced, then renamed into place: dest is either absent,
the previous complete checkpoint, or the new complete one.

solutions/<id>.json and best_solution.json (LoongFlow field <- pesflow):
  solution_id   <- id
  solution      <- the scope files concatenated, each after a "# ==== <path> ====" line
                   (LoongFlow's field is a string, so the string form goes here; the
                   path -> text object is metadata.files)
  generate_plan <- plan
  parent_id     <- parent_id, "" for none (LoongFlow's default)
  island_id     <- island (0 is island 0)
  iteration     <- round
  timestamp     <- the order of addition (0, 1, 2, ...): LoongFlow only sorts by it
  generation    <- depth in the parent chain (baseline 0)
  sample_cnt    <- how many times `sample` returned it as a parent
  sample_weight <- 0.0 (weights depend on the island and are recomputed at each sample)
  score         <- fitness (speedup when correct and a result), 0.0 otherwise (LoongFlow
                   keeps score-0 solutions out of its population, as we keep failures and
                   suspects out)
  evaluation    <- JSON text of {status, speedup, reward, hard_fail_reasons,
                   tests: {passed, total}, duplicate_of, trust: {suspect, needs_review,
                   reasons, review}} (LoongFlow's field is a string)
  summary       <- lessons
  metadata      <- {files, content_hash, features, cell, MAP_Elite_feature (JSON list of
                   bins, as LoongFlow stores it), correct, duplicate_of, evaluation (the
                   same object as above, not encoded)}
metadata.json: iteration and last_iteration (the round), num_islands, islands (member
ids per island), island_feature_map (cell -> id per island), island_best_solution,
elites (every cell elite), best_solution_id ("" when none), total_generated_solutions,
total_valid_solutions (solutions with a fitness), counts, feature_dimensions,
feature_bins, last_migration_generation (the last round that migrated), then the caller's
extra_metadata keys (which may not reuse those names).
best_solution.json is written only when there is a best, as LoongFlow does.
"""

from __future__ import annotations

import json
from typing import Any

from agent.population.database import Population, PopulationError, Solution
from agent.population.sampling import concatenated


def loongflow_files(pop: Population, *, iteration: int, extra_metadata: dict[str, Any]) -> dict[str, Any]:
    """Relative path -> JSON object of the checkpoint."""
    if iteration < 0:
        raise PopulationError(f"checkpoint iteration must be >= 0 (got {iteration})")
    best = pop.best()
    sols = pop.all()
    out: dict[str, Any] = {f"solutions/{s.id}.json": loongflow_solution(pop, s) for s in sols}
    if best is not None:
        out["best_solution.json"] = loongflow_solution(pop, best)
    islands = pop.config.islands
    meta: dict[str, Any] = {
        "iteration": iteration,
        "last_iteration": iteration,
        "num_islands": islands,
        "islands": [pop.member_ids(i) for i in range(islands)],
        "island_feature_map": [pop.cells(i) for i in range(islands)],
        "island_best_solution": [m[0].id if (m := pop.island_top(i)) else None for i in range(islands)],
        "elites": sorted({sid for i in range(islands) for sid in pop.cells(i).values()}, key=pop.order),
        "best_solution_id": best.id if best else "",
        "total_generated_solutions": len(sols),
        "total_valid_solutions": sum(1 for s in sols if s.fitness is not None),
        "counts": {
            "solutions": len(sols),
            "correct": sum(1 for s in sols if s.correct),
            "failures": len(pop.failures()),
            "duplicates": sum(1 for s in sols if s.duplicate_of is not None),
            "members_per_island": [len(pop.member_ids(i)) for i in range(islands)],
        },
        "feature_dimensions": list(pop.config.features),
        "feature_bins": pop.config.bins,
        "last_migration_generation": pop.last_migration,
    }
    clash = sorted(set(extra_metadata) & set(meta))
    if clash:
        raise PopulationError(f"extra_metadata reuses checkpoint keys {clash}; rename them")
    meta.update(extra_metadata)
    out["metadata.json"] = meta
    return out


def loongflow_solution(pop: Population, s: Solution) -> dict[str, Any]:
    evaluation = {
        "status": s.status,
        "speedup": s.speedup,
        "reward": s.reward,
        "hard_fail_reasons": list(s.hard_fail_reasons),
        "tests": {"passed": s.tests_passed, "total": s.tests_total},
        "duplicate_of": s.duplicate_of,
        "trust": s.trust.model_dump(include={"suspect", "needs_review", "reasons", "review"}),
    }
    cell = pop.cell_of(s)
    return {
        "solution_id": s.id,
        "solution": concatenated(s.files),
        "generate_plan": s.plan,
        "parent_id": s.parent_id or "",
        "island_id": s.island,
        "iteration": s.round,
        "timestamp": float(pop.order(s.id)),
        "generation": pop.generation(s.id),
        "sample_cnt": pop.sample_count(s.id),
        "sample_weight": 0.0,
        "score": s.fitness if s.fitness is not None else 0.0,
        "evaluation": json.dumps(evaluation, ensure_ascii=False),
        "summary": s.lessons,
        "metadata": {
            "files": dict(s.files),
            "content_hash": s.content_hash,
            "features": dict(s.features),
            "cell": cell,
            "MAP_Elite_feature": json.dumps([int(b) for b in cell.split("-")] if cell != "_" else []),
            "correct": s.correct,
            "duplicate_of": s.duplicate_of,
            "evaluation": evaluation,
        },
    }
