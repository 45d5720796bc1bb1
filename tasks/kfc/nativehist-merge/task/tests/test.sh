#!/usr/bin/env bash
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
# Grader for kfc/nativehist-merge (sparse exponential-bucket histogram merge).
# Correctness in python (harness.py), then speed as an instruction count: the
# candidate's and the frozen baseline's merges, each run once under callgrind
# (cpu_bench.py), speedup = baseline I refs / candidate I refs.
# The same script serves the hidden lane (/tests) and the in-session dev lane
# (/opt/loop/private/dev_tests, recognised by its DEV_LANE marker file).
# Exit 0 whenever reward.json was written; non-zero only when the grader broke.

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TASK_ID="nativehist-merge"
REPO=/app/repo
BASELINE_DIR=/opt/verifier-baseline
SCOPE=("native_histogram_merge.py")

if [ -f "$HERE/DEV_LANE" ]; then
  LANE=dev
  DEFAULT_OUT="${LOOP_DEV_OUT:-/logs/loop/dev}"
else
  LANE=hidden
  DEFAULT_OUT=/logs/verifier
fi
LOG="${KB_VERIFIER_OUT:-$DEFAULT_OUT}"
MODE="${KERNELBENCH_VERIFY_MODE:-candidate}"

export PYTHONPATH="$REPO"
export PYTHONDONTWRITEBYTECODE=1

mkdir -p "$LOG" || { echo "cannot create $LOG" >&2; exit 2; }
rm -f "$LOG/reward.json" "$LOG/reward.txt" "$LOG/verifier_state.json" \
      "$LOG/correctness_results.json" "$LOG/benchmark_results.json"

# One fixed folder (the sandbox's /tmp is the grading's own): its path reaches the counted
# processes' strings, and a random name would move the count by a few instructions a run.
TMPD=/tmp/nhm-grade
rm -rf "$TMPD" && mkdir -p "$TMPD" || exit 2
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

# 1. correctness. -P: the grader's own folder is not put on sys.path, so candidate code cannot import it.
START=$SECONDS
python3 -P "$HERE/harness.py" --repo "$REPO" --baseline-dir "$BASELINE_DIR" \
  --workloads "$HERE/workloads.json" --out "$TMPD/raw.json" > "$TMPD/harness.log" 2>&1
HRC=$?

# 2. the instruction count, only when every gate so far passed
clean=0
if [ ! -s "$PREFAIL" ] && [ "$HRC" -eq 0 ] && python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r.get("stage") == "done" and not r.get("hard_fail_reasons") and not r.get("grader_error") else 1)
' "$TMPD/raw.json" 2>/dev/null; then
  clean=1
fi
if [ "$clean" = 1 ]; then
  B="$TMPD/bench"
  mkdir -p "$B"
  if ! command -v valgrind >/dev/null 2>&1; then
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); r["grader_error"] = "valgrind is not installed: the instruction count cannot be taken"
json.dump(r, open(sys.argv[1], "w"))
' "$TMPD/raw.json"
  else
    # The benchmark's inputs, built once (seeded) outside callgrind; both runs load the same file.
    python3 -P "$HERE/cpu_bench.py" prepare "$HERE/workloads.json" "$B/inputs.marshal" >> "$TMPD/harness.log" 2>&1
    # The interpreter itself, not a wrapper script: callgrind follows no exec.
    PY="$(python3 -c 'import sys; print(sys.executable)')"
    BSTART=$SECONDS
    for run in cand base; do
      if [ "$run" = cand ]; then what=candidate; dir="$REPO"; else what=baseline; dir="$BASELINE_DIR"; fi
      ( cd "$B" && PYTHONHASHSEED=0 timeout -k 5 300 valgrind --tool=callgrind --cache-sim=no --branch-sim=no \
          --log-file="$B/$run.cg.log" --callgrind-out-file="$B/$run.callgrind.out" \
          "$PY" -P "$HERE/cpu_bench.py" "$what" "$B/inputs.marshal" "$dir" "$B/$run.report" ) \
          > "$B/$run.stdout" 2> "$B/$run.stderr"
    done
    python3 "$HERE/bench_report.py" --raw "$TMPD/raw.json" --dir "$B" --seconds "$(( SECONDS - BSTART ))" \
      >> "$TMPD/harness.log" 2>&1
    mkdir -p "$LOG/bench" && cp "$B"/*.report "$B"/*.cg.log "$LOG/bench/" 2>/dev/null
  fi
fi

python3 "$HERE/compute_reward.py" --raw "$TMPD/raw.json" --prefail "$PREFAIL" \
  --log "$LOG" --mode "$MODE" --lane "$LANE" --task-id "$TASK_ID" --tests-dir "$HERE" \
  --harness-rc "$HRC" --harness-log "$TMPD/harness.log"
CRC=$?

if [ -f "$LOG/reward.json" ]; then
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("mode=%s lane=%s speedup=%s hard_fail_reasons=%s seconds=%s" % (r["mode"], r["lane"], r["speedup"], r["hard_fail_reasons"], sys.argv[2]))' \
    "$LOG/reward.json" "$(( SECONDS - START ))" 2>/dev/null
fi
if [ "$CRC" -ne 0 ] || [ ! -f "$LOG/reward.json" ]; then
  tail -c 3000 "$TMPD/harness.log" >&2 2>/dev/null
  exit 2
fi
exit 0
