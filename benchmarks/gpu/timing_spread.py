"""How much a GPU task's measured speedup moves between gradings of the same candidate.

Reads the verdicts (verdict.json) and timing reports (benchmark_results.json) that repeated
gradings left under one or more folders (pesflow's evaluation logs, or what
benchmarks/gpu/ scripts brought back from the GPU machine), groups the gradings that graded ok
by task and candidate, and prints per task:
- the speedup of each grading and its coefficient of variation (CV) across gradings;
- per workload: the candidate's median kernel time, and the CV across gradings of the
  workload's median baseline/candidate ratio;
- the same two CVs restricted to the workloads whose candidate kernel takes at least 50 us
  (the goal stated for the GPU tasks is a CV of at most 2 % there: shorter kernels are
  dominated by launch overhead and host jitter).

    python3 benchmarks/gpu/timing_spread.py DIR [DIR ...] [--json OUT.json] [--min-us 50]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def cv(xs: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    mean = statistics.fmean(xs)
    return statistics.stdev(xs) / mean if mean > 0 else None


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(max(x, 1e-12)) for x in xs))


def workloads_of(report: object) -> list[dict]:
    """Every per-workload timing entry in a timing report, whatever its nesting."""
    found: list[dict] = []
    if isinstance(report, dict):
        if "median_ratio" in report and "candidate_ms_median" in report and "name" in report:
            return [report]
        for v in report.values():
            found += workloads_of(v)
    elif isinstance(report, list):
        for v in report:
            found += workloads_of(v)
    return found


def gradings(roots: list[Path]) -> dict[tuple[str, str], list[dict[str, dict]]]:
    """(task, mode@candidate hash) -> one {workload name: entry} per grading that graded ok.
    The mode is part of the key: noop and oracle gradings carry no candidate files, so they
    share the hash of an empty candidate."""
    out: dict[tuple[str, str], list[dict[str, dict]]] = defaultdict(list)
    for root in roots:
        for vfile in sorted(root.rglob("verdict.json")):
            try:
                v = json.loads(vfile.read_text())
            except (OSError, ValueError):
                continue
            if v.get("status") != "ok" or v.get("hardware") in (None, "cpu"):
                continue
            reports = sorted(vfile.parent.rglob("benchmark_results.json"))
            if not reports:
                continue
            entries = workloads_of(json.loads(reports[0].read_text()))
            if entries:
                key = f"{v.get('mode', 'candidate')}@{(v.get('candidate_hash') or '')[:12]}"
                out[(v["task"], key)].append({e["name"]: e for e in entries})
    return out


def spread(runs: list[dict[str, dict]], min_ms: float) -> dict:
    names = [n for n in runs[0] if all(n in r for r in runs)]
    per = []
    for n in names:
        ratios = [r[n]["median_ratio"] for r in runs]
        per.append({"workload": n, "candidate_ms": statistics.median(r[n]["candidate_ms_median"] for r in runs),
                    "ratio_median": statistics.median(ratios), "cv_across_gradings": cv(ratios)})
    long = [w["workload"] for w in per if w["candidate_ms"] >= min_ms]
    speedups = [geomean([r[n]["median_ratio"] for n in names]) for r in runs]
    long_speedups = [geomean([r[n]["median_ratio"] for n in long]) for r in runs] if long else []
    long_cvs = [w["cv_across_gradings"] for w in per if w["workload"] in long and w["cv_across_gradings"] is not None]
    return {"gradings": len(runs), "speedups": speedups, "cv_speedup": cv(speedups),
            "workloads": per, "long_workloads": long,
            "long_speedups": long_speedups, "cv_long_speedup": cv(long_speedups),
            "max_cv_long_workload": max(long_cvs) if long_cvs else None,
            "median_cv_long_workload": statistics.median(long_cvs) if long_cvs else None}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--min-us", type=float, default=50.0, help="kernels at least this long count as long (default 50)")
    a = ap.parse_args(argv)
    found = gradings(a.dirs)
    if not found:
        print("timing_spread: no GPU gradings that graded ok (verdict.json + benchmark_results.json) under "
              + ", ".join(map(str, a.dirs)), file=sys.stderr)
        return 2
    result = {}
    for (task, cand), runs in sorted(found.items()):
        if len(runs) < 2:
            continue
        s = spread(runs, a.min_us / 1000)
        result[f"{task} {cand}"] = s
        print(f"{task} ({cand}): {s['gradings']} gradings, speedup "
              + ", ".join(f"{x:.2f}" for x in s["speedups"]) + f"  cv {pct(s['cv_speedup'])}")
        for w in s["workloads"]:
            mark = "*" if w["workload"] in s["long_workloads"] else " "
            print(f"  {mark} {w['workload']:<34} {1000 * w['candidate_ms']:>9.1f} us  ratio {w['ratio_median']:>9.2f}"
                  f"  cv {pct(w['cv_across_gradings'])}")
        print(f"  workloads >= {a.min_us:g} us (*): {len(s['long_workloads'])} of {len(s['workloads'])}; speedup over "
              f"them cv {pct(s['cv_long_speedup'])}; per workload cv median {pct(s['median_cv_long_workload'])}, "
              f"max {pct(s['max_cv_long_workload'])}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
