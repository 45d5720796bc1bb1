"""A run directory read for people (the report's data), tolerantly: the page must work on any
run directory, a crashed one, and imported LoongFlow traces, so every file is optional and what
was missing is listed. Sources, best first:
- candidates: the last checkpoints/*/pesflow_state.json (population); else the largest
  LoongFlow `solutions/*.json` folder anywhere under RUN_DIR; else the journal's
  candidate and verdict events.
- diffs: rounds/*/executor/<id>/candidate.diff; else computed from the parent's files.
- verdicts: rounds/*/executor/<id>/verdict.json, evaluations/<hash>/**/verdict.json.
- costs: the journal's llm_call events; else run.json totals.
- trust: each candidate's as its grading carried it, with every person's decision the journal
  holds applied (a review after the last checkpoint included); `suspects` is the journal's
  flagged gradings (agent/rundir/schema.py), else run.json's. A candidate whose figures do not
  count (evaluator.trust's is_result) is never "improved", never the best.
"""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path
from typing import Any

from agent.rundir import journal
from agent.rundir.schema import STATE_FILE, cell_of, flagged, reviews_of
from agent.rundir.store import checkpoints_of
from evaluator.trust.findings import is_result
from evaluator.verdict import is_correct

MAX_DIFF_CHARS = 200_000  # a page people can still open; the rest stays in the run directory
KINDS = ["improved", "slow", "suspect", "needs_review", "rejected", "hard_fail", "timeout", "scope_violation",
         "grader_error", "infra_error", "no_code", "unknown"]


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(errors="replace"))
    except (OSError, ValueError):
        return None


def as_number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _population_state(run_dir: Path) -> tuple[dict[str, Any] | None, Path | None]:
    for _, cp in reversed(checkpoints_of(run_dir)):
        state = _json(cp / STATE_FILE)
        if isinstance(state, dict) and isinstance(state.get("population"), dict):
            return state, cp
    return None, None


def _from_pesflow(state: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    pop = state["population"]
    out = []
    for s in pop.get("solutions") or []:
        if not isinstance(s, dict) or "id" not in s:
            continue
        out.append({"id": str(s["id"]), "parent": s.get("parent_id"), "round": int(s.get("round") or 0),
                    "island": int(s.get("island") or 0), "status": s.get("status") or "unknown",
                    "reasons": list(s.get("hard_fail_reasons") or []), "speedup": as_number(s.get("speedup")),
                    "reward": as_number(s.get("reward")), "tests": [s.get("tests_passed", 0), s.get("tests_total", 0)],
                    "plan": s.get("plan") or "", "lessons": s.get("lessons") or "",
                    "duplicate_of": s.get("duplicate_of"), "files": s.get("files") or {},
                    "content_hash": s.get("content_hash") or "", "trust": dict(s.get("trust") or {})})
    return out, dict(pop.get("baseline_files") or {})


def _loongflow_dir(run_dir: Path) -> Path | None:
    dirs: dict[Path, int] = {}
    for p in run_dir.rglob("solutions/*.json"):
        dirs[p.parent.parent] = dirs.get(p.parent.parent, 0) + 1
    if not dirs:
        return None
    # The latest checkpoint holds every solution so far: the most files, then the last name.
    return max(dirs, key=lambda d: (dirs[d], d.name))


def _from_loongflow(cp: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(cp.glob("solutions/*.json")):
        s = _json(p)
        if not isinstance(s, dict):
            continue
        meta = s.get("metadata") if isinstance(s.get("metadata"), dict) else {}
        ev = meta.get("evaluation") if isinstance(meta.get("evaluation"), dict) else None
        if ev is None and isinstance(s.get("evaluation"), str):
            parsed = _json_text(s["evaluation"])
            ev = parsed if isinstance(parsed, dict) else {"message": s["evaluation"]}
        ev = ev or {}
        score = as_number(s.get("score"))
        status = ev.get("status") or ("ok" if score and score > 0 else "unknown")
        tests = ev.get("tests") if isinstance(ev.get("tests"), dict) else {}
        files = meta.get("files") if isinstance(meta.get("files"), dict) else {"solution": str(s.get("solution") or "")}
        out.append({"id": str(s.get("solution_id") or p.stem), "parent": s.get("parent_id") or None,
                    "round": int(as_number(s.get("iteration")) or 0), "island": int(as_number(s.get("island_id")) or 0),
                    "status": status, "reasons": list(ev.get("hard_fail_reasons") or []),
                    "speedup": as_number(ev.get("speedup")) if "speedup" in ev else score,
                    "reward": as_number(ev.get("reward")), "tests": [tests.get("passed", 0), tests.get("total", 0)],
                    "plan": str(s.get("generate_plan") or ""), "lessons": str(s.get("summary") or ""),
                    "duplicate_of": ev.get("duplicate_of") or meta.get("duplicate_of"), "files": files,
                    "content_hash": str(meta.get("content_hash") or ""),
                    "message": ev.get("message") if isinstance(ev.get("message"), str) else "",
                    "trust": dict(ev.get("trust") or {}) if isinstance(ev.get("trust"), dict) else {}})
    return out


def _json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _from_journal(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    verdicts = {}
    for e in events:
        if e.get("kind") == "verdict" and not (e.get("data") or {}).get("label"):
            verdicts[e["data"].get("content_hash")] = e["data"].get("verdict") or {}
    out = []
    for e in events:
        d = e.get("data") or {}
        if e.get("kind") != "candidate" or "id" not in d:
            continue
        v = verdicts.get(d.get("content_hash"), {})
        tests = v.get("tests") or {}
        out.append({"id": str(d["id"]), "parent": d.get("parent_id"), "round": int(d.get("round") or 0), "island": 0,
                    "status": d.get("status") if d.get("status") not in (None, "ok")
                        else (v.get("status") or d.get("status") or "unknown"),
                    "reasons": list(v.get("hard_fail_reasons") or []), "speedup": as_number(v.get("speedup")),
                    "reward": as_number(v.get("reward")), "tests": [tests.get("passed", 0), tests.get("total", 0)],
                    "plan": "", "lessons": str(d.get("detail") or ""), "duplicate_of": None, "files": {},
                    "content_hash": d.get("content_hash") or "", "trust": dict(v.get("trust") or {})})
    return out


def correct(c: dict[str, Any]) -> bool:
    """evaluator.verdict's one rule, on a candidate as the report reads it."""
    return is_correct(c["status"], c["reasons"])


def counts(c: dict[str, Any]) -> bool:
    """evaluator.trust's one rule: may its figures count?"""
    try:
        return is_result(c.get("trust") or None)
    except ValueError:  # a trust block no version of pesflow wrote: nothing to believe
        return False


def kind_of(c: dict[str, Any]) -> str:
    t = c.get("trust") or {}
    if correct(c) and not counts(c):
        if (t.get("review") or {}).get("decision") == "reject":
            return "rejected"
        return "suspect" if t.get("suspect") else "needs_review"
    if correct(c) and t.get("needs_review") and not t.get("review"):
        return "needs_review"  # counted or not (evaluator.trust's rule), flagged until a person decides
    if correct(c):
        return "improved" if (c.get("speedup") or 0) > 1.0 else "slow"
    return c["status"] if c["status"] in KINDS else "unknown"


def unified_diff(before: dict[str, str], after: dict[str, str]) -> str:
    out = []
    for rel in sorted(set(before) | set(after)):
        a, b = before.get(rel), after.get(rel)
        if a == b:
            continue
        out += difflib.unified_diff((a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
                                    "/dev/null" if a is None else f"a/{rel}", "/dev/null" if b is None else f"b/{rel}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _recorded(run_dir: Path, cid: str, name: str) -> Path | None:
    found = sorted(run_dir.glob(f"rounds/*/executor/{cid}/{name}"))
    return found[0] if found else None


def _verdict_for(run_dir: Path, c: dict[str, Any]) -> dict[str, Any] | None:
    p = _recorded(run_dir, c["id"], "verdict.json")
    v = _json(p) if p else None
    if v is None and c.get("content_hash"):
        for q in sorted((run_dir / "evaluations" / c["content_hash"][:16]).glob("**/verdict.json"),
                        key=lambda q: len(q.parts)):
            v = _json(q)
            if v is not None:
                break
    return v if isinstance(v, dict) else None


def _costs(events: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    roles: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.get("kind") != "llm_call":
            continue
        d = e.get("data") or {}
        r = roles.setdefault(d.get("role") or "?",
                             {"role": d.get("role") or "?", "models": set(), "calls": 0, "failed": 0,
                              "input_tokens": 0, "cache_read_tokens": 0, "output_tokens": 0, "usd": 0.0,
                              "seconds": 0.0})
        r["calls"] += 1
        r["failed"] += d.get("text") is None
        r["models"].add(str(d.get("model") or "?"))
        usage = d.get("usage") or {}
        r["input_tokens"] += int(usage.get("input_tokens") or 0)
        # the part of input read from the provider's cache
        r["cache_read_tokens"] += int(usage.get("cache_read_tokens") or 0)
        r["output_tokens"] += int(usage.get("output_tokens") or 0)
        r["usd"] += float(d.get("cost_usd") or 0.0)
        r["seconds"] += float(d.get("latency_s") or 0.0)
    rows = [{**r, "models": ", ".join(sorted(r["models"]))} for r in roles.values()]
    totals = run.get("totals") or {}
    if not rows and totals.get("calls_by_role"):  # no journal: what run.json kept, without a per-role split of tokens
        rows = [{"role": k, "models": "", "calls": v, "failed": 0, "input_tokens": None, "cache_read_tokens": None,
                 "output_tokens": None, "usd": None,
                 "seconds": None} for k, v in totals["calls_by_role"].items()]
    order = {"planner": 0, "executor": 1, "repair": 2, "summarizer": 3}
    rows.sort(key=lambda r: (order.get(r["role"], 9), r["role"]))
    total = {"calls": sum(r["calls"] for r in rows),
             "input_tokens": totals.get("input_tokens", sum(r["input_tokens"] or 0 for r in rows)),
             "cache_read_tokens": totals.get("cache_read_tokens", sum(r["cache_read_tokens"] or 0 for r in rows)),
             "output_tokens": totals.get("output_tokens", sum(r["output_tokens"] or 0 for r in rows)),
             "usd": totals.get("usd", sum(r["usd"] or 0 for r in rows)),
             "seconds": totals.get("llm_seconds", sum(r["seconds"] or 0 for r in rows))}
    return {"roles": rows, "total": total}


def best_by_round(run: dict[str, Any], state: dict[str, Any] | None,
                  cands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As recorded; recomputed from the candidates when a recorded best no longer counts (a review)."""
    dropped = {c["id"] for c in cands if not c.get("counts", True)}
    for src in (run.get("best_by_round"), (state or {}).get("best_by_round")):
        if isinstance(src, list) and src and not any(isinstance(b, dict) and b.get("best_id") in dropped for b in src):
            return [{"round": int(b.get("round") or 0), "best_id": b.get("best_id"),
                     "speedup": as_number(b.get("speedup"))}
                    for b in src if isinstance(b, dict)]
    out: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    for k in sorted({c["round"] for c in cands}):
        for c in cands:
            if (c["round"] == k and correct(c) and counts(c) and c.get("speedup")
                and (best is None or c["speedup"] > best["speedup"])):
                best = c
        out.append({"round": k, "best_id": best["id"] if best else None, "speedup": best["speedup"] if best else None})
    return out


def load_run(run_dir: Path) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data; `missing` names what was not found."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a directory; pass a run directory (traces/<bench>/<dir>/<run-id>)")
    missing: list[str] = []
    run = _json(run_dir / "run.json")
    if not isinstance(run, dict):
        missing.append("run.json")
        run = {}
    events = journal.read(run_dir / "journal.jsonl") if (run_dir / "journal.jsonl").is_file() else []
    if not events:
        missing.append("journal.jsonl")
    state, _ = _population_state(run_dir)
    baseline_files: dict[str, str] = {}
    if state is not None:
        cands, baseline_files = _from_pesflow(state)
        source = "pesflow checkpoint"
    elif (lf := _loongflow_dir(run_dir)) is not None:
        cands, source = _from_loongflow(lf), f"LoongFlow solutions in {lf.relative_to(run_dir) or '.'}"
        missing.append("checkpoints/*/pesflow_state.json")
    else:
        cands, source = _from_journal(events), "journal events"
        missing.append("checkpoints (no population found)")
    reviews = reviews_of(events)
    for c in cands:  # a person's decision counts from the moment it is journaled
        if c.get("content_hash") in reviews:
            c["trust"] = {**(c.get("trust") or {}), "review": reviews[c["content_hash"]]}
        c["counts"] = counts(c)
    ids = {c["id"] for c in cands}
    by_id = {c["id"]: c for c in cands}
    best_id = (run.get("best") or {}).get("id")
    if best_id in by_id and not by_id[best_id]["counts"]:
        best_id = None  # a pick a person rejected afterwards is no best
    elif best_id not in ids:
        ranked = [c for c in cands if correct(c) and c["counts"] and c.get("speedup")]
        best_id = max(ranked, key=lambda c: c["speedup"])["id"] if ranked else None
    for c in cands:
        if c["parent"] not in ids:
            c["parent"] = None
        diff_file = _recorded(run_dir, c["id"], "candidate.diff")
        if diff_file is not None:
            c["diff"], c["diff_source"] = diff_file.read_text(errors="replace"), "recorded"
        else:
            before = by_id[c["parent"]]["files"] if c["parent"] else baseline_files
            c["diff"] = unified_diff(before, c["files"]) if (before or c["parent"]) and c["files"] else ""
            c["diff_source"] = "computed" if c["diff"] else "none"
        if len(c["diff"]) > MAX_DIFF_CHARS:
            c["diff"] = (c["diff"][:MAX_DIFF_CHARS]
                         + f"\n... (cut at {MAX_DIFF_CHARS} characters; the whole diff is in the run directory)\n")
        v = _verdict_for(run_dir, c) or {}
        c["verdict"] = {k: v.get(k) for k in ("status", "grader", "message", "seconds", "hardware", "speedup",
                                              "reward")}
        if not c["verdict"].get("message") and c.get("message"):
            c["verdict"]["message"] = c["message"]
        c["kind"] = kind_of(c)
        c["best"] = c["id"] == best_id
    for c in cands:  # the files are in the diffs now; the page need not carry every version whole
        c.pop("files", None)
        c.pop("message", None)
    task = run.get("task") if isinstance(run.get("task"), dict) else {"name": run.get("task") or ""}
    lessons = (state or {}).get("memory") or []
    if not lessons:
        for p in sorted(run_dir.glob("rounds/*/summarizer/lessons.json"), reverse=True):
            mem = (_json(p) or {}).get("memory")
            if mem:
                lessons = mem
                break
    return {
        "run_dir": str(run_dir.resolve()), "run_id": run.get("run_id") or run_dir.name,
        "task": task.get("name") or "", "reward_class": task.get("reward_class"),
        "status": run.get("status") or "unknown", "seed": run.get("seed"), "grader": run.get("grader"),
        "started": run.get("started"), "finished": run.get("finished"),
        "feedback": ((run.get("config") or {}).get("search") or {}).get("feedback"),
        "method": cell_of(run).get("method"), "best": run.get("best") or {}, "best_id": best_id,
        "totals": run.get("totals") or {}, "candidates": cands, "best_by_round": best_by_round(run, state, cands),
        "costs": _costs(events, run), "memory": [str(m) for m in lessons], "source": source, "missing": missing,
        "package": task.get("source") or {}, "suspects": flagged(events) if events else list(run.get("suspects") or []),
    }
