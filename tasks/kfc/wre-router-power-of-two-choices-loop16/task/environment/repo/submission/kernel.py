"""Power-of-two-choices request routing.

``route_p2c`` walks a stream of requests in arrival order. Request ``i`` is
offered the replicas ``candidates[i, 0]`` and ``candidates[i, 1]``; it goes to
the one whose current load is lower, or to ``candidates[i, 0]`` when the two
loads are equal. The chosen replica's load then increases by ``costs[i]``
before request ``i + 1`` is looked at, so every decision depends on all the
earlier ones.
"""

import numpy as np

from submission.contract import validate_route_inputs


def route_p2c(num_replicas, candidates, initial_loads, costs=None):
    """Route each request to the less loaded of its two candidate replicas.

    Args:
        num_replicas: number of replicas R (int >= 1).
        candidates: int64 array of shape (n, 2), replica indices in [0, R).
        initial_loads: int64 array of shape (R,), non-negative.
        costs: int64 array of shape (n,), non-negative, or None (cost 1 each).

    Returns:
        (choices, final_loads): int64 arrays of shape (n,) and (R,).

    Raises:
        ValueError: when the inputs break the contract (see contract.py).
    """
    _, cand, start_loads, cost = validate_route_inputs(
        num_replicas, candidates, initial_loads, costs
    )
    num_requests = cand.shape[0]

    loads = start_loads.copy()
    choices = np.zeros(num_requests, dtype=np.int64)

    for i in range(num_requests):
        first = int(cand[i, 0])
        second = int(cand[i, 1])
        if loads[second] < loads[first]:
            chosen = second
        else:
            chosen = first
        loads[chosen] += cost[i]
        choices[i] = chosen

    return choices, loads
