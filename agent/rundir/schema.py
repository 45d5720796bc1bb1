"""The run directory's contract: its layout, run.json's fields, every journal event kind, the
totals counted from the journal. One definition, read by every writer and reader.

    traces/<bench>/<dir>/<run-id>/
      run.json          config, task (with its source), versions, seed, timing, totals, ..., status, best
      journal.jsonl     hash-chained events, one of EVENTS each (agent/rundir/journal.py)
      rounds/<k>/       planner/, executor/<child>/, summarizer/: readable prompts, answers, diffs, verdicts
      evaluations/<h>/  the grader's logs of each distinct candidate; dev-reference/ (the dev engine's noop)
      checkpoints/round-<k>/   LoongFlow's layout (best_solution.json, metadata.json, solutions/)
                               + pesflow_state.json (population, RNG, memory, totals)
      final/            the pick as a patch and files, its verdicts, report.md
run.json's `suspects` (`flagged`): every grading the trust screens flagged (suspect or needs_review)
or a person reviewed, with its candidate id, code hash, grader, reasons, review, whether it counts,
and the speedup its grader claimed (for the person deciding; never a prompt's or a table's).
A baselines cell is a run directory too; its run.json's `cell` says which task, method and seed
(`baseline`, the key it had before, is read as well).
"""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Any

from evaluator.trust.findings import is_result

VERSION = "0.1.0"
STATE_FILE = "pesflow_state.json"  # in each checkpoint: what a resume restores


class Event(str, Enum):
    """Every kind of journal event (the `kind` of a journal line)."""

    run_start = "run_start"
    resume = "resume"
    llm_call = "llm_call"
    model_choice = "model_choice"  # a role with several models: which answers this call, and why (agent/llm/bandit.py)
    model_credit = "model_credit"  # what a call's child earned for its model, once graded
    withheld = "withheld"  # prompt lines the leak guard kept out of a call
    selection = "selection"
    plan = "plan"
    candidate = "candidate"  # a child proposed by an executor (or the baseline)
    duplicate = "duplicate"
    verdict = "verdict"
    summary = "summary"
    migration = "migration"
    checkpoint = "checkpoint"
    final = "final"
    run_end = "run_end"
    warning = "warning"
    review = "review"  # a person's decision on a candidate's grading (pesflow review)
    settled = "settled"  # a parent whose probes had waited (trust.deferred), screened in full when picked


NEVER_SENT = ("leak", "not_recorded", "budget")  # llm_call error kinds of calls that never left pesflow


def journal_totals(events: list[dict[str, Any]]) -> dict[str, Any]:
    """LLM use and gradings of a run, each paid call and each grading counted once."""
    t: dict[str, Any] = {"llm_calls": 0, "failed_llm_calls": 0, "replayed_llm_calls": 0, "input_tokens": 0,
                         "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0, "usd": 0.0,
                         "llm_seconds": 0.0, "calls_by_role": {}, "evaluations": 0, "reused_verdicts": 0,
                         "duplicates_not_regraded": 0, "scorings": {"dev": 0, "hidden": 0}, "grading_seconds": 0.0}
    for e in events:
        d = e["data"]
        if e["kind"] == Event.llm_call:
            if d.get("replayed"):
                t["replayed_llm_calls"] += 1
                continue
            if d.get("error_kind") in NEVER_SENT:
                continue
            t["llm_calls"] += 1
            t["calls_by_role"][d["role"]] = t["calls_by_role"].get(d["role"], 0) + 1
            if d.get("text") is None:
                t["failed_llm_calls"] += 1
            usage = d.get("usage") or {}
            t["input_tokens"] += usage.get("input_tokens", 0)
            t["output_tokens"] += usage.get("output_tokens", 0)
            t["cache_read_tokens"] += usage.get("cache_read_tokens", 0)  # parts of input_tokens
            t["cache_write_tokens"] += usage.get("cache_write_tokens", 0)
            t["usd"] += d.get("cost_usd") or 0.0
            t["llm_seconds"] += d.get("latency_s") or 0.0
        elif e["kind"] == Event.verdict:
            if d.get("reused"):
                t["reused_verdicts"] += 1
                continue
            t["evaluations"] += 1
            t["scorings"][d["grader"]] = t["scorings"].get(d["grader"], 0) + 1
            t["grading_seconds"] += d.get("grading_seconds") or 0.0
        elif e["kind"] == Event.duplicate:
            t["duplicates_not_regraded"] += 1
    t["usd"] = round(t["usd"], 6)
    t["llm_seconds"] = round(t["llm_seconds"], 3)
    t["grading_seconds"] = round(t["grading_seconds"], 3)
    return t


def reviews_of(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Code hash -> a person's last decision on that code (`pesflow review`), as `Trust.review` holds it."""
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        if e["kind"] == Event.review:
            d = e["data"]
            out[d["content_hash"]] = {"decision": d["decision"], "why": d["why"], "at": e["ts"],
                                      "candidate_id": d["candidate_id"]}
    return out


def flagged(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """run.json's `suspects`: each grading (verdict event, not one served again) whose trust is
    suspect or needs_review, or whose code a person reviewed, in journal order, the review applied."""
    ids: dict[str, str] = {}
    for e in events:
        if e["kind"] == Event.candidate and e["data"].get("content_hash"):
            ids.setdefault(e["data"]["content_hash"], e["data"]["id"])
    reviews = reviews_of(events)
    out = []
    for e in events:
        d = e["data"]
        if e["kind"] != Event.verdict or d.get("reused"):
            continue
        h, t = d["content_hash"], dict((d.get("verdict") or {}).get("trust") or {})
        if not (t.get("suspect") or t.get("needs_review") or h in reviews):
            continue
        if h in reviews:
            t["review"] = reviews[h]
        out.append({"candidate_id": d.get("candidate_id") or ids.get(h), "content_hash": h,
                    "label": d.get("label") or "search", "grader": d["grader"], "suspect": bool(t.get("suspect")),
                    "needs_review": bool(t.get("needs_review")), "reasons": list(t.get("reasons") or []),
                    "review": t.get("review"), "counts": is_result(t),
                    "claimed_speedup": (d.get("verdict") or {}).get("speedup")})  # the grader's, for a reviewer
    return out


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_metadata(config: dict[str, Any], task: Any, run_id: str, seed: int, grader: str,
                 backend: str) -> dict[str, Any]:
    """run.json's opening fields; `task` an evaluator.task.Task, `config` the run's whole config."""
    return {
        "run_id": run_id, "pesflow": VERSION,
        "task": {"name": task.name, "path": str(task.root), "content_hash": task.content_hash,
                 "source": task.source.model_dump(),
                 "scope": task.scope, "max_submissions": task.max_submissions, "reward_class": task.reward_class},
        "config": config, "seed": seed, "grader": grader, "backend": backend,
        "versions": {"python": sys.version.split()[0], "platform": platform.platform(),
                     **{d: _version(d) for d in ("openai", "anthropic", "langgraph", "pydantic")}},
    }


def new_run_dir(out: Path, bench: str, dir_: str, seed: int) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = out / bench / dir_
    for n in range(1000):
        p = base / (f"{stamp}-s{seed}" + (f"-{n}" if n else ""))
        if not p.exists():
            return p
    raise RuntimeError("cannot find a free run directory name")


def cell_of(run: dict[str, Any]) -> dict[str, Any]:
    """A baselines cell's identity in its run.json (`cell`; before it was called `baseline`)."""
    return run.get("cell") or run.get("baseline") or {}
