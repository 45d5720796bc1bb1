"""The worker both sandbox-cost benchmarks start (root_overhead.py: two trees; rootless_overhead.py:
root against an ordinary user): N noop gradings of one package through the hidden grader in a
fresh interpreter, printed as JSON [[wall, wall - grader], ...].

    python3 -c "$WORKER" CACHE TASKS_ROOT TASK N LOGS [SANDBOX]   (SANDBOX: root|rootless, checked)
"""

WORKER = r"""
import json, sys, time
from pathlib import Path
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import Evaluator
cache, roots, task, n, logs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=cache, install_steps="skip")), tasks_roots=[roots], log_root=Path(logs))
t = ev.task(task)
ev.prepare(t)
out = []
for _ in range(n):
    v = ev.evaluate(t, mode="noop", grader="hidden")
    assert v.status.value in ("ok", "hard_fail"), v.message
    if len(sys.argv) > 6:
        assert v.environment["sandbox"] == sys.argv[6], v.environment
    out.append([round(v.seconds, 4), round(v.seconds - (v.grader_seconds or 0.0), 4)])
print(json.dumps(out))
"""
