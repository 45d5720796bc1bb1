"""What the trust screen costs per grading: the same candidate graded with the screen on and
off, alternately (ABAB, so machine drift falls on both), on one package, in one run.

Prints, per setting, the median wall time of a grading and of the grader's own run, the
probes' time, and the ratios on/off; and the speedups each setting measured (the screen must
not move the grader's figure).

    python3 benchmarks/trust_overhead.py [--task kfc/wre-router-power-of-two-choices-loop16] \
        [--tasks-root /path/to/faibench/tasks] [--mode oracle] [--grader hidden] [--repeats 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.config import EvaluatorConfig, LocalConfig, TrustConfig  # noqa: E402
from evaluator.evaluation import Evaluator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="kfc/wre-router-power-of-two-choices-loop16")
    ap.add_argument("--tasks-root", action="append", default=[])
    ap.add_argument("--mode", default="oracle")
    ap.add_argument("--grader", default="hidden")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "pesflow-bench-cache"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--install-steps", default="auto", choices=["auto", "skip", "require"])
    a = ap.parse_args()
    evs = {on: Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=a.cache_dir, install_steps=a.install_steps), trust=TrustConfig(enabled=on)),
                         tasks_roots=a.tasks_root or None, log_root=Path(tempfile.mkdtemp(prefix="trust-bench-")))
           for on in (True, False)}
    task = evs[True].task(a.task)
    for ev in evs.values():  # prepared once, outside the figures
        ev.prepare(task)
    rows: dict[bool, list] = {True: [], False: []}
    phases: list[dict] = []  # where the probes' time went (inside their process), screen on
    for i in range(a.repeats):
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            v = evs[on].evaluate(task, mode=a.mode, grader=a.grader, device=a.device)
            probes = v.trust.checks.get("probes") or {}
            rows[on].append((v.seconds, v.grader_seconds or 0.0, probes.get("seconds") or 0.0, v.speedup, v.trust.suspect))
            if on and probes.get("ran"):
                phases.append({**(probes.get("phases") or {}), "sandbox": probes.get("sandbox"), "loads": probes.get("loads")})
    print(f"{a.task} mode={a.mode} grader={a.grader} repeats={a.repeats} (ABAB)")
    med = {on: [statistics.median(r[k] for r in rows[on]) for k in range(3)] for on in rows}
    for on in (False, True):
        wall, grader, probe = med[on]
        speedups = ", ".join(f"{r[3]:.3g}" if r[3] is not None else "-" for r in rows[on])
        print(f"  screen {'on ' if on else 'off'}: wall {wall:.2f} s, grader {grader:.2f} s, probes {probe:.2f} s, "
              f"speedups [{speedups}], suspect {sum(r[4] for r in rows[on])}/{len(rows[on])}")
    if phases:
        keys = [k for k in phases[0] if isinstance(phases[0][k], (int, float))]
        print("  probes inside their process (median s): " + ", ".join(
            f"{k} {statistics.median(p.get(k) or 0.0 for p in phases):.3f}" for k in keys) + f"; sandbox: {phases[0]['sandbox']}")
        if phases[-1].get("loads"):  # the modules the probes loaded, in order (the last grading's)
            print("  of which loading (s): " + ", ".join(f"{w} {s:.3f}" for w, s in phases[-1]["loads"]))
    print(f"  on/off: wall {med[True][0] / med[False][0]:.3f}x, grader {med[True][1] / max(med[False][1], 1e-9):.3f}x")


if __name__ == "__main__":
    main()
