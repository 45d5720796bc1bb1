"""What the sandbox's root costs per grading: this tree against another commit, side by side.

Each side grades the same package (default: the toy fixture, whose grader runs well under a
second, so that pesflow's own per-grading work dominates) with the local backend and the
hidden grader, warm (prepared once, before timing). Per grading, overhead = the evaluation's
wall time minus the grader's own run (timed inside the sandbox). The two sides alternate in
rounds (A B A B ...), each in its own process with its own cache, so that load on the machine
falls on both alike; the medians and their difference are printed.

    python3 benchmarks/root_overhead.py --against 2e97cc1 [--rounds 6] [--per-round 5] [--task kfc/toy-sum]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.noop_worker import WORKER  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "tasks"


def side(tree: Path, cache: Path, args: argparse.Namespace, logs: Path) -> list[float]:
    r = subprocess.run([sys.executable, "-c", WORKER, str(cache), str(args.tasks_root), args.task, str(args.per_round), str(logs)],
                       cwd=tree, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(tree), "HOME": "/root"},
                       capture_output=True, text=True, check=True)
    return [over for _, over in json.loads(r.stdout.strip().splitlines()[-1])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True, help="the git commit to compare with (e.g. the one before a change)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--per-round", type=int, default=5)
    ap.add_argument("--task", default="kfc/toy-sum")
    ap.add_argument("--tasks-root", default=str(FIXTURES))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pesflow-rootbench-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old), args.against],
                       check=True, capture_output=True)
        try:
            trees = {"this tree": REPO, args.against: old}
            got: dict[str, list[float]] = {k: [] for k in trees}
            for r in range(args.rounds):
                for name, tree in (list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]):
                    got[name] += side(tree, Path(tmp) / f"cache-{tree.name}", args, Path(tmp) / "logs")
            print(f"{args.task}: pesflow's overhead per grading (wall - grader), {args.rounds * args.per_round} gradings each")
            for name, xs in got.items():
                print(f"  {name:12} median {statistics.median(xs):.3f} s  (min {min(xs):.3f}, max {max(xs):.3f})")
            a, b = (statistics.median(got[k]) for k in trees)
            print(f"  difference  {a - b:+.3f} s per grading (this tree minus {args.against})")
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], capture_output=True)


if __name__ == "__main__":
    main()
