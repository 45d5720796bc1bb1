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
        print(f"{'task':44} {'prepare':>8} {'mode':>8} {'grader':>7} {'overhead':>8} {'warm/h':>7} {'cold/h':>7} {'ratio':>6} {'machinery':>9}")
        for name in args.tasks:
            task = ev.task(name)
            t0 = time.monotonic()
            prepared = ev.prepare(task)
            prepare_s = time.monotonic() - t0
            assert not prepared.cached
            # noop: a full grading (correctness + timing); negative: a candidate that fails fast,
            # as many LLM proposals do.
            for mode in ("noop", "negative"):
                walls, graders = [], []
                for _ in range(args.repeats):
                    v = ev.evaluate(task, mode=mode, grader=args.grader)
                    if v.grader_seconds is None:
                        raise SystemExit(f"{name}: {v.status.value}: {v.message}")
                    walls.append(v.seconds)
                    graders.append(v.grader_seconds)
                wall, grader = statistics.median(walls), statistics.median(graders)
                overhead = statistics.median(w - g for w, g in zip(walls, graders))
                warm, cold = 3600 / wall, 3600 / (wall + prepare_s)
                machinery = (prepare_s + overhead) / overhead  # candidates/hour of pesflow's own work, warm vs cold
                print(f"{name:44} {prepare_s:8.2f} {mode:>8} {grader:7.3f} {overhead:8.3f} {warm:7.0f} {cold:7.0f} "
                      f"{warm / cold:5.1f}x {machinery:8.0f}x")
        print(f"(seconds; median of {args.repeats} warm gradings per mode, {args.grader} grader. overhead = wall - the "
              "grader's own run, timed inside the sandbox. ratio = candidates/hour warm vs preparing before each; "
              "machinery = the same ratio counting only pesflow's own time)")


if __name__ == "__main__":
    main()
