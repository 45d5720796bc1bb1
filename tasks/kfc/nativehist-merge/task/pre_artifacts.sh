#!/usr/bin/env bash
# Record the candidate's change set before grading.
set -uo pipefail
mkdir -p /logs/artifacts
cd /app/repo || exit 0
git add -AN >/dev/null 2>&1 || true
git diff HEAD > /logs/artifacts/model.patch 2>/dev/null || true
git diff HEAD --name-only > /logs/artifacts/model_files.txt 2>/dev/null || true
exit 0
