#!/usr/bin/env bash
# In-session feedback loop of lh/wro-vllm-v1-priority-request-queue.
#   bash /opt/loop/submit.sh             score the live working tree (one submission)
#   bash /opt/loop/submit.sh --finalize  restore the best passing submission into the tree
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
LOOP_DIR=/opt/loop
REPO=/app/repo
STATE=/logs/loop
MANIFEST="$LOOP_DIR/private/manifest.json"
mkdir -p "$STATE/submissions"

read_manifest() { python3 -c "import json,sys; print(json.load(open('$MANIFEST')).get('$1', $2))"; }
MIN_SUB=$(read_manifest min_submissions 1)
MAX_SUB=$(read_manifest max_submissions 16)
SCOPE=$(python3 -c "import json; print(' '.join(json.load(open('$MANIFEST'))['scope']))")

finalize() {
  local out="$STATE/finalize.json"
  local count
  count=$(cat "$STATE/count" 2>/dev/null || echo 0)
  if [ ! -s "$STATE/best.json" ]; then
    python3 - "$out" "$count" "$MIN_SUB" <<'PY'
import json, sys, time
out, count, min_sub = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
json.dump({"status": "no_passing_submission", "restored_round": None, "submissions": count,
           "min_submissions": min_sub, "ts": time.time(),
           "note": "working tree left as it is"}, open(out, "w"), indent=1)
PY
    echo "finalize: no correctness-passing submission; working tree left as it is"
    return 0
  fi
  local k diff
  k=$(python3 -c "import json; print(json.load(open('$STATE/best.json'))['round'])")
  diff="$STATE/submissions/$k/candidate.diff"
  # shellcheck disable=SC2086
  git -C "$REPO" checkout -- $SCOPE
  local status=restored
  if [ -s "$diff" ]; then
    local inc=()
    for p in $SCOPE; do inc+=(--include="$p"); done
    if ! git -C "$REPO" apply "${inc[@]}" "$diff"; then
      status=apply_failed
    fi
  fi
  python3 - "$out" "$k" "$status" "$count" <<'PY'
import json, sys, time
out, k, status, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
best = json.load(open("/logs/loop/best.json"))
json.dump({"status": status, "restored_round": k, "dev_speedup": best.get("dev_speedup"),
           "submissions": count, "ts": time.time()}, open(out, "w"), indent=1)
PY
  echo "finalize: restored submission $k into the working tree ($status)"
  [ "$status" = restored ]
}

if [ "${1:-}" = "--finalize" ]; then
  finalize
  exit $?
fi

COUNT=$(cat "$STATE/count" 2>/dev/null || echo 0)
if [ "$COUNT" -ge "$MAX_SUB" ]; then
  echo "submission refused: the budget of $MAX_SUB submissions is used up; finalizing"
  finalize
  exit 2
fi

K=$((COUNT + 1))
LOOP_DEV_OUT="$STATE/dev" bash "$LOOP_DIR/score_engine.sh"
RC=$?
if [ "$RC" -eq 3 ]; then
  echo "the dev scoring harness failed; this attempt was not counted:"
  head -c 2000 "$STATE/dev/harness_error.txt" 2>/dev/null
  exit 3
fi

SUB="$STATE/submissions/$K"
mkdir -p "$SUB"
git -C "$REPO" diff --binary HEAD > "$SUB/candidate.diff"
git -C "$REPO" status --porcelain=v1 --untracked-files=all > "$SUB/status.txt"
cp "$STATE/dev/reward.json" "$SUB/verdict.json"
echo "$K" > "$STATE/count"

python3 - "$SUB/verdict.json" "$K" "$SUB/candidate.diff" <<'PY'
import hashlib, json, sys, time
verdict_path, k, diff_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
v = json.load(open(verdict_path))
ok = bool(v.get("correctness_ok")) and not v.get("hard_fail_reasons")
sp = v.get("speedup")
row = {"round": k, "ts": time.time(), "correctness_ok": bool(v.get("correctness_ok")),
       "hard_fail_reasons": v.get("hard_fail_reasons", []), "dev_speedup": sp,
       "tests": v.get("tests"),
       "diff_sha256": hashlib.sha256(open(diff_path, "rb").read()).hexdigest()}
with open("/logs/loop/state.jsonl", "a") as fh:
    fh.write(json.dumps(row) + "\n")
best_path = "/logs/loop/best.json"
try:
    best = json.load(open(best_path))
except Exception:
    best = None
if ok and sp is not None and (best is None or sp > best.get("dev_speedup", 0)):
    json.dump({"round": k, "dev_speedup": sp, "diff": diff_path, "ts": row["ts"]},
              open(best_path + ".tmp", "w"), indent=1)
    import os
    os.replace(best_path + ".tmp", best_path)
PY

python3 "$LOOP_DIR/sanitize_feedback.py" "$SUB/verdict.json" "$K" "$MAX_SUB"
if [ "$K" -ge "$MAX_SUB" ]; then
  echo "that was the last submission ($K/$MAX_SUB); finalizing"
  finalize
fi
exit 0
