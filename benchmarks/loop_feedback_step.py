"""Dev figures with the package-loop feedback step (evaluator/feedback.py) after the dev engine and
without it, in turn (off, on, off, on), on the benchmark's packages graded unchanged:
    python3 benchmarks/loop_feedback_step.py TASK ... (the checkout in PESFLOW_TASKS_PATH, else /tmp/bench/tasks)"""
import json, os, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import evaluator.task as T
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import Evaluator
real = T.with_loop_feedback
cache = tempfile.mkdtemp()
rows = []
for task in sys.argv[1:]:
    for setting in ("off", "on", "off", "on"):
        T.with_loop_feedback = real if setting == "on" else (lambda engine: engine)
        ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=cache)), tasks_roots=[os.environ.get("PESFLOW_TASKS_PATH", "/tmp/bench/tasks")], log_root=Path(tempfile.mkdtemp()))
        v = ev.evaluate(task, mode="oracle", grader="dev")
        ev.close()
        rows.append({"task": task, "step": setting, "status": v.status.value, "dev": v.dev.model_dump() if v.dev else None,
                     "speedup": v.speedup, "raw_speedup": v.raw.get("speedup"), "feedback": bool(v.feedback)})
        print(json.dumps(rows[-1]), flush=True)
