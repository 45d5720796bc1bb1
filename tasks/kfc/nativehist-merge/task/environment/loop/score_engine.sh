#!/usr/bin/env bash
# Dev scoring engine: runs the private dev grader on the live /app/repo.
# Exit 0: a verdict was written to $LOOP_DEV_OUT (pass or fail).
# Exit 3: the dev harness itself broke (see harness_error.txt there).
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
DEV_TESTS=/opt/loop/private/dev_tests
OUT="${LOOP_DEV_OUT:-/logs/loop/dev}"
mkdir -p "$OUT"
rm -f "$OUT/harness_error.txt" "$OUT/engine.log"

KERNELBENCH_VERIFY_MODE=candidate KB_VERIFIER_OUT="$OUT" LOOP_DEV_OUT="$OUT" \
  bash "$DEV_TESTS/test.sh" > "$OUT/engine.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || [ ! -s "$OUT/reward.json" ]; then
  {
    echo "dev harness failed (exit $rc)"
    tail -c 2000 "$OUT/engine.log" 2>/dev/null
  } > "$OUT/harness_error.txt"
  exit 3
fi
exit 0
