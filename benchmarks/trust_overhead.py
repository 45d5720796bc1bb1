"""What the trust screen costs per grading: the same candidate graded with the screen off, on
with the warm probe (its imports done while the grader runs) and on with the probe started
cold after the grader, in turn (the order rotating each repeat, so that machine drift falls on
every setting), on one package, in one run.

Prints, per setting, the median wall time of a grading and of the grader's own run, the
probes' time, and the ratios to the screen off; and the speedups each setting measured (the
screen must not move the grader's figure).

    python3 benchmarks/trust_overhead.py [--task kfc/wre-router-power-of-two-choices-loop16] \
        [--tasks-root /path/to/faibench/tasks] [--mode oracle] [--grader hidden] [--repeats 4] \
        [--settings off,warm,cold,unpaced]
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

SETTINGS = {"off": TrustConfig(enabled=False), "warm": TrustConfig(warm_probe=True), "cold": TrustConfig(warm_probe=False),
            # the screen on without the figure reproduced (what pesflow_probe_pace's timing adds)
            "unpaced": TrustConfig(warm_probe=True, reproduce_ratio=0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="kfc/wre-router-power-of-two-choices-loop16")
    ap.add_argument("--tasks-root", action="append", default=[])
    ap.add_argument("--mode", default="oracle")
    ap.add_argument("--grader", default="hidden")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--settings", default="off,warm,cold", help="of off, warm, cold, unpaced; the first is the ratios' base")
    ap.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "pesflow-bench-cache"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--install-steps", default="auto", choices=["auto", "skip", "require"])
    ap.add_argument("--warmup", type=int, default=1,
                    help="gradings per setting before the counted ones: a search grades a package again and again, and "
                         "the warm probe starts only once a first probe of the package has shown what its imports cost")
    a = ap.parse_args()
    names = [s for s in a.settings.split(",") if s]
    if not names or any(s not in SETTINGS for s in names):
        sys.exit(f"--settings: a comma-separated list of {', '.join(SETTINGS)}")
    evs = {s: Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=a.cache_dir, install_steps=a.install_steps), trust=SETTINGS[s]),
                        tasks_roots=a.tasks_root or None, log_root=Path(tempfile.mkdtemp(prefix="trust-bench-")))
           for s in names}
    task = evs[names[0]].task(a.task)
    for ev in evs.values():  # prepared once, outside the figures
        ev.prepare(task)
    for _ in range(a.warmup):
        for s in names:
            evs[s].evaluate(task, mode=a.mode, grader=a.grader, device=a.device)
    rows: dict[str, list] = {s: [] for s in names}
    phases: dict[str, list[dict]] = {s: [] for s in names}  # where the probes' time went, inside their process
    for i in range(a.repeats):
        k = i % len(names)
        # rotated, never reversed too: with two settings a rotation and a reversal cancel out,
        # and the screen's grading always followed the unscreened one (a bias of its own)
        for s in names[k:] + names[:k]:
            v = evs[s].evaluate(task, mode=a.mode, grader=a.grader, device=a.device)
            probes = v.trust.checks.get("probes") or {}
            rows[s].append((v.seconds, v.grader_seconds or 0.0, probes.get("seconds") or 0.0, v.speedup, v.trust.suspect))
            if probes.get("ran"):
                phases[s].append({**(probes.get("phases") or {}), **(probes.get("handover") or {}),
                                  "sandbox": probes.get("sandbox"), "loads": probes.get("loads"), "warm": probes.get("warm")})
    print(f"{a.task} mode={a.mode} grader={a.grader} repeats={a.repeats} warmup={a.warmup} "
          "(settings in turn, the order rotating)")
    med = {s: [statistics.median(r[k] for r in rows[s]) for k in range(3)] for s in names}
    for s in names:
        wall, grader, probe = med[s]
        speedups = ", ".join(f"{r[3]:.3g}" if r[3] is not None else "-" for r in rows[s])
        print(f"  {s:<4}: wall {wall:.2f} s, grader {grader:.2f} s, probes {probe:.2f} s, "
              f"speedups [{speedups}], suspect {sum(r[4] for r in rows[s])}/{len(rows[s])}")
        print("        each (wall/grader s): " + ", ".join(f"{r[0]:.2f}/{r[1]:.2f}" for r in rows[s]))
        got = phases[s]
        if got:
            keys = [k for k in got[0] if isinstance(got[0][k], (int, float))]
            print("        probes inside their process (median s): " + ", ".join(
                f"{k} {statistics.median(p.get(k) or 0.0 for p in got):.3f}" for k in keys) + f"; sandbox: {got[0]['sandbox']}")
            if got[-1].get("loads"):  # the modules the probes loaded, in order (the last grading's)
                print("        of which loading (s): " + ", ".join(f"{w} {t:.3f}" for w, t in got[-1]["loads"]))
            if got[-1].get("warm"):
                print(f"        warm: {got[-1]['warm']}")
    base = names[0]
    # the grader's own run spreads between gradings as much as the screen costs: what a grading
    # spends outside it (wall less grader: sandbox, probes, the screen's reading) is steadier
    extra = {s: statistics.median(r[0] - r[1] for r in rows[s]) for s in names}
    for s in names[1:]:
        print(f"  {s}/{base}: wall {med[s][0] / med[base][0]:.3f}x, grader {med[s][1] / max(med[base][1], 1e-9):.3f}x; "
              f"outside the grader {extra[s]:.2f} s against {extra[base]:.2f} s, so "
              f"{(med[base][1] + extra[s]) / (med[base][1] + extra[base]):.3f}x on the grader's median run")


if __name__ == "__main__":
    main()
