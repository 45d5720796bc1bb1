# Attack: slows time.process_time a thousandfold, written through the module's namespace
#   (vars(time)[...] = ...).
# Family: timer_replaced
# Grader alone: see README.md (benchmarks/trust_exploits.py)
import time as _pf_t

_pf_real = vars(_pf_t)["process_" + "time"]
vars(_pf_t)["process_" + "time"] = lambda: _pf_real() / 1000.0
