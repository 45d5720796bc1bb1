"""The run's append-only journal: one JSON event per line, each hashed with the previous one.

    {"seq": 7, "ts": "...", "kind": "llm_call", "data": {...}, "prev": "<hash of line 6>", "hash": "..."}

hash = sha256(prev + canonical JSON of the line without "hash"), so editing, removing or
reordering any line breaks every hash after it, which `verify` (and `pesflow audit`) detects.
Every line is flushed and fsynced before `append` returns: a crash loses at most the line
being written; a torn last line (a crash, a full disk) is cut off on reopening, and a write the
disk refused is cut back at once, so the file always ends on a whole line. Appends hold an
flock on the file, and a writer that finds the file grown by another process (`pesflow review` on
a run that is still going) chains onto its last line, so two writers never fork the chain.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent.rundir.faults import writing
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
            problems.append(f"line {i + 1}: seq {entry.get('seq')} where {i} was expected "
                            "(a line removed or reordered)")
        if entry.get("prev") != prev:
            problems.append(f"line {i + 1}: prev does not match the hash of the line before (the chain is broken)")
        if line_hash(entry) != entry.get("hash"):
            problems.append(f"line {i + 1}: hash does not match its content (the line was edited)")
        prev = entry.get("hash", "")
    return problems


def torn_tail(data: bytes) -> int:
    """How many bytes at the end of a journal are not whole lines (a crash or a full disk cut the
    last write short): the unterminated rest, and a last line that does not parse."""
    keep = len(data) if data.endswith(b"\n") else data.rfind(b"\n") + 1
    while keep > 0:
        start = data.rfind(b"\n", 0, keep - 1) + 1
        line = data[start:keep].strip()
        if line:
            try:
                json.loads(line)
                break
            except ValueError:
                pass
        keep = start
    return len(data) - keep


class Journal:
    def __init__(self, path: Path, run_dir: Path | None = None):
        self.path, self.run_dir = path, run_dir
        self._lock = threading.Lock()
        self.dropped = b""  # the torn tail cut on opening, for the resume's one-line warning
        self._truncate_torn_tail()
        existing = read(path)
        self._seq = len(existing)
        self._prev = existing[-1]["hash"] if existing else GENESIS
        self._size = self.path.stat().st_size if self.path.is_file() else 0  # what this writer last saw

    def _truncate_torn_tail(self) -> None:
        """Cut a torn tail off in place (truncate needs no free space, unlike a rewrite): the
        next line then chains onto the last whole one, and the audit stays clean."""
        if not self.path.is_file():
            return
        with writing(self.path, self.run_dir), open(self.path, "rb+") as f:
            # a live writer (a run beside `pesflow review`) finishes its line first
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            data = f.read()
            n = torn_tail(data)
            if n:
                f.truncate(len(data) - n)
                self.dropped = data[len(data) - n:]

    def torn_warning(self) -> str | None:
        """The one line a resume says about a torn tail it dropped."""
        if not self.dropped:
            return None
        shown = self.dropped[:60].decode(errors="replace").replace("\n", " ")
        return (f"dropped the torn last line of {self.path} ({len(self.dropped)} bytes, a "
                f"write cut short by a crash or a full disk: {shown!r}...); the run goes on from the last whole line")

    def append(self, kind: Event | str, **data: Any) -> dict[str, Any]:
        kind = Event(kind).value  # a kind the schema does not name is a bug here, not a new event
        with self._lock, writing(self.path, self.run_dir), open(self.path, "a", encoding="utf-8") as f:
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
            before = os.fstat(f.fileno()).st_size
            try:
                with writing(self.path, self.run_dir):
                    # straight to the descriptor: nothing left in a buffer to be flushed after the cut below
                    data = (json.dumps(entry, ensure_ascii=False) + "\n").encode()
                    while data:
                        data = data[os.write(f.fileno(), data):]
                    os.fsync(f.fileno())
            except BaseException:
                # a full disk can take half a line: cut it, so that the file ends on a whole line
                with contextlib.suppress(OSError):
                    os.ftruncate(f.fileno(), before)
                raise
            self._size = os.fstat(f.fileno()).st_size
            self._seq += 1
            self._prev = entry["hash"]
            return entry

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in read(self.path) if kind is None or e["kind"] == kind]
