"""`Busy`: one kind of work that may run several at once (gradings over N slots, LLM calls), counted
as the time at least one was running and the slot-seconds of all of them; thread-safe and read
live. Its own module, below both the search (agent/search/utilization.py) and the LLM gateway
(agent/llm/gateway.py) that count with it, so neither imports the other for it."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator


class Busy:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._since = 0.0  # when the running count last changed
        self._any = 0.0  # seconds with at least one running
        self._sum = 0.0  # slot-seconds

    def _advance(self, now: float) -> None:
        dt = now - self._since
        if self._running:
            self._any += dt
            self._sum += dt * self._running
        self._since = now

    def enter(self) -> None:
        with self._lock:
            self._advance(self._clock())
            self._running += 1

    def exit(self) -> None:
        with self._lock:
            self._advance(self._clock())
            self._running -= 1

    @contextmanager
    def running(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.exit()

    def seconds(self) -> tuple[float, float]:
        """(seconds with any running, slot-seconds) up to now."""
        with self._lock:
            self._advance(self._clock())
            return self._any, self._sum
