"""The steady state of a search: rounds proposed ahead while earlier ones are graded.

The search (agent/search/steps.py) makes each round's *selection* in a fixed order and applies
finished rounds strictly in round order; in between, this module runs the slow parts at once:
- each launched round's proposal (planner, then its executors) on its own thread;
- every child an executor yields goes into one queue, and N graders take the oldest first
  (lowest round, then child): a verdict that arrives early waits until its round is applied;
- the same code is graded once: a second child with it shares the first one's verdict.

Threads here are daemons: an interrupted pesflow never waits for a model's answer to exit
(the sandboxes are torn down by the signal handler; agent/cli.py).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

from agent.population.code_key import code_key
from agent.search.utilization import Busy, Depth
from evaluator.verdict import Verdict

T = TypeVar("T")


def in_parallel(fns: list[Callable[[], T]]) -> list[T]:
    """Each fn on its own daemon thread; the results in the order given; the first error raised."""
    futures: list[Future] = [Future() for _ in fns]

    def run(fn: Callable[[], T], f: Future) -> None:
        try:
            f.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller, who re-raises it
            f.set_exception(e)

    for fn, f in zip(fns, futures):
        threading.Thread(target=run, args=(fn, f), daemon=True).start()
    return [f.result() for f in futures]


class GraderPool:
    """N graders over one priority queue; `submit` returns the verdict's future at once."""

    def __init__(self, grade: Callable[[dict[str, str], int], Verdict], workers: int, busy: Busy, queue: Depth):
        self._grade, self.workers, self.busy, self.queue = grade, workers, busy, queue
        self._cond = threading.Condition()
        self._heap: list[tuple[tuple[int, int], int, str]] = []
        self._work: dict[str, tuple[dict[str, str], int]] = {}
        self._futures: dict[str, Future] = {}
        self._seq = itertools.count()
        self._closed = False
        self.started = time.monotonic()
        self.stopped: float | None = None  # when the search stopped applying rounds (close)
        self.worker_seconds = [0.0] * workers  # each grader's time grading, for its own busy share
        self._threads = [threading.Thread(target=self._serve, args=(i,), daemon=True, name=f"grader-{i}")
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    def known(self, hashes: list[str]) -> None:
        """Programs already in the population (their code_key): never graded again, however
        spelled (the search marks them duplicates)."""
        with self._cond:
            for h in hashes:
                if h not in self._futures:
                    f: Future = Future()
                    f.set_result(None)
                    self._futures[h] = f

    def submit(self, files: dict[str, str], order: tuple[int, int]) -> Future:
        h = code_key(files)  # one grading per program, the first spelling submitted
        with self._cond:
            if h in self._futures:
                queued = self._work.get(h)
                if queued is not None and order[0] < queued[1]:  # an older round needs it too: it goes first
                    self._work[h] = (queued[0], order[0])
                    heapq.heappush(self._heap, (order, next(self._seq), h))
                return self._futures[h]
            f = Future()
            self._futures[h] = f
            if self._closed:
                f.cancel()
                return f
            self._work[h] = (files, order[0])
            heapq.heappush(self._heap, (order, next(self._seq), h))
            self.queue.add(1)
            self._cond.notify()
            return f

    def busy_each(self) -> list[float]:
        """Each grader's busy share from the pool's start (after the baseline) to its close (before
        the final pick)."""
        span = max((self.stopped or time.monotonic()) - self.started, 1e-9)
        return [round(min(1.0, w / span), 4) for w in self.worker_seconds]

    def _serve(self, i: int) -> None:
        while True:
            with self._cond:
                while not self._heap and not self._closed:
                    self._cond.wait()
                if self._closed and not self._heap:
                    return
                _, _, h = heapq.heappop(self._heap)
                if h not in self._work:  # an entry left behind when an older round moved it up
                    continue
                files, round_ = self._work.pop(h)
                self.queue.add(-1)
                f = self._futures[h]
            if not f.set_running_or_notify_cancel():
                continue
            t0 = time.monotonic()
            try:
                with self.busy.running():
                    f.set_result(self._grade(files, round_))
            except BaseException as e:  # noqa: BLE001 - the search re-raises it when it applies the round
                f.set_exception(e)
            finally:
                self.worker_seconds[i] += time.monotonic() - t0

    def close(self) -> None:
        """Drop what waits; let the gradings that run finish (each is bounded by its timeout)."""
        with self._cond:
            self._closed = True
            self.stopped = self.stopped or time.monotonic()
            while self._heap:
                _, _, h = heapq.heappop(self._heap)
                if self._work.pop(h, None) is not None:
                    self.queue.add(-1)
                    self._futures[h].cancel()
            self._cond.notify_all()
        for t in self._threads:
            t.join()


class Pipeline:
    """Rounds in flight: `start(k, fn)` runs round k's proposal on a thread, `result(k)` waits for it."""

    def __init__(self) -> None:
        self._rounds: dict[int, Future] = {}
        self._threads: list[threading.Thread] = []

    def running(self, k: int) -> bool:
        return k in self._rounds

    def start(self, k: int, fn: Callable[[], Any]) -> None:
        f: Future = Future()

        def run() -> None:
            try:
                f.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - re-raised by result()
                f.set_exception(e)

        self._rounds[k] = f
        t = threading.Thread(target=run, daemon=True, name=f"round-{k}")
        self._threads.append(t)
        t.start()

    def result(self, k: int) -> Any:
        return self._rounds.pop(k).result()

    def abandon(self, timeout_s: float | None = None) -> None:
        """Rounds that will not be applied (the run stops): wait for their threads, their results unread."""
        for t in self._threads:
            t.join(timeout_s)
        self._rounds.clear()
