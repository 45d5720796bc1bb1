"""Independent reference model of the priority request queue contract.

Works on request INDICES and explicit keys, never on the code under test:
every queued entry is the tuple (priority, arrival_time, seq, index) kept in a
sorted Python list (bisect). ``seq`` comes from two counters: add_request
takes 0, 1, 2, ... and prepend_request takes -1, -2, -3, ... so that a prepended
request precedes every equal-key request that was added, and a later prepend
precedes an earlier one.

Trace tokens (shared with the driver's canonical form):
  ("q", i)            a request returned by pop/peek
  ("ok",)             remove_request / remove_requests returned normally
  ("n", k)            len(queue)
  ("b", flag)         bool(queue)
  ("it", (i, ...))    list(queue)
  ("E", "IndexError") / ("E", "ValueError")   the contract's errors
"""

from __future__ import annotations

from bisect import bisect_left, insort

# op codes (shared with prq_workloads)
ADD, POP, PEEK, PREPEND, REMOVE, REMOVE_MANY, LEN, BOOL, ITER = range(9)

E_INDEX = ("E", "IndexError")
E_VALUE = ("E", "ValueError")
OK = ("ok",)


class ReferenceQueue:
    def __init__(self) -> None:
        self._sorted: list[tuple] = []
        self._entry: dict[int, tuple] = {}
        self._back = 0
        self._front = -1

    def _insert(self, index: int, key: tuple, seq: int) -> None:
        if index in self._entry:
            raise RuntimeError(f"workload bug: request #{index} queued twice")
        entry = (key[0], key[1], seq, index)
        insort(self._sorted, entry)
        self._entry[index] = entry

    def add(self, index: int, key: tuple) -> None:
        self._insert(index, key, self._back)
        self._back += 1

    def prepend(self, index: int, key: tuple) -> None:
        self._insert(index, key, self._front)
        self._front -= 1

    def head(self):
        return self._sorted[0][3] if self._sorted else None

    def pop(self):
        if not self._sorted:
            return E_INDEX
        entry = self._sorted.pop(0)
        del self._entry[entry[3]]
        return ("q", entry[3])

    def peek(self):
        if not self._sorted:
            return E_INDEX
        return ("q", self._sorted[0][3])

    def contains(self, index: int) -> bool:
        return index in self._entry

    def remove(self, index: int):
        entry = self._entry.pop(index, None)
        if entry is None:
            return E_VALUE
        pos = bisect_left(self._sorted, entry)
        if self._sorted[pos] != entry:  # pragma: no cover - model invariant
            raise RuntimeError("reference model corrupted")
        del self._sorted[pos]
        return OK

    def remove_many(self, indices) -> tuple:
        for index in set(indices):
            if index in self._entry:
                self.remove(index)
        return OK

    def __len__(self) -> int:
        return len(self._sorted)

    def order(self) -> tuple:
        return tuple(entry[3] for entry in self._sorted)


def apply_op(model: ReferenceQueue, keys, op, trace: list) -> None:
    """Apply one op to the model, appending the expected trace token(s)."""
    code = op[0]
    if code == ADD:
        model.add(op[1], keys[op[1]])
    elif code == PREPEND:
        model.prepend(op[1], keys[op[1]])
    elif code == POP:
        trace.append(model.pop())
    elif code == PEEK:
        trace.append(model.peek())
    elif code == REMOVE:
        trace.append(model.remove(op[1]))
    elif code == REMOVE_MANY:
        trace.append(model.remove_many(op[1][0]))
    elif code == LEN:
        trace.append(("n", len(model)))
    elif code == BOOL:
        trace.append(("b", len(model) > 0))
    elif code == ITER:
        trace.append(("it", model.order()))
    else:  # pragma: no cover
        raise ValueError(f"unknown op code {code}")


def expected_trace(keys, ops) -> list:
    """keys[i] = (priority, arrival_time) of request i; ops = single-queue stream."""
    model = ReferenceQueue()
    trace: list = []
    for op in ops:
        apply_op(model, keys, op, trace)
    return trace


def expected_trace_multi(keys, tagged_ops, n_queues: int) -> list:
    """Several independent queues; tagged_ops items are (queue_no, op)."""
    models = [ReferenceQueue() for _ in range(n_queues)]
    trace: list = []
    for qno, op in tagged_ops:
        apply_op(models[qno], keys, op, trace)
    return trace
