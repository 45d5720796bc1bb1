"""Seeded inputs of the native-histogram merge grader (stdlib only).

Every builder is deterministic in its spec and seed, so the correctness pass,
the callgrind benchmark of the candidate and that of the frozen baseline all
see the same histograms. Kept short: cpu_bench.py compiles this file inside
the counted process. The hand-made edge cases are in edge_cases.py.
"""

import random


def _histogram(rng, scale, center, width, nbuckets, zero_entries=0.0):
    """One sparse histogram: about `nbuckets` populated buckets scattered around
    log2(value) = center (+- width), at `scale`. Cheap on purpose (one C-level
    random() per draw): the benchmark's own work is counted with the merge's."""
    rand = rng.random
    unit = 2.0 ** scale
    mid = int(center * unit)
    half = max(2 * nbuckets, int(width * unit))
    buckets = {}
    for _ in range(nbuckets):
        # insertion order is random, as it is for a real collector's map
        buckets[mid + int((2.0 * rand() - 1.0) * half)] = 0 if rand() < zero_entries else 1 + int(rand() * 400)
    zero_count = int(rand() * 31)
    return {
        "scale": scale,
        "zero_count": zero_count,
        "count": zero_count + sum(buckets.values()),
        "sum": int(rand() * 1e9),
        "buckets": buckets,
    }


def pool(spec, seed):
    """A list of histograms drawn as `spec` says (keys: size, scales, buckets,
    center, width, zero_entries)."""
    rng = random.Random(seed)
    rand = rng.random
    lo_s, hi_s = spec["scales"]
    lo_b, hi_b = spec["buckets"]
    lo_c, hi_c = spec["center"]
    lo_w, hi_w = spec["width"]
    out = []
    for _ in range(spec["size"]):
        out.append(_histogram(
            rng,
            lo_s + int(rand() * (hi_s - lo_s + 1)),
            lo_c + rand() * (hi_c - lo_c),
            lo_w + rand() * (hi_w - lo_w),
            lo_b + int(rand() * (hi_b - lo_b + 1)),
            zero_entries=spec.get("zero_entries", 0.0),
        ))
    return out


def copy_hist(hist):
    """A fresh copy: new dicts, same int objects (the grader keeps its own copy)."""
    out = dict(hist)
    out["buckets"] = dict(hist["buckets"])
    return out


def copy_all(hists):
    return [copy_hist(h) for h in hists]


def merges(spec):
    """The (histograms, max_buckets) calls of a benchmark workload: `rounds`
    merges, each of `per_merge` histograms picked from a seeded pool, every
    call on freshly copied dicts."""
    base = pool(spec, spec["seed"])
    rng = random.Random(spec["seed"] * 7919 + 1)
    calls = []
    for _ in range(spec["rounds"]):
        calls.append((rng.sample(base, spec["per_merge"]), spec["max_buckets"]))
    return calls


def random_cases(seed, count):
    """Random small merges across the whole contract (mixed scales, zero
    entries, negative indices, tight max_buckets)."""
    rng = random.Random(seed)
    out = []
    for k in range(count):
        spec = {
            "size": rng.randint(1, 12),
            "scales": sorted((rng.randint(-4, 12), rng.randint(-4, 12))),
            "buckets": (0, rng.randint(1, 60)),
            "center": (-6.0, 12.0),
            "width": (0.05, 6.0),
            "zero_entries": rng.choice((0.0, 0.0, 0.1)),
        }
        hists = pool(spec, seed * 1000 + k)
        out.append(("random_%d" % k, hists, rng.choice((2, 3, 8, 40, 160, 1000))))
    return out
