"""How busy a search keeps what it pays for: the graders, the model, and the queue between them.

`Busy` (agent/busy.py, below the search and the LLM gateway that both count with it) counts one
kind of work that may run several at once (gradings over N slots, LLM calls). `Depth` is a count
over time (candidates waiting for a grader): its time-weighted mean and its peak. Both are
thread-safe and read live, so the screen and run.json show the same figures.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from agent.busy import Busy


class Depth:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._started = self._since = clock()
        self._value = 0
        self._area = 0.0
        self.peak = 0

    def add(self, n: int) -> None:
        with self._lock:
            now = self._clock()
            self._area += self._value * (now - self._since)
            self._since = now
            self._value += n
            self.peak = max(self.peak, self._value)

    def mean(self) -> float:
        with self._lock:
            now = self._clock()
            span = now - self._started
            return (self._area + self._value * (now - self._since)) / span if span > 0 else 0.0


def utilization(wall_seconds: float, graders: Busy, workers: int, llm: Busy, queue: Depth,
                depth: int) -> dict[str, Any]:
    """run.json's `utilization`: over the wall time of this process's search (a resumed run counts
    from its resume). grader_busy_share: slot-seconds graded / (wall x graders); llm_busy_share:
    the share of the wall time at least one model call was waited on; queue_depth_*: candidates
    waiting for a grader. The search adds grader_busy_each (agent/search/pipeline.py busy_each)."""
    _, grading = graders.seconds()
    llm_any, _ = llm.seconds()
    wall = max(wall_seconds, 1e-9)
    return {"graders": workers, "pipeline_depth": depth, "wall_seconds": round(wall_seconds, 3),
            "grader_busy_share": round(min(1.0, grading / (wall * workers)), 4),
            "llm_busy_share": round(min(1.0, llm_any / wall), 4),
            "queue_depth_mean": round(queue.mean(), 3), "queue_depth_max": queue.peak}


def one_line(u: dict[str, Any]) -> str:
    """What the screen shows of it."""
    return (f"graders busy {u['grader_busy_share']:.0%} ({u['graders']}) · LLM busy {u['llm_busy_share']:.0%} · "
            f"queue {u['queue_depth_mean']:.1f} (max {u['queue_depth_max']})")
