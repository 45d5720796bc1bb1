"""`pesflow review RUN_DIR ID --accept|--reject --why TEXT`: a person's decision on one candidate's
grading, journaled (Event.review) through the run's one writer, and what audit checks of it.

The decision is on the code (its content hash): every grading of that code, whichever grader,
carries it. Readers apply it from the journal at once (run.json's `suspects`, the report, the
baselines tables); a resumed search applies it to its population (agent/search/steps.py restore):
an accepted candidate is a result again, a rejected one is not, whatever the screens said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.rundir import journal
from agent.rundir.schema import Event, flagged
from agent.rundir.store import RunDirError, RunStore

DECISIONS = ("accept", "reject")
MIN_PREFIX = 6  # hex digits of a hash prefix: fewer would match too much to mean one candidate


def candidates(events: list[dict[str, Any]]) -> dict[str, str]:
    """Candidate id -> its code hash, for every graded candidate the journal records."""
    return {e["data"]["id"]: e["data"]["content_hash"] for e in events
            if e["kind"] == Event.candidate and e["data"].get("content_hash")}


def resolve(events: list[dict[str, Any]], ident: str) -> tuple[str, str]:
    """(candidate id, code hash) of an id as run.json and the report show it (r03-c0), or of a
    prefix of its code hash; one line naming the problem otherwise."""
    by_id = candidates(events)
    if ident in by_id:
        return ident, by_id[ident]
    if len(ident) >= MIN_PREFIX and all(ch in "0123456789abcdef" for ch in ident.lower()):
        hits = {h for h in by_id.values() if h.startswith(ident.lower())}
        if len(hits) == 1:
            h = hits.pop()
            return next(i for i, x in by_id.items() if x == h), h
        if len(hits) > 1:
            raise RunDirError(f"hash prefix {ident} matches {len(hits)} candidates; give "
                              "more digits or the candidate id")
    raise RunDirError(f"no graded candidate {ident!r} in this run; pass an id from run.json's suspects (e.g. r03-c0) "
                      f"or at least {MIN_PREFIX} digits of its content hash")


def review(run_dir: Path, ident: str, accept: bool, reject: bool, why: str | None) -> dict[str, Any]:
    """Journal the decision and refresh run.json's `suspects`; returns the event's data."""
    if accept == reject:
        raise RunDirError("pass exactly one of --accept or --reject")
    if not why or not why.strip():
        raise RunDirError("--why TEXT is required: say why, in words a later reader can check")
    run_dir = Path(run_dir)
    if not (run_dir / "run.json").is_file() or not (run_dir / "journal.jsonl").is_file():
        raise RunDirError(f"{run_dir} is not a pesflow run directory (run.json and journal.jsonl); pass "
                          "the folder `pesflow run` printed")
    cid, h = resolve(journal.read(run_dir / "journal.jsonl"), ident)
    store = RunStore(run_dir)
    data = {"candidate_id": cid, "content_hash": h, "decision": "accept" if accept else "reject",
            "why": " ".join(why.split())}
    store.journal.append(Event.review, **data)
    store.update_run(suspects=flagged(store.journal.events()))
    return data


def check_reviews(events: list[dict[str, Any]]) -> tuple[list[str], int]:
    """Audit: each review event names a graded candidate by its id and its hash, decides one of
    DECISIONS and says why. (The hash chain, checked apart, holds each one in place.)"""
    by_id = candidates(events)
    problems, n = [], 0
    for e in events:
        if e["kind"] != Event.review:
            continue
        n += 1
        d, where = e["data"], f"review at line {e.get('seq', 0) + 1}"
        cid = d.get("candidate_id")
        if cid not in by_id:
            problems.append(f"{where}: names candidate {cid!r}, which no candidate event records")
        elif d.get("content_hash") != by_id[cid]:
            problems.append(f"{where}: the hash it names is not candidate {cid}'s code")
        if d.get("decision") not in DECISIONS:
            problems.append(f"{where}: decision {d.get('decision')!r} is neither accept nor reject")
        if not str(d.get("why") or "").strip():
            problems.append(f"{where}: carries no why")
    return problems, n
