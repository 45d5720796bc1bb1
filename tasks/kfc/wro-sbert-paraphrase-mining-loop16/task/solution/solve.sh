#!/usr/bin/env bash
# Reference solution: apply the vectorized rewrite onto the baseline tree.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="${1:-/app/repo}"
git -C "$REPO" checkout -- sbert_mini/util/paraphrase.py
git -C "$REPO" apply "$HERE/oracle.patch"
echo "oracle.patch applied to $REPO"
