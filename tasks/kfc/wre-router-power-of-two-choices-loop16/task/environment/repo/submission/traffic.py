"""Synthetic request streams for trying the router out.

Nothing in the routing path imports this module; it only produces inputs in
the shape ``route_p2c`` expects.
"""

import numpy as np


def synthetic_stream(num_replicas, num_requests, seed=0, hot_fraction=0.0,
                     unit_costs=False):
    """Return ``(R, candidates, initial_loads, costs)`` for a random stream.

    Candidates are two distinct replicas drawn uniformly (a single replica is
    offered twice when ``num_replicas == 1``). With ``hot_fraction > 0`` that
    share of requests is offered the same hot pair of replicas instead.
    Costs are token-count-like (heavy tailed, at least 1) unless
    ``unit_costs`` is set, in which case ``None`` is returned for them.
    """
    rng = np.random.default_rng(seed)
    R = int(num_replicas)
    n = int(num_requests)
    first = rng.integers(0, R, size=n, dtype=np.int64)
    if R > 1:
        second = (first + rng.integers(1, R, size=n, dtype=np.int64)) % R
    else:
        second = first.copy()
    if hot_fraction > 0.0 and R > 1:
        hot = rng.random(n) < hot_fraction
        first[hot] = 0
        second[hot] = 1
    candidates = np.stack([first, second], axis=1)
    initial_loads = rng.integers(0, 64, size=R, dtype=np.int64)
    if unit_costs:
        costs = None
    else:
        costs = np.clip(rng.lognormal(5.0, 1.0, size=n), 1, 8192).astype(np.int64)
    return R, candidates, initial_loads, costs
