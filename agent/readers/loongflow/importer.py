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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.population.database import Population, PopulationConfig, Solution
from agent.readers.loongflow.audit import (_chrono, _island_count, _match_evaluations, audit_trace, merged_solutions,
                                           parent_order)
from agent.readers.loongflow.trace import (Checkpoint, EvalRecord, LFSolution, LoongFlowError, ROLE_DIRS, Trace,
                                           TraceReport, _ID_BAD, as_number, failure_kind, fmt_number, read_json_file,
                                           read_trace)
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


@dataclass
class _Source:
    """A trace settled for import: its solutions, their order and kept parents, pesflow's ids for them."""
    trace: Trace
    report: TraceReport
    file_name: str
    union: dict[str, LFSolution]
    order: list[str]
    effective: dict[str, str | None]
    ids: dict[str, str]
    task: str
    baseline: dict[str, str]
    baseline_from: str
    cfg: PopulationConfig
    rounds: dict[int, Checkpoint]  # iteration K -> its last checkpoint (several N may share one K)


def _settle(trace: Trace, report: TraceReport, file_name: str) -> _Source:
    union, _ = merged_solutions(trace)
    order, effective, _ = parent_order(union)
    taken: set[str] = set()
    ids = {sid: _safe_id(sid, taken) for sid in order}
    task = _task_name(trace, union)
    baseline, baseline_from = _baseline(trace, union, file_name)
    rounds: dict[int, Checkpoint] = {}
    for cp in trace.checkpoints:
        rounds[cp.iteration] = cp
    return _Source(trace, report, file_name, union, order, effective, ids, task, baseline, baseline_from,
                   PopulationConfig(islands=_island_count(trace, union)), rounds)


def import_loongflow(path: Path | str, out: Path | str, *, file_name: str = "solution.py") -> Path:
    """Convert a LoongFlow trace into a pesflow run directory at `out` (which must not exist or be empty)."""
    trace = read_trace(path)
    report = audit_trace(trace)
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise LoongFlowError(f"{out} already exists and is not empty; pass a new --out directory")
    run = _Import(_settle(trace, report, file_name), RunStore(out), out)
    run.start()
    last_pop, last_k = run.checkpoints()
    run.unkept_attempts()
    run.copy_iterations()
    run.finish(last_pop, last_k)
    return out


class _Import:
    """The run directory being written, in journal order: candidates with their verdicts as each
    round first needs them, a checkpoint per round, then the attempts never kept, then final/."""

    def __init__(self, src: _Source, store: RunStore, out: Path):
        self.src, self.store, self.out = src, store, out
        self.converted: dict[str, Solution] = {}
        self.emitted: set[str] = set()
        self.primary: dict[str, dict[str, Any]] = {}  # solution -> the verdict that judged it
        self.n_verdicts = 0
        self.best_by_round: list[dict[str, Any]] = []
        self.matched: dict[str, str | None] = {}
        self.evals_of: dict[str, list[EvalRecord]] = {}

    def start(self) -> None:
        src, out = self.src, self.out
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        scope = sorted({p for s in src.union.values() for p in _files_of(s, src.file_name)}) or [src.file_name]
        self.store.update_run(run_id=out.name, pesflow=VERSION,
                              # No "path": there is no task package here, and readers skip what needs one.
                              task={"name": src.task, "content_hash": None, "max_submissions": None,
                                    "reward_class": None, "scope": scope},
                              source={"kind": "loongflow", "path": str(src.trace.root),
                                      "checkpoints": [c.name for c in src.trace.checkpoints],
                                      "baseline": src.baseline_from, "audit_violations": len(src.report.violations)},
                              seed=None, grader="loongflow", backend="loongflow", started=now, status="importing")
        self.store.journal.append(Event.run_start, run_id=out.name, task=src.task, seed=None, grader="loongflow",
                                  models={}, source={"kind": "loongflow", "path": str(src.trace.root)})
        self.matched = _match_evaluations(src.trace, src.union)
        for e in src.trace.evaluations:
            if self.matched.get(e.name):
                self.evals_of.setdefault(self.matched[e.name], []).append(e)  # type: ignore[index]

    def pes(self, sid: str, fallback_round: int) -> Solution:
        if sid in self.converted:  # once: a solution without an iteration keeps the round it was first met in
            return self.converted[sid]
        src = self.src
        s = src.union[sid]
        files = _files_of(s, src.file_name)
        kind = failure_kind(s.evaluation, s.score)
        parent = src.effective[sid]
        self.converted[sid] = Solution(
            id=src.ids[sid], parent_id=src.ids[parent] if parent is not None else None,
            island=min(s.island_id, src.cfg.islands - 1),
            round=max(0, s.iteration if s.iteration is not None else fallback_round), files=files,
            content_hash=candidate_hash(files, src.baseline), status="ok" if kind is None else "hard_fail",
            speedup=s.score if s.score is not None and s.score > 0 else None, reward=None,
            hard_fail_reasons=[] if kind is None else [kind], plan=s.generate_plan, lessons=s.summary)
        return self.converted[sid]

    def verdict(self, ev: dict[str, Any] | None, score: float | None, content_hash: str | None,
                rel: str) -> dict[str, Any]:
        kind = failure_kind(ev, score) if ev is not None else "no_result"  # the evaluator left no result file
        ev = ev or {}
        v = Verdict(task=self.src.task, mode="candidate", backend="loongflow", grader="loongflow",
                    status=Status.ok if kind is None else Status.hard_fail, reward=0.0,
                    speedup=score if score is not None and score > 0 else None,
                    hard_fail_reasons=[] if kind is None else [kind],
                    log_dir=str(self.out / rel),  # absolute, as the evaluator records its own log dirs
                    candidate_hash=content_hash,
                    message=f"imported from LoongFlow: status {ev.get('status', '?')}, score {fmt_number(score)}; "
                            f"{str(ev.get('summary') or ev.get('error') or '')[:300]}")
        # A valid Verdict, so every reader of pesflow verdicts reads it; reward 0.0 is Verdict's "none"
        # (LoongFlow grades with a score only), and run.json's best says reward null outright.
        return v.model_dump(mode="json", exclude={"raw"})

    def grader_logs(self, e: EvalRecord, h: str) -> str:
        rel = f"evaluations/{h[:16]}/{e.name}"
        _copy_texts(self.store, e.path, rel)
        return rel

    def record_verdict(self, rel: str, v: dict[str, Any], content_hash: str, label: str,
                       candidate_id: str | None) -> None:
        self.store.write_json(f"{rel}/verdict.json", v)
        self.store.journal.append(Event.verdict, content_hash=content_hash, label=label, grader="loongflow",
                                  candidate_id=candidate_id, verdict=v)
        self.n_verdicts += 1

    def emit(self, sid: str, fallback_round: int) -> None:
        src, store = self.src, self.store
        s, sol = src.union[sid], self.pes(sid, fallback_round)
        parent = src.effective[sid]
        extra = ({} if (s.parent_id or None) == parent else {"loongflow_parent_id": s.parent_id,
                                                             "parent_resolved": False})
        store.journal.append(Event.candidate, id=sol.id, round=sol.round, parent_id=sol.parent_id, island=sol.island,
                             content_hash=sol.content_hash, status=sol.status, score=s.score, loongflow_id=sid, **extra)
        # As pesflow records a child: its diff against the parent (or the baseline) and its verdict.
        child = f"rounds/{sol.round:02d}/executor/{sol.id}"
        before = self.converted[parent].files if parent is not None else src.baseline
        store.write(f"{child}/candidate.diff", Candidate(files=sol.files).diff(before))  # type: ignore[arg-type]
        recs = self.evals_of.get(sid, [])
        first: dict[str, Any] | None = None
        for e in recs:
            rel = self.grader_logs(e, sol.content_hash)
            if e.result is not None:
                v = self.verdict(e.result, as_number(e.result.get("score")), sol.content_hash, rel)
            else:  # the process left no result, but the solution records how it was judged
                v = self.verdict(s.evaluation, s.score, sol.content_hash, rel)
            first = first or v
            self.record_verdict(rel, v, sol.content_hash, e.name, sol.id)
        if not recs:  # no evaluator dir holds this code: the solution's own evaluation field is the record
            rel = f"evaluations/{sol.content_hash[:16]}/loongflow-{sol.id}"
            store.write_json(f"{rel}/evaluation.json", s.evaluation)
            v = self.verdict(s.evaluation, s.score, sol.content_hash, rel)
            self.record_verdict(rel, v, sol.content_hash, f"loongflow-{sol.id}", sol.id)
        self.primary[sid] = first or v
        store.write_json(f"{child}/verdict.json", self.primary[sid])
        self.emitted.add(sid)

    def checkpoints(self) -> tuple[Population | None, int]:
        """A round per iteration's last checkpoint; the last round's population and iteration."""
        src = self.src
        last_pop: Population | None = None
        last_k = 0
        closure: set[str] = set()  # LoongFlow never drops a solution: a round holds every earlier one too
        for cp in src.trace.checkpoints:
            wanted = set(cp.solutions) | ({cp.best.solution_id} if cp.best is not None else set())
            for sid in wanted:  # with their ancestors, so every parent resolves (a partial mirror loses files)
                cur: str | None = sid
                while cur is not None and cur not in closure and cur in src.union:
                    closure.add(cur)
                    cur = src.effective[cur]
            if src.rounds[cp.iteration] is not cp:
                continue  # a later checkpoint of the same iteration makes the round
            last_pop, last_k = self.write_round(cp, closure), cp.iteration
        return last_pop, last_k

    def write_round(self, cp: Checkpoint, closure: set[str]) -> Population:
        src, store, k = self.src, self.store, cp.iteration
        for sid in src.order:
            if sid in closure and sid not in self.emitted:
                self.emit(sid, k)
        pop = Population(src.cfg, src.baseline)
        for sid in src.order:
            if sid in closure:
                pop.add(self.pes(sid, k))
        best = pop.best()
        self.best_by_round.append({"round": k, "best_id": best.id if best else None,
                                   "speedup": best.speedup if best else None})
        d = f"checkpoints/round-{k:02d}"
        for name in ("best_solution.json", "metadata.json"):
            if (cp.path / name).is_file():
                _copy_texts(store, cp.path / name, f"{d}/{name}")
        if (cp.path / "solutions").is_dir():
            _copy_texts(store, cp.path / "solutions", f"{d}/solutions")
        store.write_json(f"{d}/pesflow_state.json", {
            "round": k, "next_round": k + 1, "population": pop.to_dict(), "rng_state": None, "memory": [],
            "scorings": {"dev": 0, "hidden": 0}, "graded": self.n_verdicts, "duplicates": 0,
            "best_by_round": list(self.best_by_round),
            "totals": {"imported_from": "loongflow", "loongflow_checkpoint": cp.name},
        })
        store.journal.append(Event.checkpoint, round=k, path=d, loongflow_checkpoint=cp.name)
        return pop

    def unkept_attempts(self) -> None:
        """Evaluations of attempts that were never kept as solutions: verdicts with no candidate."""
        src = self.src
        for e in src.trace.evaluations:
            if not self.matched.get(e.name):
                # as pesflow marks "no code"
                h = candidate_hash({src.file_name: e.code}, src.baseline) if e.code is not None else f"none-{e.name}"
                rel = self.grader_logs(e, h)
                v = self.verdict(e.result, as_number((e.result or {}).get("score")), h, rel)
                self.record_verdict(rel, v, h, e.name, None)

    def copy_iterations(self) -> None:
        for d in self.src.trace.iterations:
            for role in ROLE_DIRS:
                if (d.path / role).is_dir():
                    _copy_texts(self.store, d.path / role, f"rounds/{d.k:02d}/{role}")
            for p in sorted(d.path.iterdir()):
                if p.is_file():
                    _copy_texts(self.store, p, f"rounds/{d.k:02d}/{p.name}")

    def write_final(self, last_pop: Population | None, last_k: int) -> dict[str, Any]:
        """final/ holds the last round's best, as pesflow's own; run.json's best, said of it."""
        src, store = self.src, self.store
        best_sol = last_pop.best() if last_pop is not None else None
        if best_sol is None:
            return {"id": None, "speedup": None, "score": None, "reward": None, "grader": "loongflow"}
        best = {"id": best_sol.id, "speedup": best_sol.speedup, "score": best_sol.speedup, "reward": None,
                "grader": "loongflow", "loongflow_id": next(sid for sid, pid in src.ids.items() if pid == best_sol.id)}
        for rel, text in best_sol.files.items():
            store.write(f"final/files/{rel}", text)
        store.write("final/candidate.patch",
                    Candidate(files=best_sol.files).diff(src.baseline))  # type: ignore[arg-type]
        store.write_json("final/verdict.json", self.primary[best["loongflow_id"]])
        last_cp = src.rounds[last_k]
        if last_cp.best is not None and last_cp.best.solution_id == best["loongflow_id"]:
            _copy_texts(store, last_cp.path / "best_solution.json", "final/best_solution.json")
        return best

    def finish(self, last_pop: Population | None, last_k: int) -> None:
        src, store = self.src, self.store
        best = self.write_final(last_pop, last_k)
        totals = _totals(src, self.n_verdicts)
        store.write("final/report.md", _report(src.trace, src.report, best, self.best_by_round, totals))
        store.journal.append(Event.final, stop="imported", remeasured=[], best=best)
        store.journal.append(Event.run_end, status="imported")
        store.update_run(finished=datetime.now(timezone.utc).isoformat(timespec="seconds"), totals=totals,
                         best_by_round=self.best_by_round, rounds_done=last_k, status="imported", best=best)
        broken = verify(store.journal.path)
        if broken:  # our own writing went wrong: say so rather than hand over a run that fails its audit
            raise RuntimeError(f"imported journal does not verify: {broken[0]}")


def _totals(src: _Source, n_verdicts: int) -> dict[str, Any]:
    kinds = Counter(failure_kind(s.evaluation, s.score) or "passed" for s in src.union.values())
    return {"solutions": len(src.union), "passed": kinds.pop("passed", 0), "failed": sum(kinds.values()),
            "failures_by_kind": dict(sorted(kinds.items())), "evaluations": n_verdicts, "checkpoints": len(src.rounds),
            "iterations": len(src.trace.iterations), "llm_calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0}


def _report(trace: Trace, report: TraceReport, best: dict[str, Any], best_by_round: list[dict[str, Any]],
            totals: dict[str, Any]) -> str:
    lines = [f"# Imported LoongFlow trace: {trace.root.name}", "",
             f"- source: {trace.root}",
             f"- best: {best.get('loongflow_id') or best['id']} (score "
             f"{fmt_number(best['score'])}); LoongFlow has no reward",
             f"- solutions {totals['solutions']}: {totals['passed']} passed, {totals['failed']} failed "
             f"({', '.join(f'{k} {n}' for k, n in totals['failures_by_kind'].items()) or 'none'})",
             f"- checkpoints {totals['checkpoints']}, iteration folders {totals['iterations']}, "
             f"verdicts {totals['evaluations']}",
             "", "## Best by round", ""]
    lines += [f"- round {b['round']}: {b['best_id']} {fmt_number(b['speedup'])}" for b in best_by_round]
    lines += ["", f"## Audit of the source: {len(report.violations)} violation(s)", ""]
    lines += [f"- VIOLATION: {v}" for v in report.violations] + [f"- {f}" for f in report.findings]
    return "\n".join(lines) + "\n"
