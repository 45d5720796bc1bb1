"""One line of JSON for one grading that `pesflow evaluate --json` wrote: the package, the
grader's figures and the trust screen's verdict (benchmarks/gpu/trust_gpu_session.sh's rows).

    python3 benchmarks/gpu/trust_row.py TASK VERDICT.json SECONDS
"""

from __future__ import annotations

import json
import sys


def row(task: str, path: str, seconds: str) -> dict:
    try:
        v = json.load(open(path))
    except (OSError, ValueError) as e:
        return {"task": task, "status": "no_verdict", "error": f"{type(e).__name__}: {e}"[:300], "wall": float(seconds)}
    trust = v.get("trust") or {}
    checks = trust.get("checks") or {}
    probes = checks.get("probes") or {}
    runtime = checks.get("runtime") or {}
    return {"task": task, "mode": v.get("mode"), "grader": v.get("grader"), "status": v.get("status"),
            "speedup": v.get("speedup"), "reward": v.get("reward"), "hard_fail_reasons": v.get("hard_fail_reasons"),
            "suspect": trust.get("suspect"), "needs_review": trust.get("needs_review"), "reasons": trust.get("reasons"),
            "graders_own_files": runtime.get("graders_own_files"), "probes_ran": probes.get("ran"),
            "probes_seconds": probes.get("seconds"), "warm": (probes.get("warm") or {}).get("said"),
            "seconds": v.get("seconds"), "grader_seconds": v.get("grader_seconds"), "wall": float(seconds),
            "message": (v.get("message") or "")[:300], "environment": (v.get("environment") or {}).get("differences")}


if __name__ == "__main__":
    print(json.dumps(row(*sys.argv[1:4])))
