#!/usr/bin/env bash
# The trust screen's GPU work of one device session, as one background run that outlives each
# 10-minute call (a grading longer than a call included): `start` in the first call, `collect`
# in each call after it, back to back (the machine stays warm for 30 s between calls).
#
#   start:   installs the carried wheels (.whl/: pydantic, and the agent's own dependencies for
#            the search, for the machine's python), checks the benchmark out of
#            .bench/faibench-git.tgz (its .git at the pinned commit, its origin the official URL, so
#            the packages read as official), then starts the driver (setsid), which runs in turn
#              (d) the GPU cheats of benchmarks/gpu/trust_gpu.py, the reference first, under both
#                  graders, on each package of CHEAT_TASKS (one process a package, at once; only
#                  the rows of CHEAT_ONLY where it is set), then alone on the GPU
#              (a) the screen's cost in a search on SEARCH_TASK (benchmarks/trust_search_cost.py,
#                  ROUNDS rounds, SEARCH_SETTINGS: screen off and on) and in a grading on TASK
#                  (benchmarks/trust_overhead.py, SETTINGS in turn), then at once
#              (b) `pesflow tasks check` of each package of LONG, one shard a package (rows whose
#                  gradings run past one call); with LONG_FIRST=1 alone on the GPU before (a),
#              (c) the oracle of each package of REFS under the hidden grader with the screen on,
#                  SHARDS at once (`pesflow evaluate --mode oracle --json`, one line a package).
#            Everything it writes lies under /tmp/persist. Then it waits as collect does.
#            KEEP=file: finished gradings of an earlier session (a long-gradings.jsonl) seed each
#            check of (b), so its row goes on from them (a record of other code or package is unused).
#   collect: waits until BUDGET_S is spent or the driver is done, then copies what is there
#            into $OUT (a summary, the rows, one archive of the rest).
#
# NO_WHEELS=1: a dry run here, on this machine's python (pydantic installed).
#   OUT=... BUDGET_S=540 [LONG=file] [REFS=file] [SHARDS=3] [TASK=kfc/flash-online-softmax-prefill] [CHEAT_TASKS="a b"] \
#     [SETTINGS=off,warm] [REPEATS=7] [KEEP=file] [CHEAT_ONLY="reference ..."] [SEARCH_TASK=t] [ROUNDS=4] \
#     [SEARCH_SETTINGS=off,default] [LONG_FIRST=1] bash benchmarks/gpu/trust_gpu_session.sh start|collect
# Keep BUDGET_S under the call's limit_s (status: budget_left_s).
set -u
OUT="${OUT:?set OUT}"
P=/tmp/persist
DEADLINE=$(( $(date +%s) + ${BUDGET_S:-540} ))
verb="${1:?start or collect}"

if [ "$verb" = start ]; then
  rm -rf "$P" && mkdir -p "$P"
  [ -n "${NO_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > "$P/pip.txt" 2>&1 || { echo "wheels did not install"; tail -n 5 "$P/pip.txt"; exit 1; }
  rm -rf /tmp/bench && mkdir -p /tmp/bench && tar xzf .bench/faibench-git.tgz -C /tmp/bench
  # the index from HEAD, then every file it names (a blob the mirror lacks is said and left out)
  git -C /tmp/bench read-tree HEAD && git -C /tmp/bench checkout-index -a -f 2> "$P/checkout.txt"
  ls /tmp/bench/tasks/kfc | wc -l >> "$P/checkout.txt"
  nvidia-smi -L > "$P/machine.txt" 2>&1
  cp -r "$PWD" /tmp/pesflow-code  # the driver's own copy: the call's working tree may be replaced by the next call's
  [ -n "${LONG:-}" ] && cp "$LONG" "$P/long.txt"
  [ -n "${REFS:-}" ] && cp "$REFS" "$P/refs.txt"
  [ -n "${KEEP:-}" ] && cp "$KEEP" "$P/keep.jsonl"
  cat > "$P/driver.sh" <<EOF
set -u
export PYTHONPATH=/tmp/site:/tmp/pesflow-code PYTHONUNBUFFERED=1
cd /tmp/pesflow-code
SET=(--set evaluator.local.install_steps=skip)
k=0
for name in ${CHEAT_TASKS:-}; do
  # the package first: --only takes every word after it
  python3 benchmarks/gpu/trust_gpu.py "\$name" --grader both --tasks-root /tmp/bench/tasks --out $P/cheats-\$k.jsonl \\
    --cache-dir /tmp/cache-c\$k ${CHEAT_ONLY:+--only $CHEAT_ONLY} > $P/cheats-\$k.txt 2>&1 &
  k=\$((k+1))
done
wait
echo "cheats over \$(date +%s)" >> $P/driver.log
checks() {  # the rows of LONG, one shard a package, at once
  i=0
  [ -f $P/long.txt ] || return 0
  while read -r name; do
    [ -z "\$name" ] && continue
    mkdir -p $P/check-\$i
    [ -f $P/keep.jsonl ] && cp $P/keep.jsonl $P/check-\$i/gradings.jsonl
    python3 -m agent.cli tasks check "\$name" --tasks-root /tmp/bench/tasks "\${SET[@]}" \\
      --set evaluator.local.cache_dir=/tmp/cache-l\$i --out $P/check-\$i > $P/check-\$i.txt 2>&1 &
    i=\$((i+1))
  done < $P/long.txt
}
if [ -n "${LONG_FIRST:-}" ]; then  # the rows alone on the GPU, before the search
  checks; wait
  echo "checks over \$(date +%s)" >> $P/driver.log
fi
if [ -n "${SEARCH_TASK:-}" ]; then  # alone on the GPU
  python3 benchmarks/trust_search_cost.py --task "${SEARCH_TASK:-}" --tasks-root /tmp/bench/tasks --rounds ${ROUNDS:-4} \\
    --settings ${SEARCH_SETTINGS:-off,on} --verdicts $P/search-verdicts.jsonl "\${SET[@]}" > $P/search-cost.txt 2>&1
  echo "search cost over \$(date +%s)" >> $P/driver.log
fi
if [ -n "${TASK:-}" ]; then  # alone on the GPU
  python3 benchmarks/trust_overhead.py --task "${TASK:-}" --tasks-root /tmp/bench/tasks --install-steps skip \\
    --repeats ${REPEATS:-7} --settings ${SETTINGS:-off,warm} --cache-dir /tmp/cache-o > $P/overhead.txt 2>&1
  echo "overhead over \$(date +%s)" >> $P/driver.log
fi
[ -n "${LONG_FIRST:-}" ] || checks
if [ -f $P/refs.txt ]; then
  mapfile -t names < $P/refs.txt
  n=${SHARDS:-3}
  for s in \$(seq 0 \$((n - 1))); do
    (
      for j in "\${!names[@]}"; do
        [ \$((j % n)) = "\$s" ] || continue
        t0=\$(date +%s)
        python3 -m agent.cli evaluate "\${names[\$j]}" --mode oracle --grader hidden --tasks-root /tmp/bench/tasks \\
          "\${SET[@]}" --set evaluator.local.cache_dir=/tmp/cache-r\$s --json > $P/ref-\$s.json 2>> $P/ref-\$s.err
        python3 benchmarks/gpu/trust_row.py "\${names[\$j]}" $P/ref-\$s.json \$(( \$(date +%s) - t0 )) >> $P/references.jsonl
      done
    ) &
  done
fi
wait
echo "gradings over \$(date +%s)" >> $P/driver.log
echo "driver done \$(date +%s)" >> $P/driver.log
EOF
  setsid nohup bash "$P/driver.sh" >> "$P/driver.log" 2>&1 < /dev/null &
  echo "driver started $(date +%s)" >> "$P/driver.log"
fi

# collect (and the rest of start's call): until the deadline or the driver's end, then what is there
until grep -qs "driver done" "$P/driver.log" || [ "$(date +%s)" -ge "$DEADLINE" ]; do sleep 5; done
for f in references.jsonl overhead.txt search-cost.txt search-verdicts.jsonl driver.log; do [ -f "$P/$f" ] && cp "$P/$f" "$OUT/"; done
cat "$P"/cheats-*.jsonl > "$OUT/cheats.jsonl" 2>/dev/null
cat "$P"/check-*/results.jsonl > "$OUT/long-results.jsonl" 2>/dev/null
cat "$P"/check-*/gradings.jsonl > "$OUT/long-gradings.jsonl" 2>/dev/null
tar czf "$OUT/rest.tgz" -C "$P" --exclude='*.json' . 2>/dev/null
echo "references: $(wc -l < "$P/references.jsonl" 2>/dev/null || echo 0) of $(wc -l < "$P/refs.txt" 2>/dev/null || echo 0);" \
  "suspect: $(grep -c '"suspect": true' "$P/references.jsonl" 2>/dev/null)"
grep -hv '^pesflow: ' "$P"/cheats-*.txt 2>/dev/null | tail -n 40
tail -n 3 "$P"/check-*.txt 2>/dev/null | grep -v '^pesflow: '
grep -v '^pesflow: ' "$P/overhead.txt" 2>/dev/null | tail -n 12
grep -v '^pesflow: ' "$P/search-cost.txt" 2>/dev/null | tail -n 8
cat "$P/driver.log"
