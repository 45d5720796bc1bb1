#!/usr/bin/env bash
# Quick dev timing of the live scope file against the frozen baseline, on the
# dev timing workloads (not the graded ones). Does not use a submission.
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
export PYTHONPATH=/app/repo PYTHONDONTWRITEBYTECODE=1
DEV=/opt/loop/private/dev_tests
OUT=$(mktemp -d /tmp/dev_bench.XXXXXX)
cd /app/repo || exit 1
python3 "$DEV/harness.py" --bench-only --workloads "$DEV/workloads.json" --out "$OUT/raw.json" --mode bench
rc=$?
python3 - "$OUT/raw.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for e in r.get("errors", []):
    print("ERROR:", e)
t = r.get("timing") or {}
for w in t.get("workloads", []):
    print(f"{w['name']:<28} baseline {w['baseline_ms']:9.2f} ms   candidate {w['candidate_ms']:9.3f} ms   x{w['speedup']:.2f}")
if r.get("speedup") is not None:
    print(f"dev speedup (geomean of per-workload medians): x{r['speedup']:.2f}")
else:
    print("no timing:", ", ".join(r.get("hard_fail_reasons", [])) or r.get("phase"))
PY
rm -rf "$OUT"
exit $rc
