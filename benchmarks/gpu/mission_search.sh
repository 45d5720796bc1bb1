#!/usr/bin/env bash
# The mission's command on the real benchmark package, on the device (issue 49's GPU "done when"):
# benchmarks/gpu/mission_search.py runs `pesflow run TASK --tasks-root /tmp/bench/tasks --llm
# openai:gpt-4o-mini --rounds ROUNDS --set evaluator.local.install_steps=skip` (no other setting)
# against the scripted engineer model on 127.0.0.1, then reads the run directory back. As one
# background run that outlives a 10-minute call: `start` in the first call, `collect` in the next,
# back to back (the machine stays warm for 30 s between calls).
#
#   start:   installs the carried wheels (.whl/: pesflow's dependencies the image lacks, for its
#            python 3.12), checks the package out of .bench/ssm-git.tgz (a git directory at the
#            pinned commit holding every tree and only this package's files, its origin the
#            official URL: the package reads as official), checks `import agent.cli` there, starts
#            the driver (setsid) and waits as collect does.
#   collect: waits until BUDGET_S is spent or the search is done, then copies into $OUT:
#            mission.md and mission.json (what the run directory says), model.json (the scripted
#            model's calls and evidence), rundir.tgz (the run directory's key files), search.log,
#            machine.txt; a search still running: partial.tgz (the same, read from the run so far).
#
#   ncu:     (one call, in the foreground) the package's reference graded once by the dev grader
#            with a profile whose share of the grading is PROFILE_SHARE (default 0.8, against the
#            default 0.15), so that the probe tries Nsight Compute inside the grading's sandbox:
#            ncu-check.json (the profile, its `how`, the replay's reason where none).
#
#   OUT=... BUDGET_S=560 [ROUNDS=3] [TASK=kfc/ssm-selective-scan-firstorder] bash benchmarks/gpu/mission_search.sh start|collect|ncu
# NO_WHEELS=1 BENCH_ROOT=DIR: a dry run here (this machine's python, the package from DIR/tasks).
set -u
OUT="${OUT:?set OUT}"
P=/tmp/persist-mission
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-560} ))
TASK="${TASK:-kfc/ssm-selective-scan-firstorder}"
verb="${1:?start, collect or ncu}"

setup() {  # the wheels, the package, the machine's facts, the code's own copy, an import check
  rm -rf "$P" && mkdir -p "$P"
  if [ -z "${NO_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      > "$P/pip.txt" 2>&1 || { echo "wheels did not install"; tail -n 5 "$P/pip.txt"; exit 1; }
  fi
  if [ -n "${BENCH_ROOT:-}" ]; then
    ROOT="$BENCH_ROOT/tasks"
  else
    rm -rf /tmp/bench && mkdir -p /tmp/bench && tar xzf .bench/ssm-git.tgz -C /tmp/bench
    git -C /tmp/bench read-tree HEAD && git -C /tmp/bench ls-files -- "tasks/$TASK" | git -C /tmp/bench checkout-index --stdin -f
    ROOT=/tmp/bench/tasks
  fi
  {
    date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "ncu: $(command -v ncu) $(ncu --version 2>/dev/null | tail -n 1)"
    echo "python: $(command -v python3) $(python3 --version 2>&1)"
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    echo "git status of the package: [$(git -C "$ROOT/.." status --porcelain -- "tasks/$TASK" 2>&1 | head -n 3)]"
    echo "files of the package: $(find "$ROOT/$TASK" -type f | wc -l)"
    python3 -m pip list 2>/dev/null | grep -iE '^(anyio|typing.extensions|httpx|h11|idna|certifi|pyyaml|rich|requests|xxhash|packaging) '
  } > "$P/machine.txt" 2>&1
  # the driver's own copy (the next call's working tree may replace this one), less a venv and runs
  rm -rf /tmp/mission-code && mkdir -p /tmp/mission-code
  tar cf - --exclude=./.venv --exclude=./traces . | tar xf - -C /tmp/mission-code
  export PYTHONPATH=/tmp/site:/tmp/mission-code
  (cd /tmp/mission-code && python3 -c "import agent.cli, openai, langgraph.graph; from tests.llm_server import ScriptedLLMServer; print('imports ok')") \
    >> "$P/machine.txt" 2>&1 || { echo "agent.cli does not import"; tail -n 15 "$P/machine.txt"; exit 1; }
}

if [ "$verb" = ncu ]; then  # in the foreground: the reference graded once, its profile given PROFILE_SHARE
  setup
  cat "$P/machine.txt"; cp "$P/machine.txt" "$OUT/"
  cd /tmp/mission-code && timeout $(( DEADLINE - $(date +%s) )) python3 benchmarks/gpu/mission_search.py --ncu-check \
    --tasks-root "$ROOT" --task "$TASK" --profile-share "${PROFILE_SHARE:-0.8}" --collect "$OUT" 2>&1 | tail -n 60
  exit 0
fi

if [ "$verb" = start ]; then
  setup
  cat > "$P/driver.sh" <<EOF
set -u
export PYTHONPATH=/tmp/site:/tmp/mission-code PYTHONUNBUFFERED=1
cd /tmp/mission-code
echo "search started \$(date +%s)" >> $P/driver.log
python3 benchmarks/gpu/mission_search.py --tasks-root $ROOT --task $TASK ${ROUNDS:+--rounds $ROUNDS} --out $P/runs \\
  --collect $P/collect --set evaluator.local.install_steps=skip > $P/search.log 2>&1
echo "search exit \$? \$(date +%s)" >> $P/driver.log
echo "driver done \$(date +%s)" >> $P/driver.log
EOF
  setsid nohup bash "$P/driver.sh" >> "$P/driver.log" 2>&1 < /dev/null &
  echo "driver started $(date +%s)" >> "$P/driver.log"
  cat "$P/machine.txt"
fi

# collect (and the rest of start's call): until the deadline or the driver's end, then what is there
until grep -qs "driver done" "$P/driver.log" || [ "$(date +%s)" -ge "$DEADLINE" ]; do sleep 5; done
for f in mission.md mission.json model.json rundir.tgz; do [ -f "$P/collect/$f" ] && cp "$P/collect/$f" "$OUT/"; done
cp "$P/search.log" "$P/machine.txt" "$OUT/" 2>/dev/null
if ! grep -qs "driver done" "$P/driver.log"; then  # still running: what the run directory says so far
  run=$(ls -d "$P"/runs/*/*/* 2>/dev/null | head -n 1)
  if [ -n "$run" ]; then
    (cd /tmp/mission-code && PYTHONPATH=/tmp/site:/tmp/mission-code python3 benchmarks/gpu/mission_search.py \
      --summarize "$run" --collect "$P/partial" > /dev/null 2>&1)
    tar czf "$OUT/partial.tgz" -C "$P" partial 2>/dev/null
    cat "$P/partial/mission.md" 2>/dev/null
  fi
  echo "search still running at $(date +%s)"
fi
grep -v '^pesflow: ' "$P/search.log" 2>/dev/null | grep -E '^(round|run:|\$|\{|pesflow run)' | tail -n 12
cat "$P/collect/mission.md" 2>/dev/null
cat "$P/driver.log"
