"""A LoongFlow trace imported as a pesflow run directory, so that audit and report work on it.

Import (`import_loongflow`) maps a LoongFlow solution to a pesflow `Solution`: the code
string becomes files {<file_name>: code} (metadata.files when pesflow wrote it), score
becomes speedup (so fitness), status is "ok" when the evaluation passed and "hard_fail"
with the failure kind as its reason otherwise, iteration becomes round, island_id island.
A parent that no checkpoint holds, or one that closes a cycle, becomes None in the
population (Population refuses unknown parents); the journal keeps LoongFlow's value.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.population.database import Population, PopulationConfig, Solution
from agent.readers.loongflow.audit import _chrono, _island_count, _match_evaluations, audit_trace, merged_solutions, parent_order
from agent.readers.loongflow.trace import Checkpoint, EvalRecord, LFSolution, LoongFlowError, ROLE_DIRS, Trace, TraceReport, _ID_BAD, as_number, failure_kind, fmt_number, read_json_file, read_trace
from agent.rundir.journal import verify
from agent.rundir.schema import VERSION, Event
from agent.rundir.store import RunStore
from evaluator.candidate import Candidate, candidate_hash
from evaluator.verdict import Status, Verdict


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
        d = read_json_file(first.path / "planner" / "parent_info.json", trace)
        if isinstance(d, dict) and isinstance(d.get("solution"), str) and not d.get("solution_id"):
            return {file_name: d["solution"]}, f"iteration/{first.k}/planner/parent_info.json"
    return {}, "none found (features are measured against an empty baseline)"


def import_loongflow(path: Path | str, out: Path | str, *, file_name: str = "solution.py") -> Path:
    """Convert a LoongFlow trace into a pesflow run directory at `out` (which must not exist or be empty)."""
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
            content_hash=candidate_hash(files, baseline), status="ok" if kind is None else "hard_fail",
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
                    message=f"imported from LoongFlow: status {ev.get('status', '?')}, score {fmt_number(score)}; "
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
    j.append(Event.run_start, run_id=out.name, task=task, seed=None, grader="loongflow", models={},
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
        j.append(Event.candidate, id=sol.id, round=sol.round, parent_id=sol.parent_id, island=sol.island,
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
                v = verdict(e.result, as_number(e.result.get("score")), sol.content_hash, log_dir(rel))
            else:  # the process left no result, but the solution records how it was judged
                v = verdict(s.evaluation, s.score, sol.content_hash, log_dir(rel))
            first = first or v
            store.write_json(f"{rel}/verdict.json", v)
            j.append(Event.verdict, content_hash=sol.content_hash, label=e.name, grader="loongflow", candidate_id=sol.id, verdict=v)
            n_verdicts += 1
        if not recs:  # no evaluator dir holds this code: the solution's own evaluation field is the record
            rel = f"evaluations/{sol.content_hash[:16]}/loongflow-{sol.id}"
            store.write_json(f"{rel}/evaluation.json", s.evaluation)
            v = verdict(s.evaluation, s.score, sol.content_hash, log_dir(rel))
            store.write_json(f"{rel}/verdict.json", v)
            j.append(Event.verdict, content_hash=sol.content_hash, label=f"loongflow-{sol.id}", grader="loongflow",
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
        j.append(Event.checkpoint, round=k, path=d, loongflow_checkpoint=cp.name)
        last_pop, last_k = pop, k
    for e in trace.evaluations:  # attempts that were never kept as solutions
        if not matched.get(e.name):
            h = candidate_hash({file_name: e.code}, baseline) if e.code is not None else f"none-{e.name}"  # as pesflow marks "no code"
            rel = grader_logs(e, h)
            v = verdict(e.result, as_number((e.result or {}).get("score")), h, log_dir(rel))
            store.write_json(f"{rel}/verdict.json", v)
            j.append(Event.verdict, content_hash=h, label=e.name, grader="loongflow", candidate_id=None, verdict=v)
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
    j.append(Event.final, stop="imported", remeasured=[], best=best)
    j.append(Event.run_end, status="imported")
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
             f"- best: {best.get('loongflow_id') or best['id']} (score {fmt_number(best['score'])}); LoongFlow has no reward",
             f"- solutions {totals['solutions']}: {totals['passed']} passed, {totals['failed']} failed "
             f"({', '.join(f'{k} {n}' for k, n in totals['failures_by_kind'].items()) or 'none'})",
             f"- checkpoints {totals['checkpoints']}, iteration folders {totals['iterations']}, verdicts {totals['evaluations']}",
             "", "## Best by round", ""]
    lines += [f"- round {b['round']}: {b['best_id']} {fmt_number(b['speedup'])}" for b in best_by_round]
    lines += ["", f"## Audit of the source: {len(report.violations)} violation(s)", ""]
    lines += [f"- VIOLATION: {v}" for v in report.violations] + [f"- {f}" for f in report.findings]
    return "\n".join(lines) + "\n"
