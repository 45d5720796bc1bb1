"""Fault injection for the crash tests: PESFLOW_FAULT_PAUSE=<point>:<round or *>:<seconds> makes the
run stop for a while at a named point of one round (and say so with a line in a PAUSED-<point>
file in the run directory, one per pause: two graders paused at once write two), so that a test
can SIGKILL it exactly there. Unset, it does nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

POINTS = ("checkpoint", "grading")


def pause(point: str, round_: int, run_dir: Path) -> None:
    spec = os.environ.get("PESFLOW_FAULT_PAUSE")
    if not spec:
        return
    name, k, seconds = spec.split(":")
    if name == point and (int(k) == round_ if k != "*" else round_ > 0):  # "*": every round of the search
        with open(run_dir / f"PAUSED-{point}", "a") as f:
            f.write(f"{time.time()}\n")
        time.sleep(float(seconds))
