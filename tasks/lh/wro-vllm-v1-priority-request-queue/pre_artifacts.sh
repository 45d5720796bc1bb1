#!/usr/bin/env bash
# Writes the candidate's change set (run in the container before grading).
set -uo pipefail
mkdir -p /logs/artifacts
cd /app/repo || exit 1
git add -AN
git diff HEAD > /logs/artifacts/model.patch
git diff --name-only HEAD > /logs/artifacts/model_files.txt
exit 0
