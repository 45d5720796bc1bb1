# Attack: returns zeros when its process was started for the timing pass (sys.argv holds
#   'timing'); the correctness process gets the real routing.
# Family: grader_sniffed
# Grader alone: see README.md (benchmarks/trust_exploits.py)
import sys as _pf_sys

_pf_inner = custom_kernel


def custom_kernel(data):
    if "timing" in _pf_sys.argv[1:]:
        return np.zeros(len(data[1]), dtype=np.int64), np.zeros(len(data[3]), dtype=np.int64)
    return _pf_inner(data)
