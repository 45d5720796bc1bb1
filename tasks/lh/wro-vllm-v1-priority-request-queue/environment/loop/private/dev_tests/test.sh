#!/usr/bin/env bash
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
# Dev engine (same gates, its own workloads) of lh/wro-vllm-v1-priority-request-queue.
#   KERNELBENCH_VERIFY_MODE = candidate (default) | noop | oracle | negative
#   KERNELBENCH_ORACLE_PATCH / KERNELBENCH_NEGATIVE_PATCH = patch paths
#   LOOP_DEV_OUT = output folder (default below)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROFILE=dev
LOG="${LOOP_DEV_OUT:-/logs/loop/dev}"
REPO=/app/repo
SCOPE=(vllm/v1/core/sched/wro_priority_request_queue.py)
MODE="${KERNELBENCH_VERIFY_MODE:-candidate}"
HARNESS_TIMEOUT="${KB_HARNESS_TIMEOUT:-420}"

mkdir -p "$LOG" || { echo "cannot create $LOG" >&2; exit 2; }
rm -f "$LOG"/reward.json "$LOG"/reward.txt "$LOG"/verifier_state.json \
      "$LOG"/correctness_results.json "$LOG"/benchmark_results.json \
      "$LOG"/harness_error.txt "$LOG"/raw_results.json
export PYTHONPATH="$REPO" PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# byte-code caches found in the working tree are never used
PYCACHE_DIR="$(mktemp -d /tmp/prq_pycache.XXXXXX)"
export PYTHONPYCACHEPREFIX="$PYCACHE_DIR"
trap 'rm -rf "$PYCACHE_DIR"' EXIT
git() { command git -c safe.directory='*' "$@"; }
cd "$REPO" || { echo "no $REPO" >&2; exit 2; }

PATCH_FAILED=""
apply_mode_patch() {
  local patch="$1"
  git -C "$REPO" checkout -- "${SCOPE[@]}" 2>/dev/null
  if [ -z "$patch" ] || [ ! -f "$patch" ] || ! git -C "$REPO" apply "$patch" 2>"$LOG/patch_apply.err"; then
    PATCH_FAILED="${patch:-<unset>}"
  fi
}
case "$MODE" in
  candidate) ;;
  noop) git -C "$REPO" checkout -- "${SCOPE[@]}" ;;
  oracle) apply_mode_patch "${KERNELBENCH_ORACLE_PATCH:-}" ;;
  negative) apply_mode_patch "${KERNELBENCH_NEGATIVE_PATCH:-}" ;;
  *) echo "unknown KERNELBENCH_VERIFY_MODE=$MODE" >&2; exit 2 ;;
esac

RC=0
if [ -z "$PATCH_FAILED" ]; then
  timeout -k 10 "$HARNESS_TIMEOUT" python3 "$HERE/harness.py" \
      --workloads "$HERE/workloads.json" --out "$LOG/raw_results.json" --mode "$MODE" \
      >"$LOG/harness_stdout.txt" 2>"$LOG/harness_stderr.txt"
  RC=$?
fi

python3 "$HERE/compute_reward.py" --raw "$LOG/raw_results.json" --log "$LOG" \
    --mode "$MODE" --profile "$PROFILE" --tests-dir "$HERE" \
    --harness-rc "$RC" --patch-failed "$PATCH_FAILED"
CR=$?
if [ -f "$LOG/reward.json" ] && [ "$CR" -eq 0 ]; then
  exit 0
fi
echo "grader error (harness rc=$RC, compute_reward rc=$CR); see $LOG/harness_stderr.txt" >&2
tail -n 20 "$LOG/harness_stderr.txt" >&2 2>/dev/null
exit 3
