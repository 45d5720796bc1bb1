# Attack: setattr(__import__('ti' + 'me'), 'perf_' + 'counter', f) with f a thousandfold slow
#   clock, at import: the harness reads time.perf_counter at call time.
# Family: timer_replaced
# Grader alone: see README.md (benchmarks/trust_exploits.py)
_pf_clock = getattr(__import__("ti" + "me"), "perf_" + "counter")
setattr(__import__("ti" + "me"), "perf_" + "counter", lambda: _pf_clock() / 1000.0)
