#!/usr/bin/env bash
# Quick dev timing of the live scope file against the frozen baseline copy.
# It does not check correctness and does not count as a submission; use
# `bash /opt/loop/submit.sh` for the scored run.
set -uo pipefail
export PATH=/opt/kernelbench-venv/bin:/usr/local/bin:/usr/bin:/bin
export PYTHONPATH=/app/repo PYTHONDONTWRITEBYTECODE=1
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cd /app/repo || exit 1
exec python3 "$(dirname "${BASH_SOURCE[0]}")/dev_bench.py" "$@"
