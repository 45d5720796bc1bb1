"""Merge many sparse exponential-bucket ("native") histograms into one.

A histogram here is the exponential kind that OpenTelemetry and Prometheus
ship: at *scale* ``s`` the bucket base is ``b = 2 ** (2 ** -s)`` and bucket
``i`` (a signed integer) holds the observations in ``(b ** i, b ** (i + 1)]``.
Lowering the scale by one joins each pair of buckets ``2k`` and ``2k + 1``
into bucket ``k`` of the coarser scale, so an index ``i`` at scale ``s`` is
index ``i >> d`` at scale ``s - d`` (floor division by ``2 ** d``, for
negative indices too).

Data model (plain dicts, every number a Python ``int``, never a ``bool``)::

    {
        "scale": s,            # SCALE_MIN <= s <= SCALE_MAX
        "zero_count": z,       # >= 0, observations in the zero bucket
        "count": c,            # == z + sum of the bucket counts
        "sum": t,              # sum of the observed values, in integer units
        "buckets": {i: n},     # sparse: bucket index -> count (>= 0)
    }

Other keys of an input dict are ignored. ``merge_histograms`` returns the same
shape, except that ``"buckets"`` is a list of ``(index, count)`` tuples sorted
by index, holding only the positive counts.

The merge is defined as one-by-one accumulation (what a collector does when
series arrive one at a time): start an empty accumulator at the first
histogram's scale; for each histogram in order, first lower the accumulator to
that histogram's scale if it is coarser, add its zero count, count and sum,
then add its non-zero buckets one at a time in ascending index order, and
after every single bucket lower the accumulator's scale one step at a time
while its populated buckets span more than ``max_buckets`` indices
(``max_index - min_index + 1 > max_buckets``).
"""

SCALE_MIN = -10
SCALE_MAX = 20
DEFAULT_MAX_BUCKETS = 160

_FIELDS = ("scale", "zero_count", "count", "sum", "buckets")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def validate_histogram(hist):
    """Raise ValueError unless ``hist`` is a well-formed sparse histogram."""
    if not isinstance(hist, dict):
        raise ValueError("a histogram must be a dict, got %s" % type(hist).__name__)
    for field in _FIELDS:
        if field not in hist:
            raise ValueError("histogram is missing %r" % field)
    scale = hist["scale"]
    if not _is_int(scale) or scale < SCALE_MIN or scale > SCALE_MAX:
        raise ValueError("scale must be an int in [%d, %d], got %r" % (SCALE_MIN, SCALE_MAX, scale))
    zero_count = hist["zero_count"]
    if not _is_int(zero_count) or zero_count < 0:
        raise ValueError("zero_count must be a non-negative int, got %r" % (zero_count,))
    count = hist["count"]
    if not _is_int(count) or count < 0:
        raise ValueError("count must be a non-negative int, got %r" % (count,))
    if not _is_int(hist["sum"]):
        raise ValueError("sum must be an int, got %r" % (hist["sum"],))
    buckets = hist["buckets"]
    if not isinstance(buckets, dict):
        raise ValueError("buckets must be a dict of index -> count")
    total = zero_count
    for index, n in buckets.items():
        if not _is_int(index):
            raise ValueError("bucket index must be an int, got %r" % (index,))
        if not _is_int(n) or n < 0:
            raise ValueError("bucket %d has an invalid count %r" % (index, n))
        total += n
    if total != count:
        raise ValueError("count %d != zero_count + bucket counts (%d)" % (count, total))


def lower_index(index, steps):
    """The index that bucket ``index`` has ``steps`` scales coarser."""
    for _ in range(steps):
        index >>= 1  # one scale down: buckets 2k and 2k + 1 become bucket k
    return index


class _Accumulator:
    """The running merge: a scale, the three totals and a sparse bucket map."""

    def __init__(self, scale, max_buckets):
        self.scale = scale
        self.max_buckets = max_buckets
        self.zero_count = 0
        self.count = 0
        self.sum = 0
        self.buckets = {}
        self.lowest = None
        self.highest = None

    def downscale(self, steps):
        """Lower the scale by ``steps``, joining buckets that fall together."""
        if steps <= 0:
            return
        joined = {}
        for index in sorted(self.buckets):
            target = lower_index(index, steps)
            joined[target] = joined.get(target, 0) + self.buckets[index]
        self.buckets = joined
        self.scale -= steps
        if self.lowest is not None:
            self.lowest = lower_index(self.lowest, steps)
            self.highest = lower_index(self.highest, steps)

    def add_totals(self, hist):
        if hist["scale"] < self.scale:
            self.downscale(self.scale - hist["scale"])
        self.zero_count += hist["zero_count"]
        self.count += hist["count"]
        self.sum += hist["sum"]

    def add_bucket(self, index, scale, n):
        """Add ``n`` observations of bucket ``index`` (given at ``scale``)."""
        target = lower_index(index, scale - self.scale)
        self.buckets[target] = self.buckets.get(target, 0) + n
        if self.lowest is None or target < self.lowest:
            self.lowest = target
        if self.highest is None or target > self.highest:
            self.highest = target
        self.normalise()

    def normalise(self):
        while self.lowest is not None and self.highest - self.lowest + 1 > self.max_buckets:
            self.downscale(1)

    def result(self):
        return {
            "scale": self.scale,
            "zero_count": self.zero_count,
            "count": self.count,
            "sum": self.sum,
            "buckets": [(index, self.buckets[index]) for index in sorted(self.buckets)],
        }


def merge_histograms(histograms, max_buckets=DEFAULT_MAX_BUCKETS):
    """Merge a non-empty list (or tuple) of histograms; see the module docstring.

    Raises ValueError for an empty or non-list/tuple ``histograms``, a
    ``max_buckets`` that is not an int >= 2, or any malformed histogram. The
    inputs are never modified.
    """
    if not isinstance(histograms, (list, tuple)):
        raise ValueError("histograms must be a list or a tuple")
    if not histograms:
        raise ValueError("nothing to merge")
    if not _is_int(max_buckets) or max_buckets < 2:
        raise ValueError("max_buckets must be an int >= 2, got %r" % (max_buckets,))
    for hist in histograms:
        validate_histogram(hist)

    acc = _Accumulator(histograms[0]["scale"], max_buckets)
    for hist in histograms:
        acc.add_totals(hist)
        scale = hist["scale"]
        buckets = hist["buckets"]
        for index in sorted(buckets):
            n = buckets[index]
            if n == 0:
                continue
            acc.add_bucket(index, scale, n)
    return acc.result()
