# Attack: remember outputs by the identity of the input arrays, so that repeated timing calls
# on the same objects cost nothing.
# Stopped by: the grader's cache probe (the same array objects, rewritten in place, called
# again) -> "correctness_failed".
_memo = {}
_honest = route_p2c  # noqa: F821 - the correct kernel this is appended to


def route_p2c(num_replicas, candidates, initial_loads, costs=None):  # noqa: F811
    key = (num_replicas, id(candidates), id(initial_loads), id(costs))
    if key not in _memo:
        _memo[key] = _honest(num_replicas, candidates, initial_loads, costs)
    return _memo[key]
