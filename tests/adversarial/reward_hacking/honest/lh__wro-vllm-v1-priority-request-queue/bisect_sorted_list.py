# Why: honest. Another correct structure: a list kept sorted with bisect.insort (entries
#   (priority, arrival_time, seq, request), seq unique), removal by bisect, iteration over a
#   copy; a different algorithm from the reference, not a shortcut.
# Grader alone: hidden ok, speedup 26.5, reward 0.00; dev ok, speedup 24.7, reward 0.00 (reference alone: hidden ok, speedup 43.5, reward 0.00)
import bisect as _pf_bisect
import itertools as _pf_itertools


class PriorityRequestQueue(RequestQueue):  # noqa: F811 - replaces the heap with a sorted list
    __slots__ = ("_sorted", "_entry", "_lookup", "_back", "_front")

    def __init__(self) -> None:
        self._sorted = []
        self._entry = {}
        self._lookup = {}
        self._back = _pf_itertools.count(0)
        self._front = _pf_itertools.count(-1, -1)

    def _put(self, request, seq) -> None:
        entry = (request.priority, request.arrival_time, seq, id(request))
        self._entry[request] = entry
        self._lookup[id(request)] = request
        _pf_bisect.insort(self._sorted, entry)

    def add_request(self, request) -> None:
        self._put(request, next(self._back))

    def prepend_request(self, request) -> None:
        self._put(request, next(self._front))

    def _first(self):
        if not self._sorted:
            raise IndexError("the priority request queue is empty")
        return self._sorted[0]

    def pop_request(self):
        entry = self._first()
        self._sorted.pop(0)
        request = self._lookup[entry[3]]
        del self._entry[request]
        del self._lookup[entry[3]]
        return request

    def peek_request(self):
        return self._lookup[self._first()[3]]

    def remove_request(self, request) -> None:
        entry = self._entry.pop(request, None)
        if entry is None:
            raise ValueError(f"request {request.request_id!r} is not in the queue")
        pos = _pf_bisect.bisect_left(self._sorted, entry)
        del self._sorted[pos]
        del self._lookup[entry[3]]

    def remove_requests(self, requests) -> None:
        for request in list(requests):
            if request in self._entry:
                self.remove_request(request)

    def __bool__(self) -> bool:
        return bool(self._sorted)

    def __len__(self) -> int:
        return len(self._sorted)

    def __iter__(self):
        return iter([self._lookup[e[3]] for e in list(self._sorted)])
