"""What the rootless sandbox costs per grading against root's, side by side in one run.

Run as root: it makes an ordinary user (tests/rootless_user.py: a home, a venv of the system
python there, a copy of this tree) and grades the same package (default: the toy fixture,
whose grader runs well under a second, so that pesflow's own per-grading work dominates) with
the local backend and the hidden grader, as root and as that user (a user namespace), each
warm (prepared once, before timing) and in its own process with its own cache. Per grading,
overhead = the evaluation's wall time minus the grader's own run (timed inside the sandbox).
The sides alternate in rounds (root, user, root, user ...) so that load on the machine falls on
both alike; medians, their difference and the goal (at most 0.2 s more) are printed, and the
figures are written to benchmarks/results/rootless-overhead-<date>.txt.

    python3 benchmarks/rootless_overhead.py [--rounds 6] [--per-round 5] [--task kfc/toy-sum]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.noop_worker import WORKER  # noqa: E402
from tests import rootless_user as ru  # noqa: E402

GOAL_SEC = 0.2


def side_root(args: argparse.Namespace, tmp: Path) -> list[list[float]]:
    argv = [sys.executable, "-c", WORKER, str(tmp / "root-cache"), str(REPO / "tests/fixtures/tasks"), args.task,
            str(args.per_round), str(tmp / "root-logs"), "root"]
    r = subprocess.run(argv, cwd=REPO, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(REPO), "HOME": "/root"},
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"the root side failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def side_user(user: ru.User, args: argparse.Namespace) -> list[list[float]]:
    argv = [user.python, "-c", WORKER, str(user.home / ".cache/pesflow-bench"), str(user.tree / "tests/fixtures/tasks"),
            args.task, str(args.per_round), str(user.home / "bench-logs"), "rootless"]
    r = ru.run_as(user, argv)
    if r.returncode:
        raise SystemExit(f"the rootless side failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--per-round", type=int, default=5)
    ap.add_argument("--task", default="kfc/toy-sum")
    args = ap.parse_args()
    why = ru.usable()
    if why:
        raise SystemExit(f"rootless_overhead: {why}")
    user = ru.make()
    got: dict[str, list[list[float]]] = {"root": [], "rootless": []}
    with tempfile.TemporaryDirectory(prefix="pesflow-rootlessbench-") as tmp:
        for k in range(args.rounds):
            got["root"] += side_root(args, Path(tmp))
            got["rootless"] += side_user(user, args)
            print(f"round {k + 1}/{args.rounds} done", file=sys.stderr)
    lines = [f"rootless vs root sandbox, cost per grading ({args.task}, hidden grader, warm, "
             f"{args.rounds} rounds x {args.per_round} gradings per side, alternating)",
             f"date {datetime.now(timezone.utc).isoformat(timespec='seconds')}, host {platform.node()}, "
             f"kernel {platform.release()}, {os.cpu_count()} cpus",
             f"{'side':<10} {'wall median s':>14} {'overhead median s':>18} {'overhead p90 s':>15}"]
    med = {}
    for name, rows in got.items():
        wall = [w for w, _ in rows]
        over = sorted(o for _, o in rows)
        med[name] = statistics.median(over)
        lines.append(f"{name:<10} {statistics.median(wall):>14.3f} {med[name]:>18.3f} {over[int(0.9 * (len(over) - 1))]:>15.3f}")
    diff = med["rootless"] - med["root"]
    lines.append(f"rootless - root: {diff:+.3f} s per grading (goal: at most +{GOAL_SEC:.1f} s): "
                 f"{'met' if diff <= GOAL_SEC else 'NOT met'}")
    text = "\n".join(lines)
    print(text)
    out = REPO / "benchmarks/results" / f"rootless-overhead-{datetime.now(timezone.utc):%Y-%m-%d}.txt"
    out.write_text(text + "\n\nraw [wall, overhead] per grading:\n" + json.dumps(got) + "\n")
    print(f"written to {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
