"""What grading through Ray costs beyond the grading itself, and how it scales with nodes.

A real local Ray cluster (ray.cluster_utils.Cluster: a head that takes no task and N worker
nodes of 1 CPU each, so each node grades one at a time) is started for N = 1, 2 and 4 in one
run, side by side. Each grades `--per-node` x N candidates of a package whose grader only
sleeps (`--sleep` seconds, then writes its reward.json), through the whole path: the
Evaluator, worker slots (workers = N), the ray backend, the node's local backend sandbox.

Printed per N: gradings per hour, their ratio to N = 1 (the goal: at least 0.9 N), and per
grading the dispatch cost (what the driver waited beyond the node's own time on the task:
submission, placement, moving the candidate and the logs) and the node's sandbox overhead
(the node's time beyond the grader's own run). The package is prepared once (shared cache).

    python3 benchmarks/ray_dispatch.py [--sleep 4] [--per-node 6] [--out benchmarks/results/ray-dispatch-DATE.txt]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluator.config import EvaluatorConfig, RayConfig  # noqa: E402
from evaluator.evaluation import Evaluator  # noqa: E402
from evaluator.parallel import grade_all  # noqa: E402

SLEEPER = """#!/usr/bin/env bash
# pesflow's dispatch benchmark: a grader that only sleeps, then says the candidate passed.
LOG="${KB_VERIFIER_OUT:-/logs/verifier}"; mkdir -p "$LOG"
sleep {sleep}
echo '{"reward": 0.0, "speedup": 1.0, "hard_fail_reasons": [], "tests": {"passed": 1, "total": 1}}' > "$LOG/reward.json"
"""


def package(root: Path, sleep: float) -> Path:
    pkg = root / "kfc" / "sleeper" / "task"
    shutil.copytree(REPO / "tests/fixtures/tasks/kfc/toy-sum/task", pkg)
    (pkg / "tests/test.sh").write_text(SLEEPER.replace("{sleep}", f"{sleep:g}"))
    return root


def run(n: int, tasks: Path, cache: Path, logs: Path, per_node: int) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    small = {"object_store_memory": 80 << 20}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **small})
    for _ in range(n):
        c.add_node(num_cpus=1, **small)
    c.wait_for_nodes()
    cfg = EvaluatorConfig(backend="ray", workers=n, ray=RayConfig(address=c.address, node_cache_dir=str(cache / "nodes"),
                                                                  ship_code=False))
    cfg.local.cache_dir = str(cache / "backend")
    cfg.trust.enabled = False  # the dispatch alone: no probes after the grader
    ev = Evaluator(cfg, tasks_roots=[tasks], log_root=logs / f"n{n}")
    try:
        ev.prepare(ev.task("kfc/sleeper"))
        # one grading per node first, so that no node's first preparation is in the timing
        warm = grade_all(lambda i: ev.evaluate("kfc/sleeper", mode="noop", grader="hidden"), range(n), n)
        assert all(v.status.value == "ok" for v in warm), [v.message for v in warm]
        count = per_node * n
        t0 = time.monotonic()
        vs = grade_all(lambda i: ev.evaluate("kfc/sleeper", mode="noop", grader="hidden"), range(count), n)
        wall = time.monotonic() - t0
    finally:
        ev.close()
        ray.shutdown()
        c.shutdown()
    bad = [v.message for v in vs if v.status.value != "ok"]
    assert not bad, bad
    nodes = [v.environment["node"] for v in vs]
    dispatch = [max(0.0, v.seconds - w["node_seconds"]) for v, w in zip(vs, nodes)]
    sandbox = [max(0.0, w["node_seconds"] - (v.grader_seconds or 0.0)) for v, w in zip(vs, nodes)]
    return {"n": n, "gradings": count, "wall": wall, "per_hour": count / wall * 3600, "nodes_used": len({w["node"] for w in nodes}),
            "dispatch": statistics.median(dispatch), "dispatch_max": max(dispatch), "sandbox": statistics.median(sandbox)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sleep", type=float, default=4.0)
    ap.add_argument("--per-node", type=int, default=6)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--out", default=str(REPO / f"benchmarks/results/ray-dispatch-{date.today().isoformat()}.txt"))
    args = ap.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    tmp = Path(tempfile.mkdtemp(prefix="pesflow-ray-bench-"))
    tasks = package(tmp / "tasks", args.sleep)
    rows = [run(n, tasks, tmp / "cache", tmp / "logs", args.per_node) for n in args.nodes]
    base = rows[0]["per_hour"] / rows[0]["n"]
    lines = [f"ray dispatch benchmark, {date.today().isoformat()}, {os.cpu_count()} CPU cores on this machine, "
             f"a grader that only sleeps {args.sleep:g} s, {args.per_node} gradings per node after one warm-up each",
             f"{'nodes':>5} {'gradings':>8} {'wall s':>7} {'per hour':>9} {'vs 1 node':>9} {'goal 0.9N':>9} "
             f"{'dispatch s (median/max)':>24} {'sandbox s':>9}"]
    for r in rows:
        ratio = r["per_hour"] / base
        lines.append(f"{r['n']:>5} {r['gradings']:>8} {r['wall']:>7.1f} {r['per_hour']:>9.0f} {ratio:>9.2f} "
                     f"{'met' if ratio >= 0.9 * r['n'] else 'MISSED':>9} {r['dispatch']:>12.3f}/{r['dispatch_max']:<11.3f} "
                     f"{r['sandbox']:>9.3f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
