# Attack: wraps time.process_time (functools.wraps keeps its name) in a thousandfold slow
#   clock; the harness reads it at call time.
# Family: timer_replaced
# Grader alone: see README.md (benchmarks/trust_exploits.py)
import functools as _pf_functools
import time as _pf_time

_pf_real = _pf_time.process_time


@_pf_functools.wraps(_pf_real)
def _pf_slow():
    return _pf_real() / 1000.0


_pf_time.process_time = _pf_slow
