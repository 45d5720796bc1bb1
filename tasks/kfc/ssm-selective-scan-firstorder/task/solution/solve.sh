#!/usr/bin/env bash
# Reference solution: apply the chunked Triton scan to the working tree.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd /app/repo
git apply --whitespace=nowarn "$HERE/oracle.patch"
echo "applied oracle.patch to /app/repo"
