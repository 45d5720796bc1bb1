#!/usr/bin/env bash
# Applies the reference (oracle) rewrite of the scope file to /app/repo.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd /app/repo
git checkout -- vllm/v1/core/sched/wro_priority_request_queue.py
git apply "$HERE/oracle.patch"
git diff --stat
