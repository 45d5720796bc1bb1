#!/usr/bin/env bash
# Search on one task: ./run_task.sh TASK [--llm PROVIDER:MODEL] [--rounds N] [...]
# The same arguments as `pesflow run`; see README.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if command -v pesflow >/dev/null 2>&1; then
  exec pesflow run "$@"
fi
exec env PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" python3 -m agent.cli run "$@"
