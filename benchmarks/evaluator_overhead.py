"""What grading costs beyond the grader's own run, per bundled task, on this machine.

For each task: preparing once (cold, from an empty cache), then N warm gradings of the
noop candidate with the hidden grader. Per candidate it splits the wall time into the
grader's own run (timed inside the sandbox) and pesflow's overhead (everything else:
namespaces, layers, applying the candidate, copying logs). It also prints how many
candidates an hour that gives, warm, against preparing before each one.

    python3 benchmarks/evaluator_overhead.py [--repeats 5] [--tasks kfc/... ...] [--install-steps auto|skip]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.grader import Evaluator

BUNDLED = [
    "kfc/wre-router-power-of-two-choices-loop16",
    "kfc/wro-sbert-paraphrase-mining-loop16",
    "lh/wro-vllm-v1-priority-request-queue",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tasks", nargs="*", default=BUNDLED)
    ap.add_argument("--install-steps", default="auto", choices=["auto", "skip", "require"])
    ap.add_argument("--grader", default="hidden", choices=["dev", "hidden"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pesflow-bench-") as tmp:
        cfg = EvaluatorConfig(local=LocalConfig(cache_dir=str(Path(tmp) / "cache"), install_steps=args.install_steps))
        ev = Evaluator(cfg, log_root=Path(tmp) / "logs")
        print(f"{'task':45} {'prepare s':>9} {'grader s':>9} {'overhead s':>10} {'warm/h':>7} {'cold/h':>7} {'ratio':>6}")
        for name in args.tasks:
            task = ev.task(name)
            t0 = time.monotonic()
            prepared = ev.prepare(task)
            prepare_s = time.monotonic() - t0
            assert not prepared.cached
            walls, graders = [], []
            for _ in range(args.repeats):
                v = ev.evaluate(task, mode="noop", grader=args.grader)
                if v.grader_seconds is None:
                    raise SystemExit(f"{name}: {v.status.value}: {v.message}")
                walls.append(v.seconds)
                graders.append(v.grader_seconds)
            wall, grader = statistics.median(walls), statistics.median(graders)
            overhead = statistics.median(w - g for w, g in zip(walls, graders))
            warm_per_hour = 3600 / wall
            cold_per_hour = 3600 / (wall + prepare_s)
            print(f"{name:45} {prepare_s:9.2f} {grader:9.3f} {overhead:10.3f} {warm_per_hour:7.0f} "
                  f"{cold_per_hour:7.0f} {warm_per_hour / cold_per_hour:6.1f}x")
        print(f"(median of {args.repeats} warm noop gradings each, {args.grader} grader; overhead = wall - grader's own run)")


if __name__ == "__main__":
    main()
