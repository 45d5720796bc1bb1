# Attack: return the frozen baseline's answer (imported from the copy the harness loaded).
# Stopped by: the scan -> "forbidden_pattern:imports_frozen_baseline".
from _p2c_frozen_baseline import route_p2c  # noqa: F401,F811
