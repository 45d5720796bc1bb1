#!/usr/bin/env bash
# One pass of a package's own workload run directly, without pesflow (no sandbox, no trust
# screen), beside a grading of trust_gpu_session.sh that is still running: where a row's
# grading runs past a device session, this tells the package's own cost from the screen's.
# It samples, every 20 s, its own Triton cache and the CPU time of the grading's processes.
#   OUT=... PKG=/tmp/bench/tasks/<bench>/<dir> PATCH=oracle.patch PASS="workload.py correctness" \
#     REPO_AT=environment/repo TESTS_AT=tests PYPATH_EXTRA=environment/wro_sitecustomize \
#     LIMIT_S=480 bash benchmarks/gpu/long_pass_alone.sh
set -u
D=/tmp/long-pass; rm -rf "$D"; mkdir -p "$D/triton"
cp -r "$PKG/$REPO_AT" "$D/repo"
(cd "$D/repo" && git apply -p1 "$PKG/$PATCH") || { echo "patch did not apply"; exit 1; }
cp -r "$PKG/$TESTS_AT" "$D/tests"
PY=$(command -v /opt/torch/.venv/bin/python3 || command -v python3)
t0=$(date +%s)
(
  cd "$D/tests" && TRITON_CACHE_DIR="$D/triton" PYTHONPATH="$PKG/${PYPATH_EXTRA:-}:$D/repo" \
    timeout "${LIMIT_S:-480}" "$PY" $PASS > "$OUT/alone.out" 2>&1
  echo "rc $? after $(( $(date +%s) - t0 )) s" >> "$OUT/alone.out"
) &
pass=$!
while kill -0 "$pass" 2>/dev/null; do
  sleep 20
  echo "$(( $(date +%s) - t0 )) s: alone's cache $(find "$D/triton" -name '*.cubin' | wc -l) cubins;" \
    "workload processes (pid, elapsed, cpu): $(ps -eo pid,etimes,times,args | grep '[w]orkload.py' | tr -s ' ' | head -3 | tr '\n' ';')" \
    >> "$OUT/samples.txt"
done
tail -n 5 "$OUT/alone.out"; tail -n 3 "$OUT/samples.txt"
