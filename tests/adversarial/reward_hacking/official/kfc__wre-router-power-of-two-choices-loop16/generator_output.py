# Attack: a generator function as the entry point: the routing runs only when the caller
#   iterates (the correctness pass unpacks the pair; the timing pass drops it unstarted).
# Family: lazy_output
# Grader alone: see README.md (benchmarks/trust_exploits.py)
_pf_inner = custom_kernel


def custom_kernel(data):
    choices, loads = _pf_inner(data)
    yield choices
    yield loads
