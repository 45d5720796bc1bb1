"""Input checking for the power-of-two-choices router.

``validate_route_inputs`` turns the public arguments of ``route_p2c`` into a
normalised form (a Python ``int`` replica count and C-contiguous ``int64``
arrays) or raises ``ValueError`` describing the first problem it finds.
All checks are vectorised, so their cost is small next to the routing loop.
"""

import numpy as np

INT64_MAX = int(np.iinfo(np.int64).max)

# Below this float estimate of the grand total the exact check is skipped:
# the float sum of non-negative int64 values is far too accurate to be off
# by a factor of two.
_EXACT_CHECK_FROM = float(2 ** 62)


def _as_int64_array(value, name):
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must have an integer dtype, got {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > INT64_MAX:
        raise ValueError(f"{name} holds values that do not fit in int64")
    return np.ascontiguousarray(arr, dtype=np.int64)


def validate_route_inputs(num_replicas, candidates, initial_loads, costs=None):
    """Check and normalise the arguments of ``route_p2c``.

    Returns ``(R, candidates, initial_loads, costs)`` where ``R`` is a Python
    int, ``candidates`` is an int64 array of shape (n, 2), ``initial_loads``
    an int64 array of shape (R,) and ``costs`` an int64 array of shape (n,)
    (all ones when ``costs`` is None). The returned arrays may be the very
    objects that were passed in; callers must not write into them.
    """
    if isinstance(num_replicas, (bool, np.bool_)) or not isinstance(
        num_replicas, (int, np.integer)
    ):
        raise ValueError("num_replicas must be an integer")
    num_replicas = int(num_replicas)
    if num_replicas < 1:
        raise ValueError("num_replicas must be >= 1")

    cand = _as_int64_array(candidates, "candidates")
    if cand.ndim != 2 or cand.shape[1] != 2:
        raise ValueError(f"candidates must have shape (n, 2), got {cand.shape}")
    n = cand.shape[0]

    loads = _as_int64_array(initial_loads, "initial_loads")
    if loads.shape != (num_replicas,):
        raise ValueError(
            f"initial_loads must have shape ({num_replicas},), got {loads.shape}"
        )

    if costs is None:
        cost = np.ones(n, dtype=np.int64)
    else:
        cost = _as_int64_array(costs, "costs")
        if cost.shape != (n,):
            raise ValueError(f"costs must have shape ({n},), got {cost.shape}")

    if n:
        if int(cand.min()) < 0 or int(cand.max()) >= num_replicas:
            raise ValueError(f"candidate replica index outside [0, {num_replicas})")
        if int(cost.min()) < 0:
            raise ValueError("costs must be non-negative")
    if int(loads.min()) < 0:
        raise ValueError("initial_loads must be non-negative")

    estimate = float(loads.sum(dtype=np.float64)) + float(cost.sum(dtype=np.float64))
    if estimate >= _EXACT_CHECK_FROM:
        total = sum(loads.tolist()) + sum(cost.tolist())
        if total > INT64_MAX:
            raise ValueError("sum of initial_loads and costs does not fit in int64")

    return num_replicas, cand, loads, cost
