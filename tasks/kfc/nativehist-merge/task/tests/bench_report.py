"""Fold the two callgrind runs of cpu_bench.py into the harness result (raw.json).

speedup = baseline I refs / candidate I refs, read off callgrind's own summary
line ("I   refs: 1,234,567") in each run's log, or failing that off the
"summary:" line of its output file. The two runs' checksums of the merge
outputs must agree. Exit 0 when raw.json was updated, 2 when the grader broke.
"""

import argparse
import json
import os
import re
import sys

_IREFS = re.compile(r"==\d+==\s+I\s+refs:\s+([\d,]+)")
_SUMMARY = re.compile(r"^(?:summary|totals):\s+(\d+)", re.M)


def _read(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def instructions(log_path, out_path):
    """The run's total instruction count, or None."""
    found = _IREFS.findall(_read(log_path))
    if found:
        return int(found[-1].replace(",", ""))
    m = _SUMMARY.search(_read(out_path))
    return int(m.group(1)) if m else None


def report(path):
    """The KEY=value lines cpu_bench wrote; the first value of each key wins."""
    out = {}
    for line in _read(path).splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in out:
            out[key.strip()] = value.strip()
    return out


def _write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, default=str)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--dir", required=True, help="where test.sh left cand.* and base.* of the two runs")
    ap.add_argument("--seconds", default="")
    a = ap.parse_args()
    with open(a.raw, "r", encoding="utf-8") as fh:
        raw = json.load(fh)
    fails = raw.setdefault("hard_fail_reasons", [])
    gates = raw.setdefault("gates", {})
    d = a.dir
    cand, base = report(os.path.join(d, "cand.report")), report(os.path.join(d, "base.report"))
    cand_ir = instructions(os.path.join(d, "cand.cg.log"), os.path.join(d, "cand.callgrind.out"))
    base_ir = instructions(os.path.join(d, "base.cg.log"), os.path.join(d, "base.callgrind.out"))
    timing = {"ran": False, "metric": "callgrind_ir", "candidate_ir": cand_ir, "baseline_ir": base_ir,
              "calls": cand.get("CALLS"), "buckets": cand.get("BUCKETS"), "seconds": a.seconds}

    # the frozen baseline's run is the grader's own: if it broke, the grader is broken
    if base.get("DONE") != "1" or base.get("ERROR") or base.get("BLOCKED") or not base_ir:
        raw["grader_error"] = ("the baseline's callgrind run failed: %s; %s"
                               % (base.get("ERROR") or base.get("BLOCKED") or "no report",
                                  _read(os.path.join(d, "base.cg.log"))[-600:]))
        raw["timing"] = timing
        _write(a.raw, raw)
        return 2

    problem = None
    if cand.get("BLOCKED"):
        for name in sorted(set(cand["BLOCKED"].split(","))):
            fails.append("forbidden_runtime:bench_" + name.split(":")[0])
        gates["forbidden_pattern"] = False
        problem = "blocked"
    if cand.get("TAMPERED"):
        fails.append("forbidden_pattern:runtime_tampering")
        gates["forbidden_pattern"] = False
        raw["tampered"] = cand["TAMPERED"].split(",")[:20]
        problem = "tampered"
    if problem is None and cand.get("ERROR"):
        fails.append("timing_failed")
        timing["error"] = cand["ERROR"][:300]
        problem = "error"
    if problem is None and (cand.get("DONE") != "1" or not cand_ir):
        fails.append("timing_failed")
        timing["error"] = "the candidate's callgrind run did not finish: " + _read(os.path.join(d, "cand.cg.log"))[-400:]
        problem = "unfinished"
    if problem is None and cand.get("CHECKSUM") != base.get("CHECKSUM"):
        fails.append("correctness_failed:bench_checksum_mismatch")
        gates["correctness_failed"] = False
        raw.setdefault("correctness", []).append({
            "name": "bench_checksum", "kind": "bench_consistency", "passed": False,
            "message": "the benchmark's merge outputs differ from the frozen baseline's"})
        problem = "checksum"
    if problem is None:
        speedup = base_ir / cand_ir
        timing.update({"ran": True, "speedup": speedup, "pairs": 1, "ratios": [speedup], "cv": 0.0,
                       "workloads": [{"name": "all_bench_workloads", "speedup": speedup,
                                      "candidate_ir": cand_ir, "baseline_ir": base_ir}]})
        gates["timing_failed"] = True
    elif problem in ("error", "unfinished"):
        gates["timing_failed"] = False
    raw["timing"] = timing
    _write(a.raw, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
