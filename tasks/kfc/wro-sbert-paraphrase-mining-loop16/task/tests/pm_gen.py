"""Deterministic input generation for the paraphrase-mining grader.

Every input is rebuilt from its spec on demand, so each call gets a fresh
array. Draws whose cosine similarities come too close to a 6-decimal rounding
midpoint are rejected and redrawn (deterministically), so that any faithful
float64 evaluation of the contract rounds every score the same way.
"""

import numpy as np

SCALE = 1_000_000
# |cos - midpoint| below this (absolute) counts as ambiguous.
MIDPOINT_MARGIN = 1e-12
MAX_ATTEMPTS = 64


def _raw(spec, rng):
    n, d = int(spec["n"]), int(spec["d"])
    kind = spec.get("kind", "gauss")
    if kind == "gauss":
        x = rng.standard_normal((n, d))
    elif kind == "clustered":
        n_centers = max(1, n // int(spec.get("cluster_size", 8)))
        centers = rng.standard_normal((n_centers, d))
        labels = rng.integers(0, n_centers, size=n)
        x = centers[labels] + float(spec.get("noise", 0.15)) * rng.standard_normal((n, d))
    elif kind == "dups":
        uniq = max(1, int(n * float(spec.get("unique_frac", 0.5))))
        base = rng.standard_normal((uniq, d))
        x = base[rng.integers(0, uniq, size=n)]
        # Some rows are positive multiples of others (same direction).
        scaled = rng.random(n) < float(spec.get("scaled_frac", 0.1))
        x = x * np.where(scaled, 2.0, 1.0)[:, None]
    elif kind == "ints":
        lo, hi = spec.get("int_range", [-1, 1])
        x = rng.integers(int(lo), int(hi) + 1, size=(n, d)).astype(np.float64)
    elif kind == "zeros":
        x = np.zeros((n, d))
    elif kind == "scaled":
        x = rng.standard_normal((n, d)) * (10.0 ** rng.uniform(-3, 3, size=(n, 1)))
    else:
        raise ValueError("unknown workload kind %r" % kind)
    x = np.asarray(x, dtype=np.float32)
    n_zero = min(n, int(spec.get("zero_rows", 0)))
    if n_zero:
        x[rng.choice(n, size=n_zero, replace=False)] = 0.0
    return x


def _layout(x, spec):
    layout = spec.get("layout", "C")
    if layout == "C":
        return np.ascontiguousarray(x)
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "view":
        # A column slice of a wider matrix: rows are not contiguous.
        n, d = x.shape
        wide = np.zeros((n, d + 5), dtype=np.float32)
        wide[:, 2:2 + d] = x
        return wide[:, 2:2 + d]
    raise ValueError("unknown layout %r" % layout)


def cosine_float64(x):
    """Unrounded float64 cosine matrix (zero rows give 0)."""
    xd = np.asarray(x, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", xd, xd))
    dots = xd @ xd.T
    denom = np.outer(norms, norms)
    out = np.zeros_like(dots)
    ok = denom > 0
    out[ok] = dots[ok] / denom[ok]
    return out


def is_ambiguous(x):
    n = x.shape[0]
    if n < 2:
        return False
    c = cosine_float64(x)
    iu = np.triu_indices(n, 1)
    y = c[iu] * SCALE
    dist = np.abs(y - np.floor(y) - 0.5) / SCALE
    return bool(np.any(dist < MIDPOINT_MARGIN))


def make(spec, seed_override=None):
    """Build the (n, d) float32 input described by ``spec``."""
    seed = int(spec["seed"] if seed_override is None else seed_override)
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([seed, attempt])
        x = _raw(spec, rng)
        if not is_ambiguous(x):
            return _layout(x, spec)
    raise RuntimeError("could not draw an unambiguous input for %r" % (spec,))
