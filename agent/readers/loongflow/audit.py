"""The audit of a LoongFlow trace: parent chains, the best against the solutions, the score
trajectory, failures by kind, missing files, counts. Pure, over a Trace."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from agent.readers.loongflow.trace import (Checkpoint, LFSolution, Trace, TraceReport, _TOL, as_int, as_number,
                                           failure_kind, fmt_number, read_trace)

def merged_solutions(trace: Trace) -> tuple[dict[str, LFSolution], list[str]]:
    """Every solution any checkpoint holds (its latest version), and code that changed between checkpoints."""
    union: dict[str, LFSolution] = {}
    seen_in: dict[str, str] = {}
    problems = []
    for cp in trace.checkpoints:
        items = list(cp.solutions.items())
        if cp.best is not None and cp.best.solution_id not in cp.solutions:
            items.append((cp.best.solution_id, cp.best))  # the file is missing, but the solution is real
        for sid, s in items:
            old = union.get(sid)
            if old is not None and old.solution != s.solution and sid in cp.solutions:
                problems.append(f"solution {sid}: its code differs between {seen_in[sid]} and {cp.name}")
            if old is None or sid in cp.solutions:
                union[sid], seen_in[sid] = s, cp.name
    return union, problems


def _chrono(union: dict[str, LFSolution]) -> list[str]:
    return sorted(union, key=lambda i: (union[i].iteration or 0, union[i].timestamp, i))


def parent_order(union: dict[str, LFSolution]) -> tuple[list[str], dict[str, str | None], list[list[str]]]:
    """Ids with every parent before its children (else chronological), the parent each keeps
    (None: missing, or cut to break a cycle), and the cycles found (child -> parent, back to the first).

    A cycle is cut at its earliest solution: its parent is then a later one, the one edge
    that cannot be true.
    """
    chrono = _chrono(union)
    rank = {sid: n for n, sid in enumerate(chrono)}
    parent = {sid: (union[sid].parent_id if union[sid].parent_id in union else None) for sid in chrono}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the current walk, 2 done
    for start in chrono:  # each node has one parent, so each cycle is met exactly once
        path: list[str] = []
        cur: str | None = start
        while cur is not None and cur not in state:
            state[cur] = 1
            path.append(cur)
            cur = parent[cur]
        if cur is not None and state[cur] == 1:
            loop = path[path.index(cur):]
            first = min(loop, key=rank.__getitem__)
            loop = loop[loop.index(first):] + loop[: loop.index(first)]
            cycles.append(loop + [first])
            parent[first] = None
        for sid in path:
            state[sid] = 2
    order: list[str] = []
    placed: set[str] = set()
    for start in chrono:
        chain: list[str] = []
        cur = start
        while cur is not None and cur not in placed:
            chain.append(cur)
            placed.add(cur)
            cur = parent[cur]
        order += reversed(chain)
    return order, parent, cycles




def _some(items: Iterable[str], n: int = 6) -> str:
    items = list(items)
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def audit_loongflow(path: Path | str) -> TraceReport:
    return audit_trace(read_trace(path))


@dataclass
class _Chains:
    """The parent chains: roots, solutions whose parent is in no checkpoint, cycles, each one's depth."""
    roots: list[str]
    orphans: list[str]
    cycles: list[list[str]]
    depth: dict[str, int]


@dataclass
class _Failures:
    """Each solution's failure kind (None: passed), the failed ones by kind, the evaluator dirs' kinds."""
    kinds: dict[str, str | None]
    by_kind: dict[str, list[str]]
    ev_kinds: Counter[str]
    passed: list[str]


def audit_trace(trace: Trace) -> TraceReport:
    r = TraceReport()
    r.violations.extend(trace.unreadable)
    union, code_changes = merged_solutions(trace)
    r.violations.extend(code_changes)
    _audit_layout(trace, union, r)
    for cp in trace.checkpoints:
        _audit_checkpoint(cp, union, r)
    chains = _audit_parents(union, r)
    fails = _audit_failures(trace, union, r)
    _audit_scores(union, r)
    trajectory = _trajectory(trace, union)
    _audit_trajectory(trajectory, r)
    overall = max(((union[i].score, i) for i in fails.passed if union[i].score is not None), default=None)
    r.stats = {
        "root": str(trace.root),
        "checkpoints": len(trace.checkpoints),
        "iterations": len(trace.iterations),
        "solutions": len(union),
        "passed": len(fails.passed),
        "failed": len(union) - len(fails.passed),
        "roots": chains.roots,
        "orphans": chains.orphans,
        "cycles": chains.cycles,
        "max_depth": max(chains.depth.values(), default=0),
        "islands": _island_count(trace, union),
        "evaluator_dirs": len(trace.evaluations),
        "evaluator_results": sum(1 for e in trace.evaluations if e.result is not None),
        "failures_by_kind": {"solutions": {k: len(v) for k, v in sorted(fails.by_kind.items())},
                             "evaluator": {k: n for k, n in sorted(fails.ev_kinds.items()) if k != "passed"}},
        "trajectory": trajectory,
        "by_iteration": _by_iteration(union, fails.kinds),
        "best": {"id": overall[1], "score": overall[0]} if overall else None,
    }
    return r


def _audit_parents(union: dict[str, LFSolution], r: TraceReport) -> _Chains:
    order, effective, cycles = parent_order(union)
    roots = [i for i in _chrono(union) if not union[i].parent_id]
    orphans = [i for i in _chrono(union) if union[i].parent_id and union[i].parent_id not in union]
    for sid in orphans:
        r.violations.append(f"solution {sid}: parent {union[sid].parent_id} is in no "
                            "checkpoint (the parent chain is broken)")
    for c in cycles:
        r.violations.append(f"parent cycle: {' -> '.join(c)}")
    depth: dict[str, int] = {}
    for sid in order:  # parents come first, so their depth is known
        p = effective[sid]
        depth[sid] = depth[p] + 1 if p is not None else 0
    r.findings.append(f"parent chains: {len(union)} solutions, {len(roots)} root(s) ({_some(roots)}), "
                      f"{len(orphans)} with a missing parent, {len(cycles)} cycle(s), "
                      f"longest chain {max(depth.values(), default=-1) + 1}")
    return _Chains(roots, orphans, cycles, depth)


def _audit_failures(trace: Trace, union: dict[str, LFSolution], r: TraceReport) -> _Failures:
    kinds = {sid: failure_kind(s.evaluation, s.score) for sid, s in union.items()}
    by_kind: dict[str, list[str]] = {}
    for sid in _chrono(union):
        if kinds[sid] is not None:
            by_kind.setdefault(kinds[sid], []).append(sid)  # type: ignore[arg-type]
    ev_kinds = Counter(failure_kind(e.result, as_number(e.result.get("score"))) or "passed"
                       for e in trace.evaluations if e.result is not None)
    passed = [i for i in union if kinds[i] is None]
    r.findings.append(f"solutions: {len(passed)} passed, {len(union) - len(passed)} failed"
                      + "".join(f"; {k} {len(v)} ({_some(v)})" for k, v in sorted(by_kind.items())))
    if trace.evaluations:
        matched = _match_evaluations(trace, union)
        tied = sum(1 for e in trace.evaluations if matched.get(e.name))
        r.findings.append(f"evaluator: {len(trace.evaluations)} dirs, "
                          f"{sum(1 for e in trace.evaluations if e.result is not None)} "
                          f"with a result ({', '.join(f'{k} {n}' for k, n in sorted(ev_kinds.items()))}); "
                          f"{tied} evaluated a stored solution's code, "
                          f"{len(trace.evaluations) - tied} did not (attempts not kept)")
    return _Failures(kinds, by_kind, ev_kinds, passed)


def _audit_scores(union: dict[str, LFSolution], r: TraceReport) -> None:
    """A solution's score against its own evaluation's."""
    for sid in _chrono(union):
        s, es = union[sid], as_number(union[sid].evaluation.get("score"))
        if es is not None and s.score is not None and not math.isclose(es, s.score, rel_tol=1e-6, abs_tol=_TOL):
            r.findings.append(f"solution {sid}: score {fmt_number(s.score)} differs from its "
                              f"evaluation's score {fmt_number(es)}")


def _trajectory(trace: Trace, union: dict[str, LFSolution]) -> list[dict[str, Any]]:
    """The best passing solution of each checkpoint."""
    rank = {sid: n for n, sid in enumerate(_chrono(union))}
    trajectory = []
    for cp in trace.checkpoints:
        pool = dict(cp.solutions)
        if cp.best is not None:
            pool.setdefault(cp.best.solution_id, cp.best)
        scored = [(s.score, sid) for sid, s in pool.items()
                  if s.score is not None and failure_kind(s.evaluation, s.score) is None]
        top = max(scored, key=lambda t: (t[0], -rank.get(t[1], 0)), default=None)  # the earliest on a tie
        trajectory.append({"iteration": cp.iteration, "checkpoint": cp.name, "solutions": len(cp.solutions),
                           "best_id": top[1] if top else None, "best_score": top[0] if top else None})
    return trajectory


def _audit_trajectory(trajectory: list[dict[str, Any]], r: TraceReport) -> None:
    if trajectory:
        r.findings.append("score trajectory (best per checkpoint iteration): "
                          + ", ".join(f"{t['iteration']}: {fmt_number(t['best_score'])} ({t['best_id']})"
                                      for t in trajectory))
    for a, b in zip(trajectory, trajectory[1:]):
        if a["best_score"] is not None and (b["best_score"] is None or b["best_score"] < a["best_score"] - _TOL):
            r.findings.append(f"best score falls from {fmt_number(a['best_score'])} at {a['checkpoint']} to "
                              f"{fmt_number(b['best_score'])} at {b['checkpoint']} (a solution was lost between them)")


def _by_iteration(union: dict[str, LFSolution], kinds: dict[str, str | None]) -> list[dict[str, Any]]:
    """Per iteration: its solutions, those that passed, its best score and the best so far."""
    by_iteration = []
    running: float | None = None
    for k in sorted({s.iteration or 0 for s in union.values()}):
        ids = [i for i in union if (union[i].iteration or 0) == k]
        ok = [union[i].score for i in ids if kinds[i] is None and union[i].score is not None]
        best = max(ok, default=None)
        running = best if running is None or (best is not None and best > running) else running
        by_iteration.append({"iteration": k, "solutions": len(ids), "passed": len(ok), "best_score": best,
                             "running_best": running})
    return by_iteration


def _audit_layout(trace: Trace, union: dict[str, LFSolution], r: TraceReport) -> None:
    V = r.violations
    if trace.checkpoints_dir is None:
        V.append("no database/checkpoints/ folder: the trace holds no solutions")
    if trace.iteration_dir is None:
        V.append("no iteration/ folder: the planner, executor and summarizer records are missing")
    if trace.evaluator_dir is None:
        V.append("no evaluator/ folder: the evaluation records are missing")
    for cp in trace.checkpoints:
        if cp.metadata is None and not (cp.path / "metadata.json").is_file():
            V.append(f"checkpoint {cp.name} has no metadata.json")
        if not cp.has_solutions_dir:
            V.append(f"checkpoint {cp.name} has no solutions/ folder")
        valid = any(s.score for s in cp.solutions.values())
        if cp.best is None and (valid or (cp.metadata or {}).get("best_solution_id")):
            V.append(f"checkpoint {cp.name} has no best_solution.json, though it holds scored solutions")
    for d in trace.iterations:
        if d.missing:
            V.append(f"iteration/{d.k} has no {', no '.join(m + '/' for m in d.missing)}")
    if trace.iteration_dir is not None:
        have = {d.k for d in trace.iterations}
        wanted = ({s.iteration for s in union.values() if s.iteration is not None}
                  | {cp.iteration for cp in trace.checkpoints})
        absent = sorted(k for k in wanted - have if k > 0)
        if absent:
            V.append(f"iteration/ has no folder for iteration(s) {_some(map(str, absent))}, "
                     "which solutions or checkpoints name")
    for what, bad in (
        ("no result file (evaluation_result.json or result.json)",
         [e.name for e in trace.evaluations if e.result_file is None]),
        ("no llm_code_*.py", [e.name for e in trace.evaluations if e.code_file is None]),
        ("no evaluation_process.log", [e.name for e in trace.evaluations if not e.has_log]),
    ):
        if bad:
            V.append(f"{len(bad)} evaluator dir(s) with {what}: {_some(bad)}")


def _meta_ids(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, id) for every solution id metadata.json names."""
    out: list[tuple[str, str]] = []
    for n, island in enumerate(meta.get("islands") or []):
        out += [(f"islands[{n}]", str(i)) for i in island or [] if i]
    out += [("elites", str(i)) for i in meta.get("elites") or [] if i]
    if meta.get("best_solution_id"):
        out.append(("best_solution_id", str(meta["best_solution_id"])))
    out += [(f"island_best_solution[{n}]", str(i)) for n, i in enumerate(meta.get("island_best_solution") or []) if i]
    for n, fmap in enumerate(meta.get("island_feature_map") or []):
        if isinstance(fmap, dict):
            out += [(f"island_feature_map[{n}]", str(i)) for i in fmap.values() if i]
    return out


def _audit_checkpoint(cp: Checkpoint, union: dict[str, LFSolution], r: TraceReport) -> None:
    V = r.violations
    # best_solution.json against the solutions
    if cp.best is not None:
        b = cp.best
        meta_best = (cp.metadata or {}).get("best_solution_id")
        if meta_best and meta_best != b.solution_id:
            V.append(f"checkpoint {cp.name}: best_solution.json is {b.solution_id} but metadata names {meta_best}")
        valid = {sid: s.score for sid, s in cp.solutions.items()
                 if s.score is not None and failure_kind(s.evaluation, s.score) is None}
        if valid:
            top_id = max(valid, key=lambda i: valid[i])  # type: ignore[arg-type, return-value]
            if b.score is None or valid[top_id] > b.score + _TOL:  # type: ignore[operator]
                V.append(f"checkpoint {cp.name}: best_solution.json is {b.solution_id} (score {fmt_number(b.score)}) "
                         f"but {top_id} scores {fmt_number(valid[top_id])}")
        own = cp.solutions.get(b.solution_id)
        if own is None:
            if cp.has_solutions_dir:
                V.append(f"checkpoint {cp.name}: best solution {b.solution_id} has no solutions/{b.solution_id}.json")
        else:
            if own.solution != b.solution:
                V.append(f"checkpoint {cp.name}: best_solution.json's code differs from solutions/{b.solution_id}.json")
            if own.score != b.score:
                V.append(f"checkpoint {cp.name}: best_solution.json's score {fmt_number(b.score)} differs from "
                         f"solutions/{b.solution_id}.json's {fmt_number(own.score)}")
    meta = cp.metadata
    if meta is None:
        return
    # counts
    n_files = len(cp.solutions)
    # LoongFlow: a solution without a (non-zero) score is not valid
    n_valid = sum(1 for s in cp.solutions.values() if s.score)
    tg, tv = as_int(meta.get("total_generated_solutions")), as_int(meta.get("total_valid_solutions"))
    if tg is not None and tg != n_files:
        V.append(f"checkpoint {cp.name}: metadata says {tg} solutions generated; solutions/ holds {n_files}")
    if tv is not None and tv != n_valid:
        V.append(f"checkpoint {cp.name}: metadata says {tv} valid solutions; solutions/ holds "
                 f"{n_valid} with a non-zero score")
    islands = meta.get("islands") or []
    cap = meta.get("island_capacity")
    if isinstance(cap, list) and len(cap) == len(islands):
        for n, (c, members) in enumerate(zip(cap, islands)):
            if as_int(c) != len(members or []):
                V.append(f"checkpoint {cp.name}: island_capacity[{n}] is {c} but "
                         f"islands[{n}] lists {len(members or [])}")
    ibs = meta.get("island_best_solution")
    if isinstance(ibs, list) and islands and len(ibs) != len(islands):
        V.append(f"checkpoint {cp.name}: {len(islands)} islands but island_best_solution has {len(ibs)} entries")
    # ids metadata names: a file missing here (the solution exists elsewhere) or an id that exists nowhere
    missing: dict[str, list[str]] = {}
    ghosts: dict[str, list[str]] = {}
    for where, sid in _meta_ids(meta):
        if sid in cp.solutions or (not cp.has_solutions_dir and sid in union):
            continue
        (missing if sid in union else ghosts).setdefault(sid, []).append(where)
    for sid, wheres in missing.items():
        V.append(f"checkpoint {cp.name}: metadata lists {sid} ({', '.join(dict.fromkeys(wheres))}) but "
                 f"solutions/{sid}.json is missing")
    for sid, wheres in ghosts.items():
        V.append(f"checkpoint {cp.name}: metadata lists {sid} ({', '.join(dict.fromkeys(wheres))}), "
                 "which is no solution in the trace")


def _island_count(trace: Trace, union: dict[str, LFSolution]) -> int:
    n = max((s.island_id + 1 for s in union.values()), default=1)
    for cp in trace.checkpoints:
        n = max(n, len((cp.metadata or {}).get("islands") or []))
    return max(n, 1)


def _match_evaluations(trace: Trace, union: dict[str, LFSolution]) -> dict[str, str | None]:
    """Evaluator dir -> the solution whose code it evaluated (LoongFlow records no link; the code is the link)."""
    exact: dict[str, str] = {}
    loose: dict[str, str] = {}
    for sid in _chrono(union):
        exact.setdefault(union[sid].solution, sid)
        loose.setdefault(union[sid].solution.strip(), sid)
    return {e.name: (exact.get(e.code) or loose.get(e.code.strip())) if e.code is not None else None
            for e in trace.evaluations}
