"""What a profile costs against the grading it rides on, and what it says (issue 38, engineer).

For each package: its baseline graded by the dev grader without a profile (`--repeats` times)
and with one, and its reference (the package's oracle) with one, one after the other on one
machine; printed per package: the gradings' seconds without and with, the profile's own seconds
(the calls under the profiler, inside the probe), their share of a grading, how it was made, the
limiter, and every line the model would read. The raw profiles are kept beside the rows.

    python3 benchmarks/profile_cost.py --tasks-root <benchmark>/tasks --task T ... \
        [--repeats 2] [--install-steps auto|skip|require] [--cache DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evaluator import ceilings, profile  # noqa: E402
from evaluator.candidate import CandidateSource  # noqa: E402
from evaluator.config import EvaluatorConfig, LocalConfig  # noqa: E402
from evaluator.device import check_device  # noqa: E402
from evaluator.evaluation import Evaluator  # noqa: E402


def one(ev: Evaluator, task, mode: str, facts: dict | None, out: Path, tag: str, device: str | None) -> dict:
    kw = {"candidate": CandidateSource(files={})} if mode == "candidate" else {}
    v = ev.evaluate(task, mode=mode, grader="dev", profile=facts, out_dir=out / tag, device=device, **kw)
    raw = profile.read(Path(v.log_dir))
    if raw is not None:
        (out / f"{tag}-profile.json").write_text(json.dumps(raw, indent=1))
    return {"tag": tag, "status": v.status.value, "correct": v.correct, "seconds": v.seconds,
            "profile_seconds": (raw or {}).get("profile_seconds"), "profile": v.profile,
            "probes": (v.trust.checks.get("probes") or {}).get("seconds") if isinstance(v.trust.checks.get("probes"), dict) else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks-root", required=True)
    ap.add_argument("--task", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--profile-share", type=float, default=None, help="evaluator.profile_share (default: the config's)")
    ap.add_argument("--install-steps", default="auto", choices=("auto", "skip", "require"))
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="profile-cost-"))
    out.mkdir(parents=True, exist_ok=True)
    cache = a.cache or str(out / "cache")
    share = {"profile_share": a.profile_share} if a.profile_share else {}
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=cache, install_steps=a.install_steps), **share),
                   tasks_roots=[a.tasks_root], log_root=out / "logs")
    rows = []
    try:
        for name in a.task:
            task = ev.task(name)
            device = check_device(task, None) if task.gpus else None
            facts = ceilings.facts("cuda" if task.gpus else "cpu", Path(cache)) or {}
            work = out / name.replace("/", "_")
            if work.exists():
                shutil.rmtree(work)
            work.mkdir(parents=True)
            one(ev, task, "candidate", None, work, "warm-up", device)  # the image, the dev reference: not a grading's cost
            plain = [one(ev, task, "candidate", None, work, f"baseline-plain-{i}", device) for i in range(a.repeats)]
            profiled = one(ev, task, "candidate", facts, work, "baseline-profiled", device)
            ref = one(ev, task, "oracle", facts, work, "reference-profiled", device)
            base_s = statistics.median(r["seconds"] for r in plain)
            row = {"task": name, "machine": {k: facts.get(k) for k in ("name", "bandwidth_gbs", "tflops", "source")},
                   "grading_seconds": [r["seconds"] for r in plain], "profiled_seconds": profiled["seconds"],
                   "profile_seconds": profiled["profile_seconds"],
                   "profile_share": round(profiled["profile_seconds"] / base_s, 4) if profiled["profile_seconds"] and base_s else None,
                   "baseline": profiled, "reference": ref}
            rows.append(row)
            with open(out / "rows.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{name}: grading {base_s:.2f} s; with the profile {profiled['seconds']:.2f} s; the profile's calls "
                  f"{profiled['profile_seconds']} s ({row['profile_share']} of a grading)", flush=True)
            for who in ("baseline", "reference"):
                p = row[who]["profile"] or {}
                print(f"  {who} ({row[who]['status']}): " + "\n    ".join(p.get("lines") or ["(none)"]), flush=True)
    finally:
        ev.close()
    print(f"rows: {out / 'rows.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
