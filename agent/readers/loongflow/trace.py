"""LoongFlow traces, read: their layout and fields, and a tolerant reader of every file.

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
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CHECKPOINT_RE = re.compile(r"^checkpoint-(?:checkpoint-)?iter-(\d+)-(\d+)$")
# LoongFlow writes the first; the mirror's README names the second
RESULT_FILES = ("evaluation_result.json", "result.json")
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


def as_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def as_int(v: Any) -> int | None:
    f = as_number(v)
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
        island_id=max(0, as_int(d.get("island_id")) or 0),
        iteration=as_int(d.get("iteration")),
        timestamp=as_number(d.get("timestamp")) or 0.0,
        generation=as_int(d.get("generation")),
        score=as_number(d.get("score")),
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
    reasons = ([str(r) for r in ev.get("hard_fail_reasons") or [] if r] if isinstance(ev.get("hard_fail_reasons"), list)
               else [])
    check = str(artifacts.get("correctness_check") or "").lower()
    incorrect = check.startswith("fail") or as_number(metrics.get("correctness")) == 0.0
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


def read_json_file(path: Path, trace: Trace) -> Any | None:
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
        meta = read_json_file(p / "metadata.json", trace)
        meta = meta if isinstance(meta, dict) else None
        best = parse_solution(read_json_file(p / "best_solution.json", trace))
        sols: dict[str, LFSolution] = {}
        for f in sorted((p / "solutions").glob("*.json")):
            s = parse_solution(read_json_file(f, trace), fallback_id=f.stem)
            if s is not None:
                sols[f.stem] = s
        k = int(m.group(1)) if m else as_int((meta or {}).get("last_iteration"))
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
            d = read_json_file(p / name, trace)
            rec.result, rec.result_file = (d if isinstance(d, dict) else {}), name
            break
    bs = read_json_file(p / ".best_score.json", trace)
    rec.best_score = as_number(bs.get("score")) if isinstance(bs, dict) else None
    return rec


def fmt_number(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"
