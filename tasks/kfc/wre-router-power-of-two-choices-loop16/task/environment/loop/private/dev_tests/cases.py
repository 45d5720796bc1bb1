"""Deterministic input generation for the p2c router grader.

A case spec is a dict from workloads.json; ``build(spec, seed)`` turns it into
``(R, candidates, initial_loads, costs)`` with int64 numpy arrays (costs may
be None). The same spec with another seed gives another input of the same
shape, which is what the timing pairs and cache probes use.
"""

import numpy as np

INT64_MAX = int(np.iinfo(np.int64).max)


def _pairs(rng, kind, R, n):
    if kind == "uniform":
        return rng.integers(0, R, size=(n, 2), dtype=np.int64)
    if kind == "distinct":
        a = rng.integers(0, R, size=n, dtype=np.int64)
        if R == 1:
            return np.stack([a, a], axis=1)
        b = (a + rng.integers(1, R, size=n, dtype=np.int64)) % R
        return np.stack([a, b], axis=1)
    if kind == "same":
        a = rng.integers(0, R, size=n, dtype=np.int64)
        return np.stack([a, a], axis=1)
    if kind == "mixed_same":
        p = rng.integers(0, R, size=(n, 2), dtype=np.int64)
        dup = rng.random(n) < 0.3
        p[dup, 1] = p[dup, 0]
        return p
    if kind == "zipf":
        w = 1.0 / np.arange(1, R + 1, dtype=np.float64) ** 1.1
        w = w[rng.permutation(R)]
        w /= w.sum()
        return rng.choice(R, size=(n, 2), p=w).astype(np.int64)
    if kind == "hot_pair":
        p = rng.integers(0, R, size=(n, 2), dtype=np.int64)
        h = rng.choice(R, size=2, replace=False)
        hot = rng.random(n) < 0.9
        flip = rng.random(n) < 0.2
        p[hot, 0] = np.where(flip[hot], h[1], h[0])
        p[hot, 1] = np.where(flip[hot], h[0], h[1])
        return p
    raise ValueError(f"unknown pair kind {kind!r}")


def _costs(rng, kind, n):
    if kind == "none":
        return None
    if kind == "ones":
        return np.ones(n, dtype=np.int64)
    if kind == "tokens":
        raw = rng.lognormal(5.5, 1.1, size=n)
        return np.clip(raw, 1, 16384).astype(np.int64)
    if kind.startswith("small:"):
        hi = int(kind.split(":", 1)[1])
        return rng.integers(0, hi + 1, size=n, dtype=np.int64)
    if kind == "huge":
        return rng.integers(2 ** 44, 2 ** 46, size=n, dtype=np.int64)
    raise ValueError(f"unknown cost kind {kind!r}")


def _loads(rng, kind, R):
    if kind == "zeros":
        return np.zeros(R, dtype=np.int64)
    if kind.startswith("equal:"):
        return np.full(R, int(kind.split(":", 1)[1]), dtype=np.int64)
    if kind.startswith("random:"):
        hi = int(kind.split(":", 1)[1])
        return rng.integers(0, hi + 1, size=R, dtype=np.int64)
    if kind == "huge":
        # large, but the total over all replicas stays below 2**62
        return rng.integers(0, 2 ** 62 // R, size=R, dtype=np.int64)
    raise ValueError(f"unknown load kind {kind!r}")


def build(spec, seed=None):
    """Return (R, candidates, initial_loads, costs) for ``spec``."""
    s = int(spec["seed"] if seed is None else seed)
    rng = np.random.default_rng(s)
    R = int(spec["R"])
    n = int(spec["n"])
    if spec.get("special") == "int64_boundary":
        # Total work lands exactly on the int64 maximum.
        cand = rng.integers(0, R, size=(n, 2), dtype=np.int64)
        loads = rng.integers(2 ** 58, 2 ** 59, size=R, dtype=np.int64)
        cost = rng.integers(2 ** 60, 2 ** 61, size=n, dtype=np.int64)
        cost[-1] = 0
        rest = INT64_MAX - (sum(loads.tolist()) + sum(cost.tolist()))
        if rest < 0:
            raise ValueError("int64_boundary spec too large")
        cost[-1] = rest
        return R, cand, loads, cost
    cand = _pairs(rng, spec.get("pairs", "uniform"), R, n)
    loads = _loads(rng, spec.get("init", "zeros"), R)
    cost = _costs(rng, spec.get("cost", "ones"), n)
    return R, np.ascontiguousarray(cand, dtype=np.int64), loads, cost


def fresh_copy(args):
    """Independent copies of an argument tuple (None stays None)."""
    R, cand, loads, cost = args
    return (R, cand.copy(), loads.copy(), None if cost is None else cost.copy())


def build_error_case(spec):
    """Arguments for one error-contract case (each must raise ValueError)."""
    kind = spec["kind"]
    rng = np.random.default_rng(int(spec.get("seed", 0)))
    R, n = 6, 40
    cand = rng.integers(0, R, size=(n, 2), dtype=np.int64)
    loads = rng.integers(0, 100, size=R, dtype=np.int64)
    cost = rng.integers(1, 50, size=n, dtype=np.int64)
    if kind == "index_equals_R":
        cand[n // 2, 1] = R
    elif kind == "negative_index":
        cand[3, 0] = -1
    elif kind == "candidates_three_columns":
        cand = rng.integers(0, R, size=(n, 3), dtype=np.int64)
    elif kind == "candidates_1d":
        cand = rng.integers(0, R, size=n, dtype=np.int64)
    elif kind == "loads_wrong_length":
        loads = rng.integers(0, 100, size=R + 1, dtype=np.int64)
    elif kind == "costs_wrong_length":
        cost = rng.integers(1, 50, size=n - 1, dtype=np.int64)
    elif kind == "negative_cost":
        cost[7] = -3
    elif kind == "negative_initial_load":
        loads[2] = -1
    elif kind == "zero_replicas":
        return (0, np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64), None)
    elif kind == "total_overflows_int64":
        loads = np.full(R, 2 ** 60, dtype=np.int64)
        cost = np.full(n, 2 ** 59, dtype=np.int64)
    elif kind == "float_candidates":
        cand = cand.astype(np.float64)
    else:
        raise ValueError(f"unknown error case {kind!r}")
    return (R, cand, loads, cost)
