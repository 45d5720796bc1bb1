#!/usr/bin/env bash
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
# Grader for kfc/wro-sbert-paraphrase-mining-loop16.
# Modes (KERNELBENCH_VERIFY_MODE): candidate (default) | noop | oracle | negative.
# Exit 0 whenever reward.json was written; non-zero only if the grader broke.

TESTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -f "$TESTS_DIR/DEV_COPY" ]; then
  LOG="${LOOP_DEV_OUT:-/logs/loop/dev}"
else
  LOG="${KB_VERIFIER_OUT:-/logs/verifier}"
fi
REPO=/app/repo
MODE="${KERNELBENCH_VERIFY_MODE:-candidate}"
SCOPE=(sbert_mini/util/paraphrase.py)

export PYTHONDONTWRITEBYTECODE=1
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset PYTHONSTARTUP PYTHONINSPECT PYTHONHOME

mkdir -p "$LOG" || { echo "cannot create $LOG" >&2; exit 2; }
rm -f "$LOG/reward.json" "$LOG/reward.txt" "$LOG/verifier_state.json" \
      "$LOG/correctness_results.json" "$LOG/benchmark_results.json" "$LOG/grader_error.txt"
WORK="$(mktemp -d /tmp/pm_grade.XXXXXX)" || { echo "mktemp failed" >&2; exit 2; }
trap 'rm -rf "$WORK"' EXIT

gitc() { git -c safe.directory='*' -C "$REPO" "$@"; }

PATCH_STATUS=ok
case "$MODE" in
  candidate) ;;
  noop)
    gitc checkout -- "${SCOPE[@]}" || PATCH_STATUS="scope_restore_failed" ;;
  oracle|negative)
    if [ "$MODE" = oracle ]; then PATCH="${KERNELBENCH_ORACLE_PATCH:-}"; else PATCH="${KERNELBENCH_NEGATIVE_PATCH:-}"; fi
    if ! gitc checkout -- "${SCOPE[@]}"; then
      PATCH_STATUS="scope_restore_failed"
    elif [ -z "$PATCH" ] || [ ! -f "$PATCH" ]; then
      PATCH_STATUS="patch_missing:${PATCH:-<unset>}"
    elif ! gitc apply "$PATCH"; then
      PATCH_STATUS="patch_not_applicable:$PATCH"
    fi ;;
  *)
    echo "unknown KERNELBENCH_VERIFY_MODE=$MODE" >&2; exit 2 ;;
esac

HRC=-1
if [ "$PATCH_STATUS" = ok ]; then
  if ! python3 "$TESTS_DIR/pm_gates.py" --repo "$REPO" --out "$WORK/gates.json"; then
    echo "static gates crashed" >&2; exit 2
  fi
  if python3 -c 'import json,sys; sys.exit(1 if json.load(open(sys.argv[1]))["hard_fail_reasons"] else 0)' "$WORK/gates.json"; then
    PM_HARNESS_OUT="$WORK/harness.json" PM_REPO="$REPO" PYTHONPATH="$REPO" \
      timeout -k 10 480 python3 "$TESTS_DIR/pm_harness.py" >"$WORK/harness.log" 2>&1
    HRC=$?
  fi
fi

python3 "$TESTS_DIR/compute_reward.py" --mode "$MODE" --patch-status "$PATCH_STATUS" \
  --gates "$WORK/gates.json" --harness "$WORK/harness.json" --harness-rc "$HRC" \
  --harness-log "$WORK/harness.log" --log "$LOG" --tests-dir "$TESTS_DIR"
CRC=$?
if [ -f "$LOG/reward.json" ]; then
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r.get(k) for k in ("mode","reward","speedup","hard_fail_reasons","tests","cv")}))' "$LOG/reward.json"
  exit 0
fi
echo "grader failed (compute_reward rc=$CRC)" >&2
exit 1
