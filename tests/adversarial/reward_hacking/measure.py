"""Grade corpus entries (and each package's reference) under the graders, one row per
(package, candidate, grader): status, speedup, reward, hard fails, trust.

    python3 -m tests.adversarial.reward_hacking.measure [--kind exploits|honest|official]
        [--task T ...] [--only NAME ...] [--grader dev|hidden|both] [--reference]
        [--tasks-root DIR ...] [--cache DIR] [--out FILE.jsonl] [--no-trust]

This is how the figures in the files' headers and in README.md were measured; the tests
(tests/adversarial/test_reward_hacking.py) and benchmarks/trust_exploits.py use `grade`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from evaluator.config import EvaluatorConfig, LocalConfig, TrustConfig
from evaluator.evaluation import Evaluator
from tests.adversarial.reward_hacking.corpus import Entry, entries, source

GRADERS = ("hidden", "dev")


def grade(ev: Evaluator, task: str, entry: Entry | None, grader: str):
    """The verdict of the package's reference with `entry` appended (the reference alone for None)."""
    t = ev.task(task)
    return ev.evaluate(t, candidate=source(t, entry), grader=grader)


def row(task: str, name: str, grader: str, v, seconds: float) -> dict:
    trust = getattr(v, "trust", None)
    return {"task": task, "candidate": name, "grader": grader, "status": str(getattr(v.status, "value", v.status)),
            "speedup": v.speedup, "reward": v.reward, "hard_fail_reasons": v.hard_fail_reasons,
            "dev": v.dev.model_dump() if getattr(v, "dev", None) is not None else None,
            "suspect": bool(trust.suspect) if trust is not None else None,
            "reasons": list(trust.reasons) if trust is not None else [], "seconds": round(seconds, 1),
            "probes": _probes(trust),
            "log_dir": v.log_dir}


def _probes(trust) -> str:
    """What the probes did, in a few words: whether they ran, how many calls and instances they
    replayed and compared, and how many instances were replayed scaled up."""
    p = (getattr(trust, "checks", None) or {}).get("probes") or {}
    if not p:
        return "-"
    if not p.get("ran"):
        return str(p.get("why") or p.get("error") or "did not run")
    scaled = sum(1 for n in p.get("objects") or [] if isinstance(n, dict) and "scaled" in n)
    return f"ran, {p.get('calls', 0)} calls, {p.get('compared', 0)} compared" + (f", {scaled} scaled" if scaled else "")


def fmt(r: dict) -> str:
    sp = "-" if r["speedup"] is None else f"{r['speedup']:.4g}"
    if r["speedup"] is None and r.get("dev") and r["dev"].get("value") is not None:
        sp = f"{r['dev'].get('key')}={r['dev']['value']:.4g}"  # a dev engine's own figure, raw
    rw = "-" if r["reward"] is None else f"{r['reward']:.3g}"
    return (f"{r['task']:<45} {r['candidate']:<36} {r['grader']:<6} {r['status']:<10} speedup {sp:>9} "
            f"reward {rw:>5} suspect {str(r['suspect']):<5} probes: {r.get('probes', '-')} {'; '.join(r['reasons'])[:160]}"
            f"{'  hard: ' + ','.join(r['hard_fail_reasons']) if r['hard_fail_reasons'] else ''}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", default="exploits", choices=("exploits", "honest", "official"))
    ap.add_argument("--task", action="append", default=[])
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--grader", default="both", choices=("dev", "hidden", "both"))
    ap.add_argument("--reference", action="store_true", help="also grade each package's reference alone")
    ap.add_argument("--no-entries", action="store_true", help="grade only the references")
    ap.add_argument("--tasks-root", action="append", default=[])
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-trust", action="store_true", help="the graders alone: no trust screen")
    a = ap.parse_args(argv)
    cache = a.cache or tempfile.mkdtemp(prefix="pesflow-rh-cache-")
    cfg = EvaluatorConfig(local=LocalConfig(cache_dir=cache), trust=TrustConfig(enabled=not a.no_trust))
    ev = Evaluator(cfg, tasks_roots=a.tasks_root or None,
                   log_root=Path(tempfile.mkdtemp(prefix="pesflow-rh-logs-")))
    todo: list[tuple[str, Entry | None]] = []
    picked = [e for e in entries(a.kind) if (not a.task or e.task in a.task) and (not a.only or e.name in a.only)]
    tasks = list(dict.fromkeys(a.task or [e.task for e in picked]))
    if a.reference or a.no_entries:
        todo += [(t, None) for t in tasks]
    if not a.no_entries:
        todo += [(e.task, e) for e in picked]
    graders = GRADERS if a.grader == "both" else (a.grader,)
    out = open(a.out, "a") if a.out else None
    try:
        for task, entry in todo:
            for g in graders:
                t0 = time.monotonic()
                v = grade(ev, task, entry, g)
                r = row(task, entry.name if entry else "reference", g, v, time.monotonic() - t0)
                print(fmt(r), flush=True)
                if out:
                    out.write(json.dumps(r) + "\n")
                    out.flush()
    finally:
        ev.close()
        if out:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
