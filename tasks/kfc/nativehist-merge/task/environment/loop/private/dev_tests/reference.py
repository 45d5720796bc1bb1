"""Independent reference for the native-histogram merge (grader side only).

It does not accumulate: the final scale is searched for directly, from the
populated buckets of all inputs at once (floor division by a power of two,
not shifts), and every bucket is then counted once at that scale. One-by-one
accumulation only ever lowers its scale and never widens the span of the
buckets it holds when it does, so both end at the highest scale, at or below
every input's, where the populated buckets span at most max_buckets indices.
"""


def reference_merge(histograms, max_buckets):
    start = min(h["scale"] for h in histograms)
    points = []
    for h in histograms:
        for index, n in h["buckets"].items():
            if n > 0:
                points.append((h["scale"], index))
    scale = start
    while points:
        mapped = [index // 2 ** (s - scale) for s, index in points]
        if max(mapped) - min(mapped) + 1 <= max_buckets:
            break
        scale -= 1
    totals = {}
    for h in histograms:
        step = 2 ** (h["scale"] - scale)
        for index, n in h["buckets"].items():
            if n > 0:
                key = index // step
                totals[key] = totals.get(key, 0) + n
    return {
        "scale": scale,
        "zero_count": sum(h["zero_count"] for h in histograms),
        "count": sum(h["count"] for h in histograms),
        "sum": sum(h["sum"] for h in histograms),
        "buckets": [(index, totals[index]) for index in sorted(totals)],
    }


def one_by_one(histograms, max_buckets):
    """A literal transcription of the contract's accumulation, for self-checks."""
    scale = histograms[0]["scale"]
    acc = {}
    zero = count = total = 0
    for h in histograms:
        if h["scale"] < scale:
            step = 2 ** (scale - h["scale"])
            moved = {}
            for index, n in acc.items():
                moved[index // step] = moved.get(index // step, 0) + n
            acc, scale = moved, h["scale"]
        zero += h["zero_count"]
        count += h["count"]
        total += h["sum"]
        for index in sorted(h["buckets"]):
            n = h["buckets"][index]
            if n == 0:
                continue
            key = index // 2 ** (h["scale"] - scale)
            acc[key] = acc.get(key, 0) + n
            while max(acc) - min(acc) + 1 > max_buckets:
                moved = {}
                for i, c in acc.items():
                    moved[i // 2] = moved.get(i // 2, 0) + c
                acc, scale = moved, scale - 1
    return {"scale": scale, "zero_count": zero, "count": count, "sum": total,
            "buckets": [(i, acc[i]) for i in sorted(acc)]}
