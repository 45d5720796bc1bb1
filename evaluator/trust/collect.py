"""What the runtime guard reports from inside a grading, gathered outside it.

Each Python process of a grading sends its guard's events, as they happen, to a datagram
socket this side holds (what was sent cannot be taken back), and also writes them to a file
in the grading's trust folder (which a backend without the socket copies out). The reader
keeps both and lets a socket copy stand for its file copy.
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
from pathlib import Path
from typing import Any

MAX_EVENTS = 20000  # a candidate that floods the socket cannot fill memory


class EventSocket:
    """A bound datagram socket at `path`, read by a thread until `close()`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        # through the folder's descriptor: a socket's path may hold only 107 bytes, a cache's may be longer
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._sock.bind(f"/proc/self/fd/{fd}/{self.path.name}")
        finally:
            os.close(fd)
        os.chmod(self.path, 0o666)
        self._sock.setblocking(False)
        self._wake_r, self._wake_w = os.pipe()  # close() ends the reader's wait at once, not at a poll's next tick
        self._closed = False
        self._thread = threading.Thread(target=self._read, name="pesflow-trust-events", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self._sock, self._wake_r], [], [])
            except (OSError, ValueError):
                return
            if self._wake_r in ready:
                return  # close() drains what is left
            try:
                self._take(self._sock.recv(1 << 17))
            except BlockingIOError:
                continue
            except OSError:
                return

    def _take(self, data: bytes) -> None:
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return
        try:
            ev = json.loads(data.decode(errors="replace"))
        except ValueError:
            self.dropped += 1
            return
        if isinstance(ev, dict):
            ev["via"] = "socket"
            self.events.append(ev)

    def close(self) -> list[dict[str, Any]]:
        if self._closed:  # once: what it had is what a second caller gets
            return self.events
        self._closed = True
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=2)
        os.close(self._wake_r)
        os.close(self._wake_w)
        while True:  # what arrived after the reader's last read
            try:
                self._take(self._sock.recv(1 << 17))
            except OSError:
                break
        self._sock.close()
        try:
            self.path.unlink()
        except OSError:
            pass
        return self.events


def read_event_files(folder: Path) -> list[dict[str, Any]]:
    """The guard's per-process files (events-<pid>-<nonce>.jsonl), as far as they parse."""
    out: list[dict[str, Any]] = []
    if not folder.is_dir():
        return out
    for p in sorted(folder.glob("events-*.jsonl")):
        if p.is_symlink() or not p.is_file():
            continue
        with open(p, errors="replace") as f:
            for line in f:
                if len(out) >= MAX_EVENTS:
                    return out
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    ev["via"] = "file"
                    out.append(ev)
    return out


def merge(socket_events: list[dict[str, Any]], file_events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One list: each (pid, seq) once, the socket's copy first (a file line may have been
    rewritten; a datagram cannot be)."""
    seen: set[tuple[Any, Any]] = set()
    out = []
    for ev in [*socket_events, *file_events]:
        key = (ev.get("pid"), ev.get("seq"))
        if key in seen:
            continue
        seen.add(key)
        out.append(ev)
    return out
