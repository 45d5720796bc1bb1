"""The run's append-only journal: one JSON event per line, each hashed with the previous one.

    {"seq": 7, "ts": "...", "kind": "llm_call", "data": {...}, "prev": "<hash of line 6>", "hash": "..."}

hash = sha256(prev + canonical JSON of the line without "hash"), so editing, removing or
reordering any line breaks every hash after it, which `verify` (and `pesflow audit`) detects.
Every line is flushed and fsynced before `append` returns: a crash loses at most the line
being written, and a torn last line is recognised and ignored on reopening. Appends hold an
flock on the file, and a writer that finds the file grown by another process (`pesflow review` on
a run that is still going) chains onto its last line, so two writers never fork the chain.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.rundir.schema import Event
from agent.rundir.secrets import redact

GENESIS = "0" * 64


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def line_hash(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "hash"}
    return hashlib.sha256((entry["prev"] + canonical(body)).encode()).hexdigest()


def read(path: Path) -> list[dict[str, Any]]:
    """Every complete line; a torn last line (a crash mid-write) is dropped."""
    out = []
    if not path.is_file():
        return out
    lines = path.read_text(errors="replace").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1 or all(not rest.strip() for rest in lines[i + 1 :]):
                break  # the torn tail of a crash
            raise
    return out


def verify(path: Path) -> list[str]:
    """Problems with the chain, one line each; empty when intact."""
    problems = []
    prev = GENESIS
    for i, entry in enumerate(read(path)):
        if entry.get("seq") != i:
            problems.append(f"line {i + 1}: seq {entry.get('seq')} where {i} was expected (a line removed or reordered)")
        if entry.get("prev") != prev:
            problems.append(f"line {i + 1}: prev does not match the hash of the line before (the chain is broken)")
        if line_hash(entry) != entry.get("hash"):
            problems.append(f"line {i + 1}: hash does not match its content (the line was edited)")
        prev = entry.get("hash", "")
    return problems


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        existing = read(path)
        self._seq = len(existing)
        self._prev = existing[-1]["hash"] if existing else GENESIS
        self._truncate_torn_tail(existing)
        self._size = self.path.stat().st_size if self.path.is_file() else 0  # what this writer last saw

    def _truncate_torn_tail(self, existing: list[dict[str, Any]]) -> None:
        if not self.path.is_file():
            return
        text = self.path.read_text(errors="replace")
        good = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in existing) if existing else ""
        # Only rewrite when a crash left a partial line; complete files are left untouched.
        if text and not text.endswith("\n"):
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(good)
            os.replace(tmp, self.path)

    def append(self, kind: Event | str, **data: Any) -> dict[str, Any]:
        kind = Event(kind).value  # a kind the schema does not name is a bug here, not a new event
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # released when the file closes
            if os.fstat(f.fileno()).st_size != self._size:  # another process appended since
                existing = read(self.path)
                self._seq, self._prev = len(existing), existing[-1]["hash"] if existing else GENESIS
            entry = {
                "seq": self._seq,
                "ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "kind": kind,
                "data": json.loads(redact(json.dumps(data, ensure_ascii=False, default=str))),
                "prev": self._prev,
            }
            entry["hash"] = line_hash(entry)
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
            self._size = os.fstat(f.fileno()).st_size
            self._seq += 1
            self._prev = entry["hash"]
            return entry

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in read(self.path) if kind is None or e["kind"] == kind]
