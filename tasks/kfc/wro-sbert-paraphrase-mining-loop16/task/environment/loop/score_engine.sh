#!/usr/bin/env bash
# Score the live /app/repo with the dev grader. Usage: score_engine.sh [OUT_DIR]
# (default: $LOOP_DEV_OUT, else /logs/loop/dev, as the benchmark's engines do)
# Exit 0: OUT_DIR/reward.json written. Exit 3: the dev harness itself broke
# (OUT_DIR/harness_error.txt says why).
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
OUT="${1:-${LOOP_DEV_OUT:-/logs/loop/dev}}"
mkdir -p "$OUT"
ENGINE=/opt/loop/private/dev_tests/test.sh
LOOP_DEV_OUT="$OUT" KERNELBENCH_VERIFY_MODE=candidate \
  timeout -k 10 560 bash "$ENGINE" >"$OUT/engine.log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || [ ! -f "$OUT/reward.json" ]; then
  {
    echo "dev engine exit status $rc"
    [ -f "$OUT/grader_error.txt" ] && cat "$OUT/grader_error.txt"
    tail -c 2000 "$OUT/engine.log"
  } >"$OUT/harness_error.txt"
  exit 3
fi
exit 0
