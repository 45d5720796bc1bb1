"""The probes' timed findings hold on a busy machine (issue 37): a content-keyed output cache was
called suspect five times and passed once, the run made while other gradings shared the 2-core
machine. The timing functions of inside/pesflow_probe_objects.py are driven here directly, each
while a CPU-bound process runs on every core: the caller's own time (wall time less its wait for
a CPU), the least of several rounds of each setting measured in turn, a verdict near the line
measured again. Caches are found every time; honest code (pure work, a memo of part of the work,
a joined thread pool, a child process, a reused output buffer; a class's heap, its work done in
the caller or by a worker thread) never. PESFLOW_TIMING_REPEATS=50 repeats each verdict more."""

from __future__ import annotations

import functools
import hashlib
import heapq
import importlib
import os
import pickle
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from evaluator.trust.instrument import INSIDE

REPEATS = int(os.environ.get("PESFLOW_TIMING_REPEATS", "4"))  # each verdict, again and again under the same load


@pytest.fixture(scope="module")
def probe():
    sys.path.insert(0, str(INSIDE))
    try:
        yield importlib.import_module("pesflow_probe"), importlib.import_module("pesflow_probe_objects")
    finally:
        sys.path.remove(str(INSIDE))


@pytest.fixture(scope="module")
def busy():
    """A busy loop on every core, for the module's tests; each ended by its own id after."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    time.sleep(0.3)  # running before the first measurement
    try:
        yield hogs
    finally:
        for p in hogs:
            p.kill()
            p.wait()


def helpers(p):
    return dict(p.HELPERS, loads=pickle.loads)  # as the probe gives them, a class's recording as a plain pickle


# ---------------------------------------------------------------- functions of one array
X = np.random.default_rng(0).standard_normal((48, 48))


def work(x, n=12):
    """A tenth of a millisecond or so of numpy on one core."""
    y = x
    for _ in range(n):
        y = np.tanh(y @ x.T * 0.01) + x
    return y.sum(axis=1)


_BY_VALUE, _BY_ID = {}, {}


def cache_by_content(x):
    key = (x.shape, x.dtype.str, x.tobytes())
    if key not in _BY_VALUE:
        _BY_VALUE[key] = work(x)
    return _BY_VALUE[key]


X_BIG = np.random.default_rng(1).standard_normal((128, 512))  # 512 KiB: a hit hashes all of it (about 0.35 ms)


def cache_by_hash(x):
    """The issue's case: a hit is a pass over the input, so a round of hits lasts long enough to be
    preempted; a miss about 15 times as long."""
    key = hashlib.sha256(x.tobytes()).digest()
    if key not in _BY_VALUE:
        _BY_VALUE[key] = work(x[:48, :48], 400)
    return _BY_VALUE[key]


def cache_by_id(x):
    if id(x) not in _BY_ID:
        _BY_ID[id(x)] = work(x)
    return _BY_ID[id(x)]


@functools.lru_cache(maxsize=None)
def _table(first_row: bytes):  # a pure helper worth half the work, kept by the value of a part of the input
    return work(np.frombuffer(first_row).reshape(1, -1).repeat(48, 0), 6)


def memo_of_part(x):
    return work(x, 6) + _table(x[0].tobytes())


def thread_pool(x):
    with ThreadPoolExecutor(2) as pool:  # joined before it returns
        return sum(pool.map(lambda n: work(x, n), (6, 6)))


_OUT = np.empty(48)


def reused_buffer(x):
    np.copyto(_OUT, work(x))  # the same output object every call, refilled
    return _OUT


CHILD = textwrap.dedent("""
    import sys, numpy as np
    def work(x, n=12):
        y = x
        for _ in range(n):
            y = np.tanh(y @ x.T * 0.01) + x
        return y.sum(axis=1)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        b = inp.read(48 * 48 * 8)
        if len(b) < 48 * 48 * 8:
            break
        out.write(work(np.frombuffer(b).reshape(48, 48)).tobytes())
        out.flush()
""")


@pytest.fixture(scope="module")
def child():
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        yield p
    finally:
        p.kill()
        p.wait()


def in_child(proc):
    def fn(x):  # the work done in a child process the candidate keeps
        proc.stdin.write(np.ascontiguousarray(x).tobytes())
        proc.stdin.flush()
        return np.frombuffer(proc.stdout.read(48 * 8), dtype=np.float64)
    return fn


HONEST = {"pure work": work, "memo of part of the work": memo_of_part, "joined thread pool": thread_pool,
          "reused output buffer": reused_buffer}


def _found(probe, fn, x=X):
    """One verdict of the probe's timing, every memo empty first."""
    p, objects = probe
    _BY_VALUE.clear()
    _BY_ID.clear()
    _table.cache_clear()
    return objects.cache_times(fn, (x.copy(),), {}, helpers(p))


CACHES = {"by content": (cache_by_content, X), "by id": (cache_by_id, X), "by a hash of a large input": (cache_by_hash, X_BIG)}


@pytest.mark.parametrize("name", sorted(CACHES))
def test_an_output_cache_is_found_however_busy_the_machine(probe, busy, name):
    fn, x = CACHES[name]
    for i in range(REPEATS):
        found, row = _found(probe, fn, x)
        assert found, (i, row)
        assert ("on copies" in found) == (name == "by id") and ("on new values" in found) == (name != "by id"), found
        assert row[3] >= 3, row  # a finding stands only once measured again


@pytest.mark.parametrize("name", sorted(HONEST) + ["work in a child process"])
def test_honest_code_is_never_called_cached_however_busy_the_machine(probe, busy, child, name):
    fn = HONEST.get(name) or in_child(child)
    for i in range(REPEATS):
        found, row = _found(probe, fn)
        assert found is None, (i, found, row)


def test_the_callers_own_time_leaves_out_its_wait_for_a_cpu(probe, busy):
    _, objects = probe
    if objects._waited() is None:
        pytest.skip("this kernel keeps no run delay (/proc/thread-self/schedstat)")
    spins = []
    for _ in range(5):
        m, c0 = objects.mark(), time.thread_time()
        end = c0 + 0.02
        while time.thread_time() < end:  # 20 ms of the caller's CPU, however long that takes
            pass
        spins.append((objects.own(m), time.perf_counter() - m[2]))
    # each own time is the 20 ms of work (a little more: the clocks), whatever the wall time was
    assert all(0.019 < own < 0.026 for own, _ in spins), spins
    # GPU work goes on while the caller waits for a CPU: there, wall time
    m = objects.mark()
    time.sleep(0.001)
    assert objects.own(m, gpu=True) == pytest.approx(time.perf_counter() - m[2], abs=2e-4)


def test_new_values_are_new_every_time(probe):
    p, _ = probe
    args = (np.arange(10.0).reshape(10, 1),)
    ks = p.shifts(args, 100)
    seen = {p.rolled(args, k)[0].tobytes() for k in ks} | {p.rolled(args)[0].tobytes(), args[0].tobytes()}
    assert len(ks) == 8 and len(seen) == len(ks) + 2, ks  # every shift but 0 and the one k=0 gave
    assert p.shifts(args, 3) == ks[:3] and p.shifts((np.ones(1),), 5) == [] and p.shifts((3,), 5) == []


def test_a_timed_check_is_settled_where_load_cannot_have_decided_it(probe):
    _, objects = probe
    yes = (lambda m: m[0])
    again = iter([])
    assert objects.settle([True, False], lambda: next(again), yes) == [True, False]  # undisturbed: as it is
    assert objects.settle([False, False], lambda: next(again), yes) is None
    later = iter([[True, True], [False, False]])  # under load it said yes, then undisturbed no
    assert objects.settle([True, True], lambda: next(later), yes) is None
    later = iter([[False, True], [True, True]])  # three under load: most of them decide
    assert objects.settle([True, True], lambda: next(later), yes) == [True, True]
    later = iter([[False, True], [False, True]])
    assert objects.settle([True, True], lambda: next(later), yes) is None


# ---------------------------------------------------------------- a class: steps replayed
class Req:
    def __init__(self, i, p):
        self.i, self.p = i, p


def _spin(n=3000):
    for _ in range(n):
        pass


class HeapQueue:  # honest: a heap
    def __init__(self):
        self.h = []

    def push(self, r):
        _spin()
        heapq.heappush(self.h, (r.p, r.i, r))

    def pop(self):
        _spin()
        return heapq.heappop(self.h)[2]


_POOL = ThreadPoolExecutor(1)


class PooledHeap(HeapQueue):  # honest: each step's work done by a worker thread it waits for
    def push(self, r):
        _POOL.submit(_spin).result()
        heapq.heappush(self.h, (r.p, r.i, r))


_ORDER = {}


class OrderById:  # the order worked out once, then handed back for the same request objects
    def __init__(self):
        self.items, self.out = [], None

    def push(self, r):
        _spin()
        self.items.append(r)

    def pop(self):
        if self.out is None:
            key = tuple(id(r) for r in self.items)
            if key not in _ORDER:
                _spin(60000)
                _ORDER[key] = sorted(self.items, key=lambda r: (r.p, r.i))
            self.out = list(reversed(_ORDER[key]))
        return self.out.pop()


@pytest.mark.parametrize("cls", [HeapQueue, PooledHeap, OrderById],
                         ids=["honest heap", "honest heap, work on a worker", "order kept by identity"])
def test_a_step_kept_by_identity_is_found_and_an_honest_one_is_not(probe, busy, cls):
    p, objects = probe
    reqs = [Req(i, (i * 7919) % 13) for i in range(30)]
    blob = pickle.dumps({"init": ((), {}), "calls": [("push", (r,), {}) for r in reqs] + [("pop", (), {})] * 30})
    h = helpers(p)
    for i in range(REPEATS):
        _ORDER.clear()
        outs, t_first, hist = objects.replay(cls, blob, h)
        slow, t_same, t_copy = objects.slow_steps(cls, blob, h, len(outs), hist)
        if cls is OrderById:
            assert slow and slow[0] == 30, (i, slow, t_same[28:32], t_copy[28:32])  # the first pop
        else:
            assert slow == [], (i, slow, [(t_same[j], t_copy[j]) for j in slow])
