"""Deterministic op-stream generator and the replay driver.

A workload is (specs, ops):
  specs[i] = (request_id, priority, arrival_time) of request i
  ops      = list of tuples (code, arg) with the codes of prq_reference.

The generator keeps its own ReferenceQueue while it generates, so that it can
aim operations (remove the current head, prepend the request just popped, ...)
and never adds a request that is already queued (the contract forbids it).
"""

from __future__ import annotations

import math
import random

import prq_reference as ref
from prq_reference import (ADD, BOOL, ITER, LEN, PEEK, POP, PREPEND, REMOVE,
                           REMOVE_MANY)

OP_NAMES = {ADD: "add_request", POP: "pop_request", PEEK: "peek_request",
            PREPEND: "prepend_request", REMOVE: "remove_request",
            REMOVE_MANY: "remove_requests", LEN: "len", BOOL: "bool",
            ITER: "iter"}


# --------------------------------------------------------------------------
# key samplers
# --------------------------------------------------------------------------
def _sampler(spec: dict, rng: random.Random, what: str):
    kind = spec["kind"]
    if kind == "const":
        value = spec["value"]
        return lambda: value
    if kind == "choice":
        values = spec["values"]
        weights = spec.get("weights")
        if weights:
            return lambda: rng.choices(values, weights)[0]
        return lambda: values[rng.randrange(len(values))]
    if kind == "randint":
        lo, hi = spec["lo"], spec["hi"]
        return lambda: rng.randint(lo, hi)
    if kind == "uniform":
        lo, hi = spec["lo"], spec["hi"]
        return lambda: rng.uniform(lo, hi)
    if kind == "clock":
        # monotone timestamps with exact ties (several requests per tick),
        # optionally with backwards jitter (clients' clocks disagree)
        state = {"t": float(spec.get("start", 1.7e9))}
        gap = float(spec.get("mean_gap", 0.001))
        p_tie = float(spec.get("p_tie", 0.0))
        jitter = float(spec.get("jitter", 0.0))

        def clock():
            if rng.random() >= p_tie:
                state["t"] += rng.expovariate(1.0 / gap)
            t = state["t"]
            if jitter and rng.random() < 0.5:
                t -= rng.uniform(0.0, jitter)
            return t
        return clock
    if kind == "ulp":
        base = float(spec["base"])
        span = int(spec.get("span", 3))
        table = {}
        for k in range(-span, span + 1):
            v = base
            step = math.inf if k > 0 else -math.inf
            for _ in range(abs(k)):
                v = math.nextafter(v, step)
            table[k] = v
        return lambda: table[rng.randint(-span, span)]
    if kind == "mix":
        parts = [_sampler(p, rng, what) for p in spec["parts"]]
        weights = spec.get("weights") or [1] * len(parts)
        return lambda: rng.choices(parts, weights)[0]()
    raise ValueError(f"unknown {what} sampler kind {kind!r}")


class _Ids:
    def __init__(self, style: str, rng: random.Random) -> None:
        self.style = style
        self.rng = rng
        self.seen = set()

    def make(self, index: int) -> str:
        if self.style == "seq":
            return f"req-{index}"
        if self.style == "desc":  # lexicographically DEcreasing with index
            return f"req-{10**9 - index}"
        while True:  # "random"
            rid = "cmpl-%012x" % self.rng.getrandbits(48)
            if rid not in self.seen:
                self.seen.add(rid)
                return rid


# --------------------------------------------------------------------------
# generator
# --------------------------------------------------------------------------
class _Gen:
    def __init__(self, spec: dict, seed: int, key_seed=None) -> None:
        self.rng = random.Random(seed)
        krng = random.Random(seed * 7919 + 17 if key_seed is None else key_seed)
        self.new_priority = _sampler(spec["priority"], krng, "priority")
        self.new_arrival = _sampler(spec["arrival"], krng, "arrival")
        self.ids = _Ids(spec.get("ids", "random"), krng)
        self.specs: list = []
        self.ops: list = []
        self.model = ref.ReferenceQueue()
        self.keys: list = []
        self.queued: list = []          # indices queued (random access)
        self.pos: dict = {}             # index -> position in self.queued
        self.out_pool: list = []        # once queued, not queued now
        self.out_set: set = set()
        self.last_out = None
        self.kmax = int(spec.get("kmax", 8))

    # bookkeeping -----------------------------------------------------------
    def _new_request(self) -> int:
        index = len(self.specs)
        prio, arr = self.new_priority(), self.new_arrival()
        self.specs.append((self.ids.make(index), prio, arr))
        self.keys.append((prio, arr))
        return index

    def _enter(self, index: int) -> None:
        if index in self.out_set:
            self.out_set.discard(index)
            self.out_pool.remove(index)
        self.pos[index] = len(self.queued)
        self.queued.append(index)

    def _leave(self, index: int) -> None:
        p = self.pos.pop(index)
        last = self.queued.pop()
        if last != index:
            self.queued[p] = last
            self.pos[last] = p
        self.out_pool.append(index)
        self.out_set.add(index)
        self.last_out = index

    def _emit(self, op) -> None:
        self.ops.append(op)
        code = op[0]
        if code == ADD:
            self.model.add(op[1], self.keys[op[1]])
            self._enter(op[1])
        elif code == PREPEND:
            self.model.prepend(op[1], self.keys[op[1]])
            self._enter(op[1])
        elif code == POP:
            out = self.model.pop()
            if out[0] == "q":
                self._leave(out[1])
        elif code == REMOVE:
            if self.model.contains(op[1]):
                self.model.remove(op[1])
                self._leave(op[1])
        elif code == REMOVE_MANY:
            for index in set(op[1][0]):
                if self.model.contains(index):
                    self.model.remove(index)
                    self._leave(index)

    def _absent(self) -> int:
        if self.out_pool and self.rng.random() < 0.7:
            return self.out_pool[self.rng.randrange(len(self.out_pool))]
        return self._new_request()  # never queued at all

    # one op ------------------------------------------------------------------
    def step(self, kind: str, spec_phase: dict) -> None:
        rng = self.rng
        if kind == "add":
            self._emit((ADD, self._new_request()))
        elif kind == "readd":
            if self.out_pool:
                self._emit((ADD, self.out_pool[rng.randrange(len(self.out_pool))]))
            else:
                self._emit((ADD, self._new_request()))
        elif kind == "prepend":
            if self.last_out is not None and self.last_out in self.out_set and rng.random() < 0.7:
                self._emit((PREPEND, self.last_out))
            elif self.out_pool:
                self._emit((PREPEND, self.out_pool[rng.randrange(len(self.out_pool))]))
            else:
                self._emit((PREPEND, self._new_request()))
        elif kind == "pop":
            self._emit((POP, None))
        elif kind == "peek":
            self._emit((PEEK, None))
        elif kind == "remove":
            if self.queued:
                self._emit((REMOVE, self.queued[rng.randrange(len(self.queued))]))
            else:
                self._emit((REMOVE, self._absent()))
        elif kind == "remove_head":
            head = self.model.head()
            self._emit((REMOVE, head if head is not None else self._absent()))
        elif kind == "remove_absent":
            self._emit((REMOVE, self._absent()))
        elif kind == "remove_many":
            kmax = int(spec_phase.get("kmax", self.kmax))
            chosen = []
            if self.queued:
                k = min(len(self.queued), rng.randint(0, kmax))
                chosen = rng.sample(self.queued, k)
            for _ in range(rng.randint(0, 2)):
                chosen.append(self._absent())
            if chosen and rng.random() < 0.3:
                chosen.append(chosen[rng.randrange(len(chosen))])  # duplicate
            rng.shuffle(chosen)
            self._emit((REMOVE_MANY, (tuple(chosen), rng.random() < 0.5)))
        elif kind == "remove_all_many":
            chosen = list(self.queued)
            rng.shuffle(chosen)
            self._emit((REMOVE_MANY, (tuple(chosen), rng.random() < 0.5)))
        elif kind == "len":
            self._emit((LEN, None))
        elif kind == "bool":
            self._emit((BOOL, None))
        elif kind == "iter":
            self._emit((ITER, None))
        else:
            raise ValueError(f"unknown op kind {kind!r}")

    def phase(self, ph: dict) -> None:
        kinds = list(ph["w"].keys())
        weights = [ph["w"][k] for k in kinds]
        n = ph["n"]
        if n == "drain":
            guard = 0
            while self.queued:
                self.step(self.rng.choices(kinds, weights)[0], ph)
                guard += 1
                if guard > 10_000_000:  # pragma: no cover
                    raise RuntimeError("drain phase does not terminate")
            return
        for _ in range(int(n)):
            self.step(self.rng.choices(kinds, weights)[0], ph)


_SCRIPT_CODES = {"add": ADD, "prepend": PREPEND, "pop": POP, "peek": PEEK,
                 "remove": REMOVE, "remove_many": REMOVE_MANY, "remove_many_gen": REMOVE_MANY,
                 "len": LEN, "bool": BOOL, "iter": ITER}


def _scripted(spec: dict):
    names = list(spec["requests"].keys())
    index_of = {name: i for i, name in enumerate(names)}
    specs = [(f"req-{name}", p, a) for name, (p, a) in spec["requests"].items()]
    ops = []
    for line in spec["script"]:
        word, *args = line.split()
        code = _SCRIPT_CODES[word]
        if code in (ADD, PREPEND, REMOVE):
            ops.append((code, index_of[args[0]]))
        elif code == REMOVE_MANY:
            ops.append((code, (tuple(index_of[a] for a in args), word.endswith("_gen"))))
        else:
            ops.append((code, None))
    return specs, ops


def generate(spec: dict, key_seed=None):
    """Return (specs, ops) for one workload spec (deterministic)."""
    if "script" in spec:
        return _scripted(spec)
    gen = _Gen(spec, int(spec["seed"]), key_seed)
    for ph in spec["phases"]:
        gen.phase(ph)
    return gen.specs, gen.ops


def rekey(spec: dict, n: int, key_seed: int) -> list:
    """Fresh (priority, arrival) keys for n requests, same distribution as spec."""
    krng = random.Random(key_seed)
    new_priority = _sampler(spec["priority"], krng, "priority")
    new_arrival = _sampler(spec["arrival"], krng, "arrival")
    return [(new_priority(), new_arrival()) for _ in range(n)]


def keys_of(specs) -> list:
    return [(p, a) for _, p, a in specs]


# --------------------------------------------------------------------------
# replay driver (identical for the baseline and the candidate)
# --------------------------------------------------------------------------
class _Raised:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


_OK = object()
_E_INDEX = _Raised("IndexError")
_E_VALUE = _Raised("ValueError")


def build_requests(request_cls, specs) -> list:
    return [request_cls(rid, arrival_time=arr, priority=prio) for rid, prio, arr in specs]


def run_stream(queue_cls, reqs, ops) -> list:
    """Replay ops on a fresh queue; return the raw outputs."""
    q = queue_cls()
    out = []
    push = out.append
    for op in ops:
        code = op[0]
        try:
            if code == 0:
                q.add_request(reqs[op[1]])
            elif code == 1:
                push(q.pop_request())
            elif code == 2:
                push(q.peek_request())
            elif code == 3:
                q.prepend_request(reqs[op[1]])
            elif code == 4:
                q.remove_request(reqs[op[1]])
                push(_OK)
            elif code == 5:
                chosen, as_generator = op[1]
                batch = [reqs[i] for i in chosen]
                if as_generator:
                    q.remove_requests(r for r in batch)
                else:
                    q.remove_requests(batch)
                push(_OK)
            elif code == 6:
                push(len(q))
            elif code == 7:
                push(bool(q))
            else:
                push(list(q))
        except IndexError:
            push(_E_INDEX)
        except ValueError:
            push(_E_VALUE)
        except Exception as exc:  # noqa: BLE001 - recorded, compared, reported
            push(_Raised(type(exc).__name__))
    return out


def run_multi(queue_cls, reqs, tagged_ops, n_queues: int) -> list:
    """Several live queue instances of one class, driven interleaved."""
    queues = [queue_cls() for _ in range(n_queues)]
    out = []
    for qno, op in tagged_ops:
        chosen = queues[qno]
        out.extend(run_stream(lambda: chosen, reqs, [op]))
    return out


def canonical(raw, reqs, request_cls) -> list:
    """Turn raw outputs into trace tokens comparable with the reference."""
    index_of = {id(r): i for i, r in enumerate(reqs)}

    def one_request(item):
        i = index_of.get(id(item))
        if i is not None and reqs[i] is item:
            return i
        return "foreign:" + repr(item)[:60]

    out = []
    for item in raw:
        if item is _OK:
            out.append(ref.OK)
        elif type(item) is _Raised:
            out.append(("E", item.name))
        elif isinstance(item, request_cls):
            i = one_request(item)
            out.append(("q", i) if isinstance(i, int) else ("foreign", i))
        elif type(item) is bool:
            out.append(("b", item))
        elif type(item) is int:
            out.append(("n", item))
        elif type(item) is list:
            out.append(("it", tuple(one_request(x) if isinstance(x, request_cls)
                                    else "not-a-request:" + type(x).__name__
                                    for x in item)))
        else:
            out.append(("bad-return", type(item).__name__))
    return out


def describe(token, specs) -> str:
    """Human-readable form of one trace token (request ids, not indices)."""
    if token is None:
        return "<nothing>"
    tag = token[0]
    if tag == "q":
        return f"request {specs[token[1]][0]!r}"
    if tag == "it":
        shown = [specs[i][0] if isinstance(i, int) else str(i) for i in token[1][:6]]
        more = "" if len(token[1]) <= 6 else f", ... ({len(token[1])} total)"
        return "[" + ", ".join(shown) + more + "]"
    if tag == "E":
        return f"raised {token[1]}"
    if tag == "ok":
        return "returned normally"
    if tag == "n":
        return f"len {token[1]}"
    if tag == "b":
        return f"bool {token[1]}"
    return repr(token)[:80]


def first_mismatch(got: list, want: list, ops, specs, tagged=False):
    """Return a short text for the first differing token, or None if equal."""
    if got == want:
        return None
    # locate the op that produced the first differing token
    n = min(len(got), len(want))
    k = next((i for i in range(n) if got[i] != want[i]), n)
    # map token number k back to an op number
    seen = -1
    op_no = None
    for j, op in enumerate(ops):
        code = (op[1] if tagged else op)[0]
        if code not in (ADD, PREPEND):
            seen += 1
            if seen == k:
                op_no = j
                break
    op = None if op_no is None else (ops[op_no][1] if tagged else ops[op_no])
    where = f"op #{op_no} ({OP_NAMES[op[0]]})" if op is not None else f"output #{k}"
    g = got[k] if k < len(got) else None
    w = want[k] if k < len(want) else None
    return (f"{where}: expected {describe(w, specs)}, got {describe(g, specs)}"
            f" (output {k} of {len(want)} expected, {len(got)} produced)")
