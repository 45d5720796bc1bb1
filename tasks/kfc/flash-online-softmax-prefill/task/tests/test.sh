#!/usr/bin/env bash
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
# Grader for kfc/flash-online-softmax-prefill (causal prefill attention).
# The same script serves the hidden lane (/tests) and the in-session dev lane
# (/opt/loop/private/dev_tests, recognised by its DEV_LANE marker file).
# KERNELBENCH_DEVICE: cuda (default: correctness then GPU timing) or cpu (correctness only,
# small shapes, CPU tensors, Triton kernels in Triton's interpreter).
# Exit 0 whenever reward.json was written; non-zero only when the grader broke.

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TASK_ID="flash-online-softmax-prefill"
REPO=/app/repo
SCOPE=("attn/prefill.py")

if [ -f "$HERE/DEV_LANE" ]; then
  LANE=dev
  DEFAULT_OUT="${LOOP_DEV_OUT:-/logs/loop/dev}"
else
  LANE=hidden
  DEFAULT_OUT=/logs/verifier
fi
LOG="${KB_VERIFIER_OUT:-$DEFAULT_OUT}"
MODE="${KERNELBENCH_VERIFY_MODE:-candidate}"
DEVICE="${KERNELBENCH_DEVICE:-cuda}"
case "$DEVICE" in
  cpu) export TRITON_INTERPRET=1 ;;
  cuda) ;;
  *) echo "unknown KERNELBENCH_DEVICE=$DEVICE (use cuda or cpu)" >&2; exit 2 ;;
esac
export KERNELBENCH_DEVICE="$DEVICE"
unset CUDA_DEVICE_MAX_CONNECTIONS

export PYTHONPATH="$REPO"
export PYTHONDONTWRITEBYTECODE=1
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-/tmp/kb-triton-cache}"

mkdir -p "$LOG" || { echo "cannot create $LOG" >&2; exit 2; }
rm -f "$LOG/reward.json" "$LOG/reward.txt" "$LOG/verifier_state.json" \
      "$LOG/correctness_results.json" "$LOG/benchmark_results.json"

TMPD="$(mktemp -d /tmp/attn-grade.XXXXXX)" || exit 2
PREFAIL="$TMPD/prefail.txt"
: > "$PREFAIL"
SAVED="$TMPD/saved"

# In noop/oracle/negative modes the candidate's scope files are put back afterwards.
restore_scope() {
  if [ -d "$SAVED" ]; then
    for f in "${SCOPE[@]}"; do
      if [ -f "$SAVED/$f.absent" ]; then
        rm -f "$REPO/$f"
      elif [ -f "$SAVED/$f" ]; then
        mkdir -p "$(dirname "$REPO/$f")"
        cp -p "$SAVED/$f" "$REPO/$f"
      fi
    done
  fi
  rm -rf "$TMPD"
}
trap restore_scope EXIT

save_and_reset_scope() {
  for f in "${SCOPE[@]}"; do
    mkdir -p "$(dirname "$SAVED/$f")"
    if [ -f "$REPO/$f" ]; then cp -p "$REPO/$f" "$SAVED/$f"; else : > "$SAVED/$f.absent"; fi
  done
  git -C "$REPO" checkout -- "${SCOPE[@]}" 2>/dev/null || true
}

ORIG_PWD="$(pwd)"
apply_patch() {
  local patch="$1"
  case "$patch" in ''|/*) ;; *) patch="$ORIG_PWD/$patch" ;; esac
  if [ -z "$patch" ] || [ ! -f "$patch" ]; then
    echo "patch_apply_failed" >> "$PREFAIL"; return
  fi
  if ! git -C "$REPO" apply --whitespace=nowarn "$patch" 2> "$TMPD/apply.err"; then
    cat "$TMPD/apply.err" >&2
    echo "patch_apply_failed" >> "$PREFAIL"
  fi
}

case "$MODE" in
  candidate) ;;
  noop) save_and_reset_scope ;;
  oracle) save_and_reset_scope; apply_patch "${KERNELBENCH_ORACLE_PATCH:-}" ;;
  negative) save_and_reset_scope; apply_patch "${KERNELBENCH_NEGATIVE_PATCH:-}" ;;
  *) echo "unknown KERNELBENCH_VERIFY_MODE=$MODE" >&2; exit 2 ;;
esac

cd "$REPO" || exit 2

SCOPE_ARGS=()
for f in "${SCOPE[@]}"; do SCOPE_ARGS+=(--scope "$f"); done
python3 "$HERE/repo_gates.py" --repo "$REPO" "${SCOPE_ARGS[@]}" --out "$PREFAIL" \
  || { echo "repo gates crashed" >&2; exit 2; }

# -P: the grader's own folder is not put on sys.path, so candidate code cannot import it.
python3 -P "$HERE/harness.py" --repo "$REPO" --baseline-dir /opt/verifier-baseline \
  --workloads "$HERE/workloads.json" --prefail "$PREFAIL" --out "$TMPD/raw.json" \
  > "$TMPD/harness.log" 2>&1
HRC=$?

python3 "$HERE/compute_reward.py" --raw "$TMPD/raw.json" --prefail "$PREFAIL" \
  --log "$LOG" --mode "$MODE" --lane "$LANE" --device "$DEVICE" --task-id "$TASK_ID" --tests-dir "$HERE" \
  --harness-rc "$HRC" --harness-log "$TMPD/harness.log"
CRC=$?

if [ -f "$LOG/reward.json" ]; then
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("mode=%s lane=%s device=%s speedup=%s tests=%s/%s hard_fail_reasons=%s" % (r["mode"], r["lane"], r["device"], r["speedup"], r["tests"]["passed"], r["tests"]["total"], r["hard_fail_reasons"]))' "$LOG/reward.json" 2>/dev/null
fi
if [ "$CRC" -ne 0 ] || [ ! -f "$LOG/reward.json" ]; then
  tail -c 3000 "$TMPD/harness.log" >&2 2>/dev/null
  exit 2
fi
exit 0
