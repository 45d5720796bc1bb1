"""Priority waiting queue of the V1 scheduler.

Requests are served in ascending order of ``(priority, arrival_time)``.
Requests with an equal ``(priority, arrival_time)`` are served in insertion
order: ``add_request`` appends behind every equal request, while
``prepend_request`` (used to put back a preempted request) goes in front of
every equal request, the most recent prepend first.

This implementation keeps the requests in one unordered Python list, in
"tie order": prepended requests at the front (latest first), added requests
behind them in the order they were added. Enqueueing is O(1) (O(n) for a
prepend), and every peek/pop scans the whole list for the smallest key, taking
the first of several equal keys, so draining n requests costs O(n^2).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from vllm.v1.core.sched.request_queue import RequestQueue
from vllm.v1.request import Request


class PriorityRequestQueue(RequestQueue):
    """Waiting queue ordered by (priority, arrival_time, insertion order)."""

    def __init__(self) -> None:
        # Unordered w.r.t. the key; the position only breaks exact key ties.
        self._requests: list[Request] = []

    # -- helpers -----------------------------------------------------------
    def _index_of_next(self) -> int:
        """Position of the request that would be served next."""
        requests = self._requests
        if not requests:
            raise IndexError("the priority request queue is empty")
        best_index = 0
        best = requests[0]
        best_key = (best.priority, best.arrival_time)
        for index in range(1, len(requests)):
            candidate = requests[index]
            key = (candidate.priority, candidate.arrival_time)
            # strict '<': on a tie the earlier position (insertion order) wins
            if key < best_key:
                best_index = index
                best_key = key
        return best_index

    # -- RequestQueue API --------------------------------------------------
    def add_request(self, request: Request) -> None:
        """Enqueue ``request`` behind every queued request with the same key."""
        self._requests.append(request)

    def pop_request(self) -> Request:
        """Remove and return the next request; ``IndexError`` when empty."""
        return self._requests.pop(self._index_of_next())

    def peek_request(self) -> Request:
        """Return the next request without removing it; ``IndexError`` when empty."""
        return self._requests[self._index_of_next()]

    def prepend_request(self, request: Request) -> None:
        """Put ``request`` back ahead of every queued request with the same key."""
        self._requests.insert(0, request)

    def remove_request(self, request: Request) -> None:
        """Remove the queued ``request`` (by identity); ``ValueError`` if absent."""
        requests = self._requests
        for index in range(len(requests)):
            if requests[index] is request:
                del requests[index]
                return
        raise ValueError(f"request {request.request_id!r} is not in the queue")

    def remove_requests(self, requests: Iterable[Request]) -> None:
        """Remove every queued request among ``requests``; others are ignored."""
        doomed = {id(request) for request in requests}
        if doomed:
            self._requests = [r for r in self._requests if id(r) not in doomed]

    def __bool__(self) -> bool:
        return len(self._requests) > 0

    def __len__(self) -> int:
        return len(self._requests)

    def __iter__(self) -> Iterator[Request]:
        """Yield the queued requests in dequeue order (the queue is unchanged)."""
        # sorted() is stable, so equal keys keep their tie order.
        ordered = sorted(self._requests, key=lambda r: (r.priority, r.arrival_time))
        return iter(ordered)
