#!/usr/bin/env bash
# Submit the current /app/repo working tree for in-session dev scoring.
#   bash /opt/loop/submit.sh             score the live tree (counts against the budget)
#   bash /opt/loop/submit.sh --finalize  put the best scored round back into the tree
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
LOOP=/opt/loop
STATE=/logs/loop
REPO=/app/repo
MANIFEST="$LOOP/private/manifest.json"
mkdir -p "$STATE/submissions"

read -r MIN_SUB MAX_SUB < <(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(int(m.get("min_submissions",1)), int(m.get("max_submissions",1)))' "$MANIFEST") \
  || { echo "submit: cannot read the loop manifest" >&2; exit 3; }
mapfile -t SCOPE < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["scope"]))' "$MANIFEST")

if [ "${1:-}" = "--finalize" ]; then
  python3 "$LOOP/private/loop_state.py" finalize "$STATE" "$REPO" "${SCOPE[@]}"
  exit $?
fi

COUNT="$(cat "$STATE/count" 2>/dev/null || echo 0)"
case "$COUNT" in ''|*[!0-9]*) COUNT=0 ;; esac
if [ "$COUNT" -ge "$MAX_SUB" ]; then
  echo "submission refused: the budget of $MAX_SUB submission(s) is used up ($COUNT made)."
  exit 1
fi
K=$(( COUNT + 1 ))
echo "$K" > "$STATE/count"

SUB="$STATE/submissions/$K"
mkdir -p "$SUB"
git -C "$REPO" diff --binary HEAD > "$SUB/candidate.diff" 2> "$SUB/diff.err"
git -C "$REPO" status --porcelain --untracked-files=all > "$SUB/status.txt" 2>/dev/null

DEV_OUT="$STATE/dev"
LOOP_DEV_OUT="$DEV_OUT" bash "$LOOP/score_engine.sh"
ERC=$?
mkdir -p "$SUB/dev"
for f in reward.json correctness_results.json benchmark_results.json verifier_state.json harness_error.txt; do
  [ -f "$DEV_OUT/$f" ] && cp "$DEV_OUT/$f" "$SUB/dev/$f"
done

python3 "$LOOP/private/loop_state.py" record "$K" "$STATE" "$DEV_OUT" "$SUB/candidate.diff" "$ERC" >/dev/null
python3 "$LOOP/sanitize_feedback.py"  # reads /logs/loop (its count, dev/)

if [ "$ERC" -eq 3 ]; then
  # The dev grader itself broke: this round is not charged to the budget.
  echo "$COUNT" > "$STATE/count"
  echo "the dev grader failed on its own side; this round was not counted (${COUNT}/${MAX_SUB} used)."
  exit 3
fi
if [ "$K" -ge "$MAX_SUB" ]; then
  echo "this was the last allowed submission; recording it as final."
  python3 "$LOOP/private/loop_state.py" finalize "$STATE" "$REPO" "${SCOPE[@]}" >/dev/null 2>&1 || true
fi
exit 0
