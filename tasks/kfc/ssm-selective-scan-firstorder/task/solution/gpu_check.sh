#!/usr/bin/env bash
# Reviewer's check on a bare GPU machine (no container engine, no pesflow needed).
# Lays out what the image holds by hand -- /app/repo with its single baseline commit,
# /opt/verifier-baseline, the anchor manifest, and /opt/kernelbench-venv/bin/python3
# running this machine's python3 (which must have torch and triton) -- then grades
# noop, the oracle RUNS times and the negative with tests/test.sh, printing each
# reward.json as one JSON line. Run as root; it replaces /app/repo and /opt/verifier-baseline.
#   bash solution/gpu_check.sh [RUNS]          (KERNELBENCH_DEVICE=cpu for the CPU path)
set -uo pipefail
PKG="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${1:-5}"
SCOPE_FILE="state_space_scan.py"
PY="${KB_PYTHON:-$(command -v python3)}"
command -v git >/dev/null || { echo '{"error": "git is not installed on this machine"}'; exit 2; }
[ -n "$PY" ] || { echo '{"error": "no python3 on PATH"}'; exit 2; }
"$PY" -c 'import torch, triton' || { echo '{"error": "python3 here lacks torch or triton"}'; exit 2; }

rm -rf /app/repo /opt/verifier-baseline /logs/verifier
mkdir -p /app/repo /opt/verifier-baseline /opt/kernelbench-venv/bin /logs/verifier
cp -r "$PKG/environment/repo/." /app/repo/
git config --global --add safe.directory /app/repo
( cd /app/repo && git init -q && git config core.fileMode false \
  && printf '__pycache__/\n*.pyc\n' >> .gitignore && git add -A \
  && git -c user.email=baseline@pesflow.local -c user.name=pesflow commit -qm baseline ) || exit 2
cp "/app/repo/$SCOPE_FILE" "/opt/verifier-baseline/$SCOPE_FILE" && chmod 0444 "/opt/verifier-baseline/$SCOPE_FILE"
cp "$PKG/environment/verifier-correctness-manifest.json" /opt/verifier-correctness-manifest.json
printf '#!/bin/sh\nexec %s "$@"\n' "$PY" > /opt/kernelbench-venv/bin/python3
chmod 0755 /opt/kernelbench-venv/bin/python3
ln -sf python3 /opt/kernelbench-venv/bin/python

grade() {  # grade MODE RUN
  local log="/tmp/gpu_check_$1_$2.log"
  ( cd /app/repo && KERNELBENCH_VERIFY_MODE="$1" \
      KERNELBENCH_ORACLE_PATCH="$PKG/solution/oracle.patch" \
      KERNELBENCH_NEGATIVE_PATCH="$PKG/solution/negative.patch" \
      bash "$PKG/tests/test.sh" > "$log" 2>&1 )
  local rc=$?
  "$PY" -c 'import json, sys
try:
    r = json.load(open("/logs/verifier/reward.json"))
except Exception as e:
    r = {"error": "no reward.json: %s" % e, "log_tail": open(sys.argv[3]).read()[-1500:]}
print(json.dumps({"check": sys.argv[1], "run": int(sys.argv[2]), "test_sh_rc": int(sys.argv[4]), "reward_json": r}))' \
    "$1" "$2" "$log" "$rc"
}

grade noop 1
for i in $(seq 1 "$RUNS"); do grade oracle "$i"; done
grade negative 1
