#!/usr/bin/env bash
# Maintainer helper (not run by the grader): refresh the dev grader copy in
# environment/loop/private/dev_tests from this folder. The dev copy keeps its
# own workloads.json and the DEV_COPY marker.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEV="$HERE/../environment/loop/private/dev_tests"
for f in test.sh pm_gates.py pm_harness.py pm_gen.py pm_reference.py compute_reward.py; do
  cp "$HERE/$f" "$DEV/$f"
done
echo "dev_tests refreshed"
