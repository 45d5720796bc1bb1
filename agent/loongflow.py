"""LoongFlow traces: read one, audit it, import it as a pesflow run directory.

The layout (LoongFlow's output folder, and the published mirrors of it such as the MLSys 2026
FlashInfer contest's Full-agent-trace_* folders):

    <root>/database/checkpoints/checkpoint-checkpoint-iter-<K>-<N>/
        best_solution.json   metadata.json   solutions/<solution_id>.json
    <root>/iteration/<K>/planner/  executor/<worker>_<attempt>/  executor/best_solution.py  summarizer/
    <root>/evaluator/eval_<hex>/
        llm_code_<hex>.py  evaluation_process.log  evaluation_result.json (or result.json)  .best_score.json

K is the iteration whose completion triggered the checkpoint and N how many iterations had
completed by then (LoongFlow's tag is "checkpoint-iter-K-N"; its memory prefixes
"checkpoint-"). Iterations run concurrently, so checkpoint K may hold solutions of later
iterations and miss some of earlier ones.

Field names, as read from LoongFlow's source (agentsdk/memory/evolution/in_memory.py:
`save_checkpoint`; framework/pes/evaluator/evaluator.py: `EvaluationResult`,
`_run_evaluate_target`) and from the contest mirror's files:
- a solution file: solution (the code, one string), solution_id, generate_plan, parent_id
  ("" for none), island_id, iteration, timestamp, generation, sample_cnt, sample_weight,
  score, evaluation (the evaluator's result as a JSON string), summary, metadata.
- metadata.json: total_generated_solutions (every solution), total_valid_solutions (those
  with a non-zero score: LoongFlow's population), islands, island_feature_map, elites,
  best_solution_id, island_best_solution, island_capacity, last_iteration, current_island,
  last_migration_generation, feature_stats.
- an evaluator result: status (success | validation_failed | execution_failed |
  framework_error), summary, score, metrics, artifacts; or {error, traceback} when the
  evaluation process itself died. .best_score.json: {score}.
pesflow's own checkpoints use the same names (agent/population.py), with an evaluation
whose status is pesflow's ("ok", "hard_fail", ...) and the files in metadata.files; both
are read.

A published mirror is often partial, so every file is optional: what is missing is
reported by the audit, never fatal to reading or importing.

Import (`import_loongflow`) maps a LoongFlow solution to a pesflow `Solution`: the code
string becomes files {<file_name>: code} (metadata.files when pesflow wrote it), score
becomes speedup (so fitness), status is "ok" when the evaluation passed and "hard_fail"
with the failure kind as its reason otherwise, iteration becomes round, island_id island.
A parent that no checkpoint holds, or one that closes a cycle, becomes None in the
population (Population refuses unknown parents); the journal keeps LoongFlow's value.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field

CHECKPOINT_RE = re.compile(r"^checkpoint-(?:checkpoint-)?iter-(\d+)-(\d+)$")
RESULT_FILES = ("evaluation_result.json", "result.json")  # LoongFlow writes the first; the mirror's README names the second
ROLE_DIRS = ("planner", "executor", "summarizer")
PASSED_STATUSES = ("success", "ok")
_ID_BAD = re.compile(r"[^A-Za-z0-9._-]")
_TOL = 1e-9


class LoongFlowError(ValueError):
    """One line naming the problem and the fix."""


class TraceReport(BaseModel):
    findings: list[str] = Field(default_factory=list)  # informational
    violations: list[str] = Field(default_factory=list)  # the trace contradicts itself or its layout
    stats: dict[str, Any] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def render(self) -> str:
        lines = [f"LoongFlow trace {self.stats.get('root', '?')}: {len(self.violations)} violation(s)"]
        lines += [f"  VIOLATION {v}" for v in self.violations]
        lines += [f"  {f}" for f in self.findings]
        return "\n".join(lines)


# ---------------------------------------------------------------- what a trace holds, as read


class LFSolution(BaseModel):
    """One solutions/<id>.json or best_solution.json, with LoongFlow's field names."""

    model_config = ConfigDict(extra="ignore")

    solution_id: str
    solution: str = ""
    generate_plan: str = ""
    parent_id: str = ""
    island_id: int = 0
    iteration: int | None = None
    timestamp: float = 0.0
    generation: int | None = None
    score: float | None = None
    evaluation: dict[str, Any] = Field(default_factory=dict)
    summary: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class Checkpoint(BaseModel):
    name: str
    path: Path
    iteration: int  # K from the name, else metadata's last_iteration, else the latest solution's
    completed: int | None = None  # N from the name
    metadata: dict[str, Any] | None = None
    best: LFSolution | None = None
    solutions: dict[str, LFSolution] = Field(default_factory=dict)  # from solutions/*.json
    has_solutions_dir: bool = True


class EvalRecord(BaseModel):
    name: str
    path: Path
    code: str | None = None
    code_file: str | None = None
    result: dict[str, Any] | None = None
    result_file: str | None = None
    best_score: float | None = None
    has_log: bool = False


class IterationDir(BaseModel):
    k: int
    path: Path
    missing: list[str] = Field(default_factory=list)  # of planner/executor/summarizer


class Trace(BaseModel):
    root: Path
    checkpoints_dir: Path | None = None
    iteration_dir: Path | None = None
    evaluator_dir: Path | None = None
    checkpoints: list[Checkpoint] = Field(default_factory=list)  # oldest first
    iterations: list[IterationDir] = Field(default_factory=list)
    evaluations: list[EvalRecord] = Field(default_factory=list)
    unreadable: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- small tolerant readers


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None and f == int(f) else None


def parse_evaluation(v: Any) -> dict[str, Any]:
    """LoongFlow stores the evaluator's result as JSON text; pesflow's reader also meets dicts and prose."""
    if isinstance(v, dict):
        return v
    if isinstance(v, str) and v.strip():
        try:
            d = json.loads(v)
        except json.JSONDecodeError:
            return {"summary": v}
        return d if isinstance(d, dict) else {"summary": v}
    return {}


def parse_solution(d: Any, fallback_id: str = "") -> LFSolution | None:
    if not isinstance(d, dict):
        return None
    sid = str(d.get("solution_id") or fallback_id)
    if not sid:
        return None
    meta = d.get("metadata")
    return LFSolution(
        solution_id=sid,
        solution=d.get("solution") if isinstance(d.get("solution"), str) else json.dumps(d.get("solution")),
        generate_plan=str(d.get("generate_plan") or ""),
        parent_id=str(d.get("parent_id") or ""),
        island_id=max(0, _int(d.get("island_id")) or 0),
        iteration=_int(d.get("iteration")),
        timestamp=_num(d.get("timestamp")) or 0.0,
        generation=_int(d.get("generation")),
        score=_num(d.get("score")),
        evaluation=parse_evaluation(d.get("evaluation")),
        summary=str(d.get("summary") or ""),
        metadata=meta if isinstance(meta, dict) else {},
    )


def failure_kind(evaluation: dict[str, Any], score: float | None) -> str | None:
    """None when the evaluation passed, else one word for what went wrong.

    The kinds: timeout, compile_error, incorrect, score_0 (ran correctly, scored nothing),
    crash (the evaluation process died), or the evaluator's own status (execution_failed,
    framework_error, ...) when nothing more specific shows.
    """
    ev = evaluation or {}
    status = str(ev.get("status") or "").lower()
    metrics = ev.get("metrics") if isinstance(ev.get("metrics"), dict) else {}
    artifacts = ev.get("artifacts") if isinstance(ev.get("artifacts"), dict) else {}
    text = " ".join(str(x) for x in (ev.get("summary"), ev.get("error"), ev.get("message"),
                                     metrics.get("error"), artifacts.get("error")) if x).lower()
    reasons = [str(r) for r in ev.get("hard_fail_reasons") or [] if r] if isinstance(ev.get("hard_fail_reasons"), list) else []
    check = str(artifacts.get("correctness_check") or "").lower()
    incorrect = check.startswith("fail") or _num(metrics.get("correctness")) == 0.0
    if not status and "error" in ev:
        return "timeout" if "timed out" in text or "timeout" in text else "crash"
    if status in PASSED_STATUSES:
        if reasons:
            return reasons[0]
        if incorrect:
            return "incorrect"
        if score is None or score <= 0:
            return "score_0"
        return None
    if status == "timeout" or "timed out" in text or "timeout" in text:
        return "timeout"
    if "compil" in text or "syntaxerror" in text:
        return "compile_error"
    if status == "validation_failed" or incorrect or any(w in text for w in ("incorrect", "mismatch", "correctness")):
        return "incorrect"
    if status:
        return reasons[0] if reasons else status
    return None if score is not None and score > 0 else "score_0"  # no evaluation at all: the score says it


def _read_json(path: Path, trace: Trace) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as e:
        trace.unreadable.append(f"{_rel(path, trace.root)}: unreadable ({type(e).__name__}: {str(e)[:120]})")
        return None


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _subdirs(path: Path | None) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir()) if path is not None and path.is_dir() else []


def _locate(root: Path) -> tuple[Path | None, Path | None, Path | None]:
    """checkpoints/, iteration/, evaluator/ of a trace root (or of LoongFlow's database folder given alone)."""
    cps = root / "database" / "checkpoints"
    if not cps.is_dir() and any(p.name.startswith("checkpoint-") for p in _subdirs(root / "checkpoints")):
        cps = root / "checkpoints"
    it, ev = root / "iteration", root / "evaluator"
    return (cps if cps.is_dir() else None, it if it.is_dir() else None, ev if ev.is_dir() else None)


def is_loongflow_trace(path: Path | str) -> bool:
    root = Path(path)
    if not root.is_dir():
        return False
    cps, it, ev = _locate(root)
    return (any(p.name.startswith("checkpoint-") for p in _subdirs(cps))
            or any(p.name.isdigit() for p in _subdirs(it))
            or any(p.name.startswith("eval_") for p in _subdirs(ev)))


def read_trace(path: Path | str) -> Trace:
    root = Path(path).resolve()
    if not root.is_dir():
        raise LoongFlowError(f"{path} is not a directory; pass a LoongFlow output folder or trace mirror")
    if not is_loongflow_trace(root):
        raise LoongFlowError(f"{path} is not a LoongFlow trace (no database/checkpoints/checkpoint-*, iteration/<K> "
                             f"or evaluator/eval_* inside); pass the folder that holds them")
    cps, it, ev = _locate(root)
    trace = Trace(root=root, checkpoints_dir=cps, iteration_dir=it, evaluator_dir=ev)
    trace.checkpoints = _read_checkpoints(trace)
    trace.iterations = [IterationDir(k=int(p.name), path=p, missing=[r for r in ROLE_DIRS if not (p / r).is_dir()])
                        for p in _subdirs(it) if p.name.isdigit()]
    trace.iterations.sort(key=lambda d: d.k)
    trace.evaluations = [_read_eval(p, trace) for p in _subdirs(ev) if p.name.startswith("eval_")]
    return trace


def _read_checkpoints(trace: Trace) -> list[Checkpoint]:
    out = []
    for p in _subdirs(trace.checkpoints_dir):
        if not p.name.startswith("checkpoint-"):
            continue
        m = CHECKPOINT_RE.match(p.name)
        meta = _read_json(p / "metadata.json", trace)
        meta = meta if isinstance(meta, dict) else None
        best = parse_solution(_read_json(p / "best_solution.json", trace))
        sols: dict[str, LFSolution] = {}
        for f in sorted((p / "solutions").glob("*.json")):
            s = parse_solution(_read_json(f, trace), fallback_id=f.stem)
            if s is not None:
                sols[f.stem] = s
        k = int(m.group(1)) if m else _int((meta or {}).get("last_iteration"))
        if k is None:
            k = max((s.iteration or 0 for s in sols.values()), default=0)
        out.append(Checkpoint(name=p.name, path=p, iteration=k, completed=int(m.group(2)) if m else None,
                              metadata=meta, best=best, solutions=sols, has_solutions_dir=(p / "solutions").is_dir()))
    out.sort(key=lambda c: (c.iteration, c.completed if c.completed is not None else -1, c.name))
    return out


def _read_eval(p: Path, trace: Trace) -> EvalRecord:
    rec = EvalRecord(name=p.name, path=p, has_log=(p / "evaluation_process.log").is_file())
    codes = sorted(p.glob("llm_code_*"))
    if codes:
        rec.code_file = codes[0].name
        rec.code = codes[0].read_text(encoding="utf-8", errors="replace")
    for name in RESULT_FILES:
        if (p / name).is_file():
            d = _read_json(p / name, trace)
            rec.result, rec.result_file = (d if isinstance(d, dict) else {}), name
            break
    bs = _read_json(p / ".best_score.json", trace)
    rec.best_score = _num(bs.get("score")) if isinstance(bs, dict) else None
    return rec


# ---------------------------------------------------------------- the audit (pure, over a Trace)


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


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _some(items: Iterable[str], n: int = 6) -> str:
    items = list(items)
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def audit_loongflow(path: Path | str) -> TraceReport:
    return audit_trace(read_trace(path))


def audit_trace(trace: Trace) -> TraceReport:
    r = TraceReport()
    V, F = r.violations, r.findings
    V += trace.unreadable
    union, code_changes = merged_solutions(trace)
    V += code_changes
    _audit_layout(trace, union, r)
    for cp in trace.checkpoints:
        _audit_checkpoint(cp, union, r)
    order, effective, cycles = parent_order(union)

    # parent chains
    roots = [i for i in _chrono(union) if not union[i].parent_id]
    orphans = [i for i in _chrono(union) if union[i].parent_id and union[i].parent_id not in union]
    for sid in orphans:
        V.append(f"solution {sid}: parent {union[sid].parent_id} is in no checkpoint (the parent chain is broken)")
    for c in cycles:
        V.append(f"parent cycle: {' -> '.join(c)}")
    depth: dict[str, int] = {}
    for sid in order:  # parents come first, so their depth is known
        p = effective[sid]
        depth[sid] = depth[p] + 1 if p is not None else 0
    F.append(f"parent chains: {len(union)} solutions, {len(roots)} root(s) ({_some(roots)}), "
             f"{len(orphans)} with a missing parent, {len(cycles)} cycle(s), longest chain {max(depth.values(), default=-1) + 1}")

    # failures by kind
    kinds = {sid: failure_kind(s.evaluation, s.score) for sid, s in union.items()}
    by_kind: dict[str, list[str]] = {}
    for sid in _chrono(union):
        if kinds[sid] is not None:
            by_kind.setdefault(kinds[sid], []).append(sid)  # type: ignore[arg-type]
    ev_kinds = Counter(failure_kind(e.result, _num(e.result.get("score"))) or "passed"
                       for e in trace.evaluations if e.result is not None)
    passed = [i for i in union if kinds[i] is None]
    F.append(f"solutions: {len(passed)} passed, {len(union) - len(passed)} failed"
             + "".join(f"; {k} {len(v)} ({_some(v)})" for k, v in sorted(by_kind.items())))
    if trace.evaluations:
        matched = _match_evaluations(trace, union)
        tied = sum(1 for e in trace.evaluations if matched.get(e.name))
        F.append(f"evaluator: {len(trace.evaluations)} dirs, {sum(1 for e in trace.evaluations if e.result is not None)} "
                 f"with a result ({', '.join(f'{k} {n}' for k, n in sorted(ev_kinds.items()))}); "
                 f"{tied} evaluated a stored solution's code, {len(trace.evaluations) - tied} did not (attempts not kept)")
    for sid in _chrono(union):
        s, es = union[sid], _num(union[sid].evaluation.get("score"))
        if es is not None and s.score is not None and not math.isclose(es, s.score, rel_tol=1e-6, abs_tol=_TOL):
            F.append(f"solution {sid}: score {_fmt(s.score)} differs from its evaluation's score {_fmt(es)}")

    # score trajectory
    rank = {sid: n for n, sid in enumerate(_chrono(union))}
    trajectory = []
    for cp in trace.checkpoints:
        pool = dict(cp.solutions)
        if cp.best is not None:
            pool.setdefault(cp.best.solution_id, cp.best)
        scored = [(s.score, sid) for sid, s in pool.items() if s.score is not None and failure_kind(s.evaluation, s.score) is None]
        top = max(scored, key=lambda t: (t[0], -rank.get(t[1], 0)), default=None)  # the earliest on a tie
        trajectory.append({"iteration": cp.iteration, "checkpoint": cp.name, "solutions": len(cp.solutions),
                           "best_id": top[1] if top else None, "best_score": top[0] if top else None})
    if trajectory:
        F.append("score trajectory (best per checkpoint iteration): "
                 + ", ".join(f"{t['iteration']}: {_fmt(t['best_score'])} ({t['best_id']})" for t in trajectory))
    for a, b in zip(trajectory, trajectory[1:]):
        if a["best_score"] is not None and (b["best_score"] is None or b["best_score"] < a["best_score"] - _TOL):
            F.append(f"best score falls from {_fmt(a['best_score'])} at {a['checkpoint']} to {_fmt(b['best_score'])} "
                     f"at {b['checkpoint']} (a solution was lost between them)")
    by_iteration = []
    running: float | None = None
    for k in sorted({s.iteration or 0 for s in union.values()}):
        ids = [i for i in union if (union[i].iteration or 0) == k]
        ok = [union[i].score for i in ids if kinds[i] is None and union[i].score is not None]
        best = max(ok, default=None)
        running = best if running is None or (best is not None and best > running) else running
        by_iteration.append({"iteration": k, "solutions": len(ids), "passed": len(ok), "best_score": best, "running_best": running})

    overall = max(((union[i].score, i) for i in passed if union[i].score is not None), default=None)
    r.stats = {
        "root": str(trace.root),
        "checkpoints": len(trace.checkpoints),
        "iterations": len(trace.iterations),
        "solutions": len(union),
        "passed": len(passed),
        "failed": len(union) - len(passed),
        "roots": roots,
        "orphans": orphans,
        "cycles": cycles,
        "max_depth": max(depth.values(), default=0),
        "islands": _island_count(trace, union),
        "evaluator_dirs": len(trace.evaluations),
        "evaluator_results": sum(1 for e in trace.evaluations if e.result is not None),
        "failures_by_kind": {"solutions": {k: len(v) for k, v in sorted(by_kind.items())},
                             "evaluator": {k: n for k, n in sorted(ev_kinds.items()) if k != "passed"}},
        "trajectory": trajectory,
        "by_iteration": by_iteration,
        "best": {"id": overall[1], "score": overall[0]} if overall else None,
    }
    return r


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
        wanted = {s.iteration for s in union.values() if s.iteration is not None} | {cp.iteration for cp in trace.checkpoints}
        absent = sorted(k for k in wanted - have if k > 0)
        if absent:
            V.append(f"iteration/ has no folder for iteration(s) {_some(map(str, absent))}, which solutions or checkpoints name")
    for what, bad in (
        ("no result file (evaluation_result.json or result.json)", [e.name for e in trace.evaluations if e.result_file is None]),
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
        valid = {sid: s.score for sid, s in cp.solutions.items() if s.score is not None and failure_kind(s.evaluation, s.score) is None}
        if valid:
            top_id = max(valid, key=lambda i: valid[i])  # type: ignore[arg-type, return-value]
            if b.score is None or valid[top_id] > b.score + _TOL:  # type: ignore[operator]
                V.append(f"checkpoint {cp.name}: best_solution.json is {b.solution_id} (score {_fmt(b.score)}) "
                         f"but {top_id} scores {_fmt(valid[top_id])}")
        own = cp.solutions.get(b.solution_id)
        if own is None:
            if cp.has_solutions_dir:
                V.append(f"checkpoint {cp.name}: best solution {b.solution_id} has no solutions/{b.solution_id}.json")
        else:
            if own.solution != b.solution:
                V.append(f"checkpoint {cp.name}: best_solution.json's code differs from solutions/{b.solution_id}.json")
            if own.score != b.score:
                V.append(f"checkpoint {cp.name}: best_solution.json's score {_fmt(b.score)} differs from "
                         f"solutions/{b.solution_id}.json's {_fmt(own.score)}")
    meta = cp.metadata
    if meta is None:
        return
    # counts
    n_files = len(cp.solutions)
    n_valid = sum(1 for s in cp.solutions.values() if s.score)  # LoongFlow: a solution without a (non-zero) score is not valid
    tg, tv = _int(meta.get("total_generated_solutions")), _int(meta.get("total_valid_solutions"))
    if tg is not None and tg != n_files:
        V.append(f"checkpoint {cp.name}: metadata says {tg} solutions generated; solutions/ holds {n_files}")
    if tv is not None and tv != n_valid:
        V.append(f"checkpoint {cp.name}: metadata says {tv} valid solutions; solutions/ holds {n_valid} with a non-zero score")
    islands = meta.get("islands") or []
    cap = meta.get("island_capacity")
    if isinstance(cap, list) and len(cap) == len(islands):
        for n, (c, members) in enumerate(zip(cap, islands)):
            if _int(c) != len(members or []):
                V.append(f"checkpoint {cp.name}: island_capacity[{n}] is {c} but islands[{n}] lists {len(members or [])}")
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
        V.append(f"checkpoint {cp.name}: metadata lists {sid} ({', '.join(dict.fromkeys(wheres))}) but solutions/{sid}.json is missing")
    for sid, wheres in ghosts.items():
        V.append(f"checkpoint {cp.name}: metadata lists {sid} ({', '.join(dict.fromkeys(wheres))}), which is no solution in the trace")


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
    return {e.name: (exact.get(e.code) or loose.get(e.code.strip())) if e.code is not None else None for e in trace.evaluations}


# ---------------------------------------------------------------- import into a pesflow run directory


def default_import_dir(out_root: Path, source: Path) -> Path:
    base = out_root / "loongflow" / (Path(source).resolve().name or "trace")
    for n in range(1000):
        p = base.with_name(base.name + (f"-{n}" if n else ""))
        if not p.exists():
            return p
    raise LoongFlowError(f"no free run directory name under {base.parent}; pass --out")


def _safe_id(sid: str, taken: set[str]) -> str:
    out = _ID_BAD.sub("_", sid).lstrip("._-") or "solution"
    base, n = out, 1
    while out in taken:
        out, n = f"{base}-{n}", n + 1
    taken.add(out)
    return out


def _files_of(s: LFSolution, file_name: str) -> dict[str, str]:
    files = s.metadata.get("files")
    if isinstance(files, dict) and files and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return dict(files)  # written by pesflow: the path -> text object
    return {file_name: s.solution}


def _is_text(data: bytes) -> bool:
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _copy_texts(store: Any, src: Path, dest_rel: str) -> int:
    """Every text file under src into the run at dest_rel, same relative paths; binaries are left out."""
    n = 0
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    for p in files:
        data = p.read_bytes()
        if _is_text(data):
            store.write(dest_rel if src.is_file() else f"{dest_rel}/{p.relative_to(src)}", data.decode("utf-8"))
            n += 1
    return n


def _task_name(trace: Trace, union: dict[str, LFSolution]) -> str:
    for s in union.values():
        art = s.evaluation.get("artifacts")
        if isinstance(art, dict) and art.get("task_id"):
            return str(art["task_id"])
    for e in trace.evaluations:
        art = (e.result or {}).get("artifacts")
        if isinstance(art, dict) and art.get("task_id"):
            return str(art["task_id"])
    return trace.root.name


def _baseline(trace: Trace, union: dict[str, LFSolution], file_name: str) -> tuple[dict[str, str], str]:
    """The code the search started from: a round-0 solution, else the first iteration's parent_info
    when it names no solution (LoongFlow's initial code), else nothing."""
    for sid in _chrono(union):
        if union[sid].iteration == 0:
            return _files_of(union[sid], file_name), f"solution {sid} (iteration 0)"
    if trace.iterations:
        first = trace.iterations[0]
        d = _read_json(first.path / "planner" / "parent_info.json", trace)
        if isinstance(d, dict) and isinstance(d.get("solution"), str) and not d.get("solution_id"):
            return {file_name: d["solution"]}, f"iteration/{first.k}/planner/parent_info.json"
    return {}, "none found (features are measured against an empty baseline)"


def import_loongflow(path: Path | str, out: Path | str, *, file_name: str = "solution.py") -> Path:
    """Convert a LoongFlow trace into a pesflow run directory at `out` (which must not exist or be empty)."""
    from agent.journal import verify
    from agent.population import Population, PopulationConfig, Solution
    from agent.run_store import RunStore
    from agent.search import VERSION, files_hash
    from evaluator.candidate import Candidate
    from evaluator.verdict import Status, Verdict

    trace = read_trace(path)
    report = audit_trace(trace)
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise LoongFlowError(f"{out} already exists and is not empty; pass a new --out directory")
    union, _ = merged_solutions(trace)
    order, effective, _ = parent_order(union)
    taken: set[str] = set()
    ids = {sid: _safe_id(sid, taken) for sid in order}
    task = _task_name(trace, union)
    baseline, baseline_from = _baseline(trace, union, file_name)
    cfg = PopulationConfig(islands=_island_count(trace, union))

    converted: dict[str, Solution] = {}

    def pes(sid: str, fallback_round: int) -> Solution:
        if sid in converted:  # once: a solution without an iteration keeps the round it was first met in
            return converted[sid]
        s = union[sid]
        files = _files_of(s, file_name)
        kind = failure_kind(s.evaluation, s.score)
        parent = effective[sid]
        converted[sid] = Solution(
            id=ids[sid], parent_id=ids[parent] if parent is not None else None, island=min(s.island_id, cfg.islands - 1),
            round=max(0, s.iteration if s.iteration is not None else fallback_round), files=files,
            content_hash=files_hash(files), status="ok" if kind is None else "hard_fail",
            speedup=s.score if s.score is not None and s.score > 0 else None, reward=None,
            hard_fail_reasons=[] if kind is None else [kind], plan=s.generate_plan, lessons=s.summary)
        return converted[sid]

    def verdict(ev: dict[str, Any] | None, score: float | None, content_hash: str | None, log_dir: str) -> dict[str, Any]:
        kind = failure_kind(ev, score) if ev is not None else "no_result"  # the evaluator left no result file
        ev = ev or {}
        v = Verdict(task=task, mode="candidate", backend="loongflow", grader="loongflow",
                    status=Status.ok if kind is None else Status.hard_fail, reward=0.0,
                    speedup=score if score is not None and score > 0 else None,
                    hard_fail_reasons=[] if kind is None else [kind], log_dir=log_dir, candidate_hash=content_hash,
                    message=f"imported from LoongFlow: status {ev.get('status', '?')}, score {_fmt(score)}; "
                            f"{str(ev.get('summary') or ev.get('error') or '')[:300]}")
        # A valid Verdict, so every reader of pesflow verdicts reads it; reward 0.0 is Verdict's "none"
        # (LoongFlow grades with a score only), and run.json's best says reward null outright.
        return v.model_dump(mode="json", exclude={"raw"})

    # Rounds: the last checkpoint of each iteration K (several N may share one K).
    rounds: dict[int, Checkpoint] = {}
    for cp in trace.checkpoints:
        rounds[cp.iteration] = cp
    store = RunStore(out)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    store.update_run(run_id=out.name, pesflow=VERSION,
                     # No "path": there is no task package here, and readers skip what needs one.
                     task={"name": task, "content_hash": None, "max_submissions": None, "reward_class": None,
                           "scope": sorted({p for s in union.values() for p in _files_of(s, file_name)}) or [file_name]},
                     source={"kind": "loongflow", "path": str(trace.root), "checkpoints": [c.name for c in trace.checkpoints],
                             "baseline": baseline_from, "audit_violations": len(report.violations)},
                     seed=None, grader="loongflow", backend="loongflow", started=now, status="importing")
    j = store.journal
    j.append("run_start", run_id=out.name, task=task, seed=None, grader="loongflow", models={},
             source={"kind": "loongflow", "path": str(trace.root)})

    matched = _match_evaluations(trace, union)
    evals_of: dict[str, list[EvalRecord]] = {}
    for e in trace.evaluations:
        if matched.get(e.name):
            evals_of.setdefault(matched[e.name], []).append(e)  # type: ignore[index]
    emitted: set[str] = set()
    primary: dict[str, dict[str, Any]] = {}  # solution -> the verdict that judged it
    n_verdicts = 0

    def grader_logs(e: EvalRecord, h: str) -> str:
        rel = f"evaluations/{h[:16]}/{e.name}"
        _copy_texts(store, e.path, rel)
        return rel

    def log_dir(rel: str) -> str:
        return str(out / rel)  # absolute, as the evaluator records its own log dirs

    def emit(sid: str, fallback_round: int) -> None:
        nonlocal n_verdicts
        s, sol = union[sid], pes(sid, fallback_round)
        extra = {} if (s.parent_id or None) == effective[sid] else {"loongflow_parent_id": s.parent_id, "parent_resolved": False}
        j.append("candidate", id=sol.id, round=sol.round, parent_id=sol.parent_id, island=sol.island,
                 content_hash=sol.content_hash, status=sol.status, score=s.score, loongflow_id=sid, **extra)
        # As pesflow records a child: its diff against the parent (or the baseline) and its verdict.
        child = f"rounds/{sol.round:02d}/executor/{sol.id}"
        before = converted[effective[sid]].files if effective[sid] is not None else baseline
        store.write(f"{child}/candidate.diff", Candidate(files=sol.files).diff(before))  # type: ignore[arg-type]
        recs = evals_of.get(sid, [])
        first: dict[str, Any] | None = None
        for e in recs:
            rel = grader_logs(e, sol.content_hash)
            if e.result is not None:
                v = verdict(e.result, _num(e.result.get("score")), sol.content_hash, log_dir(rel))
            else:  # the process left no result, but the solution records how it was judged
                v = verdict(s.evaluation, s.score, sol.content_hash, log_dir(rel))
            first = first or v
            store.write_json(f"{rel}/verdict.json", v)
            j.append("verdict", content_hash=sol.content_hash, label=e.name, grader="loongflow", candidate_id=sol.id, verdict=v)
            n_verdicts += 1
        if not recs:  # no evaluator dir holds this code: the solution's own evaluation field is the record
            rel = f"evaluations/{sol.content_hash[:16]}/loongflow-{sol.id}"
            store.write_json(f"{rel}/evaluation.json", s.evaluation)
            v = verdict(s.evaluation, s.score, sol.content_hash, log_dir(rel))
            store.write_json(f"{rel}/verdict.json", v)
            j.append("verdict", content_hash=sol.content_hash, label=f"loongflow-{sol.id}", grader="loongflow",
                     candidate_id=sol.id, verdict=v)
            n_verdicts += 1
        primary[sid] = first or v
        store.write_json(f"{child}/verdict.json", primary[sid])
        emitted.add(sid)

    best_by_round: list[dict[str, Any]] = []
    last_pop: Population | None = None
    last_k = 0
    closure: set[str] = set()  # LoongFlow never drops a solution: a round holds every earlier one too
    for cp in trace.checkpoints:
        wanted = set(cp.solutions) | ({cp.best.solution_id} if cp.best is not None else set())
        for sid in wanted:  # with their ancestors, so every parent resolves (a partial mirror loses files)
            cur: str | None = sid
            while cur is not None and cur not in closure and cur in union:
                closure.add(cur)
                cur = effective[cur]
        if rounds[cp.iteration] is not cp:
            continue  # a later checkpoint of the same iteration makes the round
        k = cp.iteration
        for sid in order:
            if sid in closure and sid not in emitted:
                emit(sid, k)
        pop = Population(cfg, baseline)
        for sid in order:
            if sid in closure:
                pop.add(pes(sid, k))
        best = pop.best()
        best_by_round.append({"round": k, "best_id": best.id if best else None, "speedup": best.speedup if best else None})
        d = f"checkpoints/round-{k:02d}"
        for name in ("best_solution.json", "metadata.json"):
            if (cp.path / name).is_file():
                _copy_texts(store, cp.path / name, f"{d}/{name}")
        if (cp.path / "solutions").is_dir():
            _copy_texts(store, cp.path / "solutions", f"{d}/solutions")
        store.write_json(f"{d}/pesflow_state.json", {
            "round": k, "next_round": k + 1, "population": pop.to_dict(), "rng_state": None, "memory": [],
            "scorings": {"dev": 0, "hidden": 0}, "graded": n_verdicts, "duplicates": 0,
            "best_by_round": list(best_by_round), "totals": {"imported_from": "loongflow", "loongflow_checkpoint": cp.name},
        })
        j.append("checkpoint", round=k, path=d, loongflow_checkpoint=cp.name)
        last_pop, last_k = pop, k
    for e in trace.evaluations:  # attempts that were never kept as solutions
        if not matched.get(e.name):
            h = files_hash({file_name: e.code}) if e.code is not None else f"none-{e.name}"  # as pesflow marks "no code"
            rel = grader_logs(e, h)
            v = verdict(e.result, _num((e.result or {}).get("score")), h, log_dir(rel))
            store.write_json(f"{rel}/verdict.json", v)
            j.append("verdict", content_hash=h, label=e.name, grader="loongflow", candidate_id=None, verdict=v)
            n_verdicts += 1

    for d in trace.iterations:
        for role in ROLE_DIRS:
            if (d.path / role).is_dir():
                _copy_texts(store, d.path / role, f"rounds/{d.k:02d}/{role}")
        for p in sorted(d.path.iterdir()):
            if p.is_file():
                _copy_texts(store, p, f"rounds/{d.k:02d}/{p.name}")

    best_sol = last_pop.best() if last_pop is not None else None
    best: dict[str, Any] = {"id": None, "speedup": None, "score": None, "reward": None, "grader": "loongflow"}
    if best_sol is not None:
        best = {"id": best_sol.id, "speedup": best_sol.speedup, "score": best_sol.speedup, "reward": None, "grader": "loongflow",
                "loongflow_id": next(sid for sid, pid in ids.items() if pid == best_sol.id)}
        for rel, text in best_sol.files.items():
            store.write(f"final/files/{rel}", text)
        store.write("final/candidate.patch", Candidate(files=best_sol.files).diff(baseline))  # type: ignore[arg-type]
        store.write_json("final/verdict.json", primary[best["loongflow_id"]])
        last_cp = rounds[last_k]
        if last_cp.best is not None and last_cp.best.solution_id == best["loongflow_id"]:
            _copy_texts(store, last_cp.path / "best_solution.json", "final/best_solution.json")
    kinds = Counter(failure_kind(s.evaluation, s.score) or "passed" for s in union.values())
    totals = {"solutions": len(union), "passed": kinds.pop("passed", 0), "failed": sum(kinds.values()),
              "failures_by_kind": dict(sorted(kinds.items())), "evaluations": n_verdicts, "checkpoints": len(rounds),
              "iterations": len(trace.iterations), "llm_calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0}
    store.write("final/report.md", _report(trace, report, best, best_by_round, totals))
    j.append("final", stop="imported", remeasured=[], best=best)
    j.append("run_end", status="imported")
    store.update_run(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"), totals=totals,
                     best_by_round=best_by_round, rounds_done=last_k, status="imported", best=best)
    broken = verify(store.journal.path)
    if broken:  # our own writing went wrong: say so rather than hand over a run that fails its audit
        raise RuntimeError(f"imported journal does not verify: {broken[0]}")
    return out


def _report(trace: Trace, report: TraceReport, best: dict[str, Any], best_by_round: list[dict[str, Any]],
            totals: dict[str, Any]) -> str:
    lines = [f"# Imported LoongFlow trace: {trace.root.name}", "",
             f"- source: {trace.root}",
             f"- best: {best.get('loongflow_id') or best['id']} (score {_fmt(best['score'])}); LoongFlow has no reward",
             f"- solutions {totals['solutions']}: {totals['passed']} passed, {totals['failed']} failed "
             f"({', '.join(f'{k} {n}' for k, n in totals['failures_by_kind'].items()) or 'none'})",
             f"- checkpoints {totals['checkpoints']}, iteration folders {totals['iterations']}, verdicts {totals['evaluations']}",
             "", "## Best by round", ""]
    lines += [f"- round {b['round']}: {b['best_id']} {_fmt(b['speedup'])}" for b in best_by_round]
    lines += ["", f"## Audit of the source: {len(report.violations)} violation(s)", ""]
    lines += [f"- VIOLATION: {v}" for v in report.violations] + [f"- {f}" for f in report.findings]
    return "\n".join(lines) + "\n"
