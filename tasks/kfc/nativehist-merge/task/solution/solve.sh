#!/usr/bin/env bash
# Reference solution: find the merged scale first, then add every bucket once at it.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd /app/repo
git apply --whitespace=nowarn "$HERE/oracle.patch"
echo "applied oracle.patch to /app/repo"
