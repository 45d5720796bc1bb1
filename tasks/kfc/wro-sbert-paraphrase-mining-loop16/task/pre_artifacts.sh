#!/usr/bin/env bash
# Record the candidate's change to /app/repo as a patch plus a list of paths.
set -uo pipefail
OUT=/logs/artifacts
mkdir -p "$OUT"
cd /app/repo || exit 1
git -c safe.directory='*' add -AN
git -c safe.directory='*' diff HEAD --binary > "$OUT/model.patch"
git -c safe.directory='*' diff HEAD --name-only > "$OUT/model_files.txt"
echo "wrote $OUT/model.patch ($(wc -l < "$OUT/model_files.txt") changed paths)"
