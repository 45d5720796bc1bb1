"""Runs gradings as whoever runs it (the as-user tests: tests/rootless_user.py drops to an ordinary
user first) and prints their verdicts as one JSON line: many gradings in one process, one prepare.

    python3 tests/rootless_driver.py '{"tasks_root": ..., "local": {...}, "evals": [{"task": ..., "mode": ...}]}'
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.config import EvaluatorConfig, LocalConfig  # noqa: E402
from evaluator.evaluation import CandidateSource, Evaluator  # noqa: E402


def main() -> None:
    spec = json.loads(sys.argv[1])
    cfg = EvaluatorConfig(local=LocalConfig(**spec.get("local", {})), timeout_sec=spec.get("timeout_sec"))
    logs = Path(spec.get("logs") or Path.home() / "pesflow-logs")
    ev = Evaluator(cfg, tasks_roots=[Path(spec["tasks_root"])], log_root=logs)
    out = []
    try:
        for e in spec["evals"]:
            cand = CandidateSource(files=e["files"]) if "files" in e else None
            start = time.monotonic()
            v = ev.evaluate(e["task"], candidate=cand, mode=e.get("mode", "candidate") if cand is None else "candidate",
                            grader=e.get("grader", "hidden"), device=e.get("device"))
            limits = Path(v.log_dir or "") / "limits.json"
            out.append({"status": v.status.value, "reward": v.reward, "speedup": v.speedup, "message": v.message,
                        "hard_fail_reasons": v.hard_fail_reasons, "environment": v.environment,
                        "probe": (v.raw or {}).get("probe"), "seconds": time.monotonic() - start,
                        "grader_seconds": v.grader_seconds, "tests": [v.tests.passed, v.tests.total] if v.tests else None,
                        "limits": json.loads(limits.read_text()) if limits.is_file() else None, "euid": os.geteuid(),
                        "trust": v.model_dump(mode="json").get("trust")})
    finally:
        ev.close()
    print("@@result " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
