#!/usr/bin/env bash
# Scores the live /app/repo with the dev harness.
#   exit 0: a verdict was written to $LOOP_DEV_OUT/reward.json
#   exit 3: the dev harness itself broke ($LOOP_DEV_OUT/harness_error.txt)
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
LOOP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LOOP_DEV_OUT="${LOOP_DEV_OUT:-/logs/loop/dev}"
rm -rf "$LOOP_DEV_OUT"
mkdir -p "$LOOP_DEV_OUT"
KERNELBENCH_VERIFY_MODE=candidate bash "$LOOP_DIR/private/dev_tests/test.sh" \
    >"$LOOP_DEV_OUT/engine_stdout.txt" 2>"$LOOP_DEV_OUT/engine_stderr.txt"
rc=$?
if [ "$rc" -ne 0 ] || [ ! -s "$LOOP_DEV_OUT/reward.json" ]; then
  {
    echo "dev harness failed (test.sh rc=$rc)"
    [ -f "$LOOP_DEV_OUT/harness_error.txt" ] && cat "$LOOP_DEV_OUT/harness_error.txt"
    tail -n 20 "$LOOP_DEV_OUT/engine_stderr.txt" 2>/dev/null
  } > "$LOOP_DEV_OUT/harness_error.txt.new"
  mv "$LOOP_DEV_OUT/harness_error.txt.new" "$LOOP_DEV_OUT/harness_error.txt"
  exit 3
fi
exit 0
