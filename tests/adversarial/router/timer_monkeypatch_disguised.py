# Attack: the same, spelled so the scan cannot see it.
# Stopped by: the harness's clock was bound before the import (the patch has no effect on the
# timing), and the integrity check of the time module -> "forbidden_pattern:runtime_tampering".
import time as _t

for _n in ("perf_" + "counter", "perf_" + "counter_ns", "mono" + "tonic"):
    setattr(_t, _n, lambda *a: 0)
