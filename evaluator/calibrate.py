"""Re-measure a task's anchor on this machine: the oracle against the frozen baseline.

The oracle goes through the hidden grader exactly as a candidate would, several times; the
median speedup becomes tests/ref_speedup.txt (digits only: the first place every grader of the
format and pesflow read the anchor from, so no other file is touched: not task.toml, not the
manifests), and the conditions and every figure go to tests/ref_speedup.caveat.md, whose first
line is a marker (CALIBRATED) that names where the number came from for every later verdict
(evaluator/task.py's read_anchor). On an official checkout the command says first, in one line,
that the package's copy becomes modified and how to keep the official one.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from datetime import datetime, timezone

from pydantic import BaseModel

from evaluator.evaluation import Evaluator
from evaluator.hardware import cpu_model
from evaluator.task import Task
from evaluator.verdict import Verdict

# The oracle is measured before an anchor exists, so these gates say nothing about it.
ANCHOR_GATES = {"ref_speedup_invalid", "anchor_missing", "speedup_not_above_anchor"}


# The caveat's first line: `<!-- pesflow calibrate: {"value", "hardware", "measured"} -->`.
CALIBRATED = "<!-- pesflow calibrate:"


class CalibrationError(Exception):
    pass


class Calibration(BaseModel):
    task: str
    speedups: list[float]
    median: float
    spread: float  # (max - min) / median
    hardware: str
    previous: float | None
    previous_source: str
    written: list[str]


def measure(ev: Evaluator, task: Task, repeats: int) -> list[Verdict]:
    verdicts = []
    for _ in range(repeats):
        v = ev.evaluate(task, mode="oracle", grader="hidden")
        blocking = [r for r in v.hard_fail_reasons if r not in ANCHOR_GATES]
        if v.status.value not in ("ok", "hard_fail") or blocking or not v.speedup:
            raise CalibrationError(f"{task.name}: the oracle did not grade cleanly ({v.status.value}: "
                                   f"{', '.join(blocking) or v.message}); log: {v.log_dir}")
        verdicts.append(v)
    return verdicts


def calibrate(ev: Evaluator, task: Task, repeats: int = 3, write: bool = True) -> Calibration:
    if repeats < 3:
        raise CalibrationError("calibrate needs at least 3 repeats (--repeats 3 or more)")
    verdicts = measure(ev, task, repeats)
    speedups = [float(v.speedup) for v in verdicts if v.speedup]
    med = statistics.median(speedups)
    hardware = verdicts[0].hardware or f"cpu:{cpu_model()}"
    if hardware.lower().startswith("cpu") and ":" not in hardware:
        hardware = f"cpu:{cpu_model()}"
    cal = Calibration(task=task.name, speedups=speedups, median=round(med, 6),
                      spread=round((max(speedups) - min(speedups)) / med, 4), hardware=hardware,
                      previous=task.anchor.value, previous_source=task.anchor.source, written=[])
    if write:
        cal.written = _write(task, cal, ev)
    return cal


def _write(task: Task, cal: Calibration, ev: Evaluator) -> list[str]:
    written = []
    tests = task.tests_dir
    (tests / "ref_speedup.txt").write_text(f"{cal.median:.4f}\n")
    written.append(str(tests / "ref_speedup.txt"))
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    numpy_version = _numpy_version()
    caveat = f"""{CALIBRATED} {json.dumps({"value": round(cal.median, 4), "hardware": cal.hardware,
                                           "measured": when})} -->
# ref_speedup: where this number comes from

`tests/ref_speedup.txt` = **{cal.median:.4f}**, the median speedup of the reviewer's oracle
(solution/) over the frozen baseline, measured by this package's own hidden grader
(`bash /tests/test.sh`, KERNELBENCH_VERIFY_MODE=oracle) through `pesflow calibrate`.

- measured: {when}
- hardware: {cal.hardware}
- machine: {platform.machine()}, {_cores()} cores, Linux {platform.release()}
- software: Python {sys.version.split()[0]}, numpy {numpy_version}, pesflow backend `{ev.backend.name}`
  (the host's software standing in for the image's)
- runs: {len(cal.speedups)}; speedups {", ".join(f"{s:.4f}" for s in cal.speedups)}; \
spread (max-min)/median = {cal.spread:.2%}
- previous anchor: {cal.previous} (from {cal.previous_source})

Speedups are hardware-specific: a reward computed against this anchor on other hardware
means little. Re-measure there with `pesflow calibrate {task.name}` before comparing scores.
"""
    (tests / "ref_speedup.caveat.md").write_text(caveat)
    written.append(str(tests / "ref_speedup.caveat.md"))
    return written


def official_note(task: Task) -> str | None:
    """The one line said before calibrating an official checkout: writing its anchor makes its
    copy modified, so its verdicts no longer say official, and how to keep the official copy."""
    src = task.source
    if not src.official:
        return None
    rel = task.tests_dir.relative_to(task.root)
    return (f"{task.name} is an official checkout ({src.repo} at {(src.commit or '?')[:12]}); writing its anchor into "
            f"{task.tests_dir}/ref_speedup.txt makes that copy modified, and its verdicts then say unofficial. To keep "
            f"the official copy: --dry-run (measure only), or afterwards `git -C {task.root} checkout -- {rel} && "
            f"git -C {task.root} clean -fq -- {rel}`")


def _numpy_version() -> str:
    try:
        import numpy  # optional (the bundled CPU tasks' extra): its version goes into the caveat

        return numpy.__version__
    except ImportError:
        return "absent"


def _cores() -> int:
    return os.cpu_count() or 1
