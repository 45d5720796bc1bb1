#!/usr/bin/env bash
# In-session scoring of the live /app/repo with the dev grader.
#   bash /opt/loop/submit.sh              score the working tree (counts one submission)
#   bash /opt/loop/submit.sh --finalize   put the best passing submission back into the tree
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
LOOP_DIR=/opt/loop
STATE=/logs/loop
MANIFEST="$LOOP_DIR/private/manifest.json"
REPO=/app/repo
mkdir -p "$STATE/submissions" || { echo "cannot create $STATE" >&2; exit 1; }

gitc() { git -c safe.directory='*' -C "$REPO" "$@"; }
mjson() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(" ".join(v) if isinstance(v,list) else v)' "$MANIFEST" "$1"; }

MAX="$(mjson max_submissions)" || { echo "loop manifest unreadable" >&2; exit 1; }
SCOPE_LIST="$(mjson scope)" || exit 1
# shellcheck disable=SC2206
SCOPE=($SCOPE_LIST)

if [ "${1:-}" = "--finalize" ]; then
  python3 -c '
import json, os, sys, time
state, = sys.argv[1:2]
best = os.path.join(state, "best.json")
out = {"finalized_at": time.time(), "restored_submission": None}
if os.path.exists(best):
    b = json.load(open(best))
    out["restored_submission"] = b["k"]
    out["dev_speedup"] = b.get("dev_speedup")
    out["diff"] = b["diff"]
else:
    out["reason"] = "no correctness-passing submission; working tree left as it is"
json.dump(out, open(os.path.join(state, "finalize.json.tmp"), "w"), indent=1)
print(out["diff"] if out["restored_submission"] else "")
' "$STATE" > "$STATE/.finalize_diff" || exit 1
  DIFF="$(cat "$STATE/.finalize_diff")"; rm -f "$STATE/.finalize_diff"
  if [ -n "$DIFF" ]; then
    gitc checkout -- "${SCOPE[@]}" || { echo "finalize: could not reset the scope" >&2; exit 1; }
    if [ -s "$DIFF" ] && ! gitc apply "$DIFF"; then
      echo "finalize: could not apply $DIFF" >&2; exit 1
    fi
    echo "finalize: restored the best passing submission ($DIFF)"
  else
    echo "finalize: no passing submission recorded; working tree unchanged"
  fi
  mv "$STATE/finalize.json.tmp" "$STATE/finalize.json"
  exit 0
fi

COUNT="$(cat "$STATE/count" 2>/dev/null || echo 0)"
case "$COUNT" in ''|*[!0-9]*) COUNT=0 ;; esac
if [ "$COUNT" -ge "$MAX" ]; then
  echo "submission budget used ($COUNT/$MAX); nothing was scored."
  exit 2
fi
K=$((COUNT + 1))
SUB="$STATE/submissions/$K"
rm -rf "$SUB"; mkdir -p "$SUB"
gitc diff --binary HEAD > "$SUB/candidate.diff"
gitc status --porcelain --untracked-files=all > "$SUB/status.txt"

bash "$LOOP_DIR/score_engine.sh" "$SUB/dev"
ERC=$?
if [ "$ERC" -ne 0 ]; then
  python3 -c 'import json,sys,time; open(sys.argv[1],"a").write(json.dumps({"k": int(sys.argv[2]), "ts": time.time(), "counted": False, "engine_rc": int(sys.argv[3])})+"\n")' \
    "$STATE/state.jsonl" "$K" "$ERC"
  echo "submission $K/$MAX: the dev harness failed (exit $ERC); this round was NOT counted."
  head -c 600 "$SUB/dev/harness_error.txt" 2>/dev/null
  exit 3
fi
echo "$K" > "$STATE/count"

python3 -c '
import json, os, sys, time
state, k, sub = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.load(open(os.path.join(sub, "dev", "reward.json")))
rec = {"k": k, "ts": time.time(), "counted": True,
       "correctness_ok": bool(r.get("correctness_ok")),
       "dev_speedup": r.get("speedup"), "hard_fail_reasons": r.get("hard_fail_reasons", []),
       "diff": os.path.join(sub, "candidate.diff")}
with open(os.path.join(state, "state.jsonl"), "a") as fh:
    fh.write(json.dumps(rec) + "\n")
best_path = os.path.join(state, "best.json")
best = json.load(open(best_path)) if os.path.exists(best_path) else None
sp = rec["dev_speedup"] if isinstance(rec["dev_speedup"], (int, float)) else 0.0
if rec["correctness_ok"] and (best is None or sp > (best.get("dev_speedup") or 0.0)):
    json.dump(rec, open(best_path + ".tmp", "w"), indent=1)
    os.replace(best_path + ".tmp", best_path)
' "$STATE" "$K" "$SUB" || echo "warning: could not update loop state" >&2

python3 "$LOOP_DIR/sanitize_feedback.py" "$SUB/dev/reward.json" "$K" "$MAX"
exit 0
