#!/usr/bin/env bash
# benchmarks/screen_figures.py on the device: GPU packages' references with the screen off and
# on in turn, as one background run that outlives each 10-minute call. `start` in the first
# call (installs the carried wheels .whl/, checks the benchmark out of .bench/faibench-git.tgz
# as trust_gpu_session.sh does, starts the run), `collect` in each call after it, back to back;
# .whl and .bench are git-ignored: name them in the call's carry.
#   OUT=... BUDGET_S=540 TASKS="kfc/a kfc/b" [GRADER=hidden] [REPEATS=2] \
#     bash benchmarks/gpu/screen_figures_gpu.sh start|collect
set -u
OUT="${OUT:?set OUT}"
P=/tmp/persist-sf
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-540} ))
if [ "${1:?start or collect}" = start ]; then
  rm -rf "$P" && mkdir -p "$P"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$P/pip.txt" 2>&1 || { echo "wheels did not install"; tail -n 5 "$P/pip.txt"; exit 1; }
  rm -rf /tmp/bench && mkdir -p /tmp/bench && tar xzf .bench/faibench-git.tgz -C /tmp/bench
  git -C /tmp/bench read-tree HEAD && git -C /tmp/bench checkout-index -a -f 2> "$P/checkout.txt"
  nvidia-smi -L > "$P/machine.txt" 2>&1
  rm -rf /tmp/pesflow-code && cp -r "$PWD" /tmp/pesflow-code
  args=(); for t in ${TASKS:?set TASKS}; do args+=(--task "$t"); done
  (cd /tmp/pesflow-code && PYTHONPATH=/tmp/site:/tmp/pesflow-code PYTHONUNBUFFERED=1 setsid nohup python3 \
     benchmarks/screen_figures.py --tasks-root /tmp/bench/tasks --install-steps skip --grader "${GRADER:-hidden}" \
     --repeats "${REPEATS:-2}" --cache /tmp/cache-sf --out "$P/rows.jsonl" "${args[@]}" > "$P/run.txt" 2>&1; \
     echo "done $(date +%s)" > "$P/done") &
  sleep 2
fi
while [ ! -f "$P/done" ] && [ "$(date +%s)" -lt "$DEADLINE" ]; do sleep 5; done
cp -r "$P"/. "$OUT"/ 2>/dev/null
tail -n 30 "$P/run.txt"
[ -f "$P/done" ] && echo "RUN DONE" || echo "still running"
