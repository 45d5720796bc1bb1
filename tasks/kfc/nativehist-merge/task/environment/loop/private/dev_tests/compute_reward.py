"""Turn the harness result into the verdict files of the native-histogram merge grader.

Writes reward.json, reward.txt, verifier_state.json, correctness_results.json
and benchmark_results.json into --log. Exit status 0 when the verdict was
written for a candidate (whatever its score), 2 when the grader itself broke.

speedup = baseline instructions / candidate instructions (callgrind I refs, one
run each over the same benchmark workloads; see bench_report.py)
reward = 0                                   if any hard gate failed
       = 0                                   if speedup <= ref_speedup
       = min(1, ln(speedup/ref) / ln(ref))   otherwise
"""

import argparse
import json
import math
import os
import sys

SCHEMA = "pesflow_kernel_reward_v1"
GATE_NAMES = [
    "patch_apply_failed",
    "head_moved",
    "out_of_scope_edit",
    "forbidden_pattern",
    "import_failed",
    "correctness_failed",
    "error_contract_failed",
    "timing_failed",
    "speedup_not_above_baseline",
    "ref_speedup_invalid",
]


def _read_anchor(tests_dir):
    path = os.path.join(tests_dir, "ref_speedup.txt")
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return float(fh.read().strip()), path
    except (OSError, ValueError):
        pass
    manifest = "/opt/verifier-correctness-manifest.json"
    try:
        with open(manifest, "r", encoding="utf-8") as fh:
            return float(json.load(fh)["ref_speedup"]), manifest
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return 1.0, "default"


def _cpu_name():
    try:
        with open("/proc/cpuinfo", "r", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return "cpu:" + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu:unknown"


def _tail(path, limit=2000):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            return fh.read()[-limit:]
    except OSError:
        return ""


def _write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--prefail", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--lane", required=True)
    ap.add_argument("--task-id", required=True)
    ap.add_argument("--tests-dir", required=True)
    ap.add_argument("--harness-rc", type=int, default=0)
    ap.add_argument("--harness-log", default="")
    a = ap.parse_args()

    try:
        with open(a.prefail, "r", encoding="utf-8") as fh:
            prefail = [ln.strip() for ln in fh if ln.strip()]
    except OSError:
        prefail = []
    try:
        with open(a.raw, "r", encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError):
        raw = None

    grader_broken = False
    notes = []
    hard = list(prefail)
    if raw is None:
        grader_broken = True
        hard.append("grader_error")
        notes.append("the harness wrote no result: " + _tail(a.harness_log, 1500))
        raw = {"gates": {}, "correctness": [], "timing": {"ran": False}}
    elif raw.get("grader_error"):
        grader_broken = True
        hard.append("grader_error")
        notes.append(str(raw["grader_error"]))
    elif raw.get("stage") != "done":
        hard.append("candidate_crashed:" + str(raw.get("stage")))
        notes.append("the harness process died (rc=%d) during stage %r: %s"
                     % (a.harness_rc, raw.get("stage"), _tail(a.harness_log, 1500)))
    hard.extend(raw.get("hard_fail_reasons", []))

    ref, ref_source = _read_anchor(a.tests_dir)
    if not (ref > 1.0) or not math.isfinite(ref):
        hard.append("ref_speedup_invalid")

    timing = raw.get("timing") or {"ran": False}
    speedup = None
    if timing.get("ran"):
        speedup = float(timing.get("speedup", 0.0))
        if not speedup > 1.0:
            hard.append("speedup_not_above_baseline")
    elif not hard:
        hard.append("timing_failed")

    # de-duplicate, keep order
    seen = set()
    hard = [h for h in hard if not (h in seen or seen.add(h))]

    if hard or speedup is None or speedup <= ref:
        reward = 0.0
    else:
        reward = min(1.0, math.log(speedup / ref) / math.log(ref))

    gates = {}
    for name in GATE_NAMES:
        failed = any(h == name or h.startswith(name + ":") for h in hard)
        known = raw.get("gates", {}).get(name)
        if failed:
            gates[name] = False
        elif name in ("patch_apply_failed", "head_moved", "out_of_scope_edit", "ref_speedup_invalid"):
            gates[name] = True
        elif name == "speedup_not_above_baseline":
            gates[name] = True if speedup is not None else None
        else:
            gates[name] = known
    results = raw.get("correctness", [])
    passed = sum(1 for r in results if r.get("passed"))
    correctness_ok = bool(results) and passed == len(results) and not any(
        h.split(":")[0] in ("correctness_failed", "error_contract_failed", "import_failed",
                            "forbidden_pattern", "grader_error") or h.startswith("candidate_crashed")
        for h in hard)

    reward_obj = {
        "schema_version": SCHEMA,
        "task_id": a.task_id,
        "lane": a.lane,
        "mode": a.mode,
        "reward": reward,
        "speedup": speedup,
        "ref_speedup": ref,
        "ref_speedup_source": ref_source,
        "hard_fail_reasons": hard,
        "hard_fails": list(hard),
        "correctness_ok": correctness_ok,
        "tests": {"passed": passed, "total": len(results)},
        "cv": timing.get("cv"),
        "actual_hardware_type": _cpu_name(),
        "timing": {
            "metric": "callgrind_ir",
            "pairs": timing.get("pairs", 0),
            "ratios": timing.get("ratios", []),
            "candidate_ir": timing.get("candidate_ir"),
            "baseline_ir": timing.get("baseline_ir"),
            "per_workload": [
                {k: w.get(k) for k in ("name", "speedup", "candidate_ir", "baseline_ir")}
                for w in timing.get("workloads", [])
            ],
            "aggregate": "baseline I refs / candidate I refs, one callgrind run of each over all benchmark workloads",
        },
        "gates": gates,
        "notes": notes,
    }
    if a.lane == "dev":
        # The in-session lane never exposes the anchor or anything derived from it.
        reward_obj["reward"] = None
        reward_obj["ref_speedup"] = None
        reward_obj["ref_speedup_source"] = None
        reward_obj["notes"].append("dev lane: reward and anchor are withheld")
    os.makedirs(a.log, exist_ok=True)
    _write(os.path.join(a.log, "reward.json"), reward_obj)
    with open(os.path.join(a.log, "reward.txt"), "w", encoding="utf-8") as fh:
        fh.write("withheld\n" if a.lane == "dev" else "%.6f\n" % reward)
    _write(os.path.join(a.log, "verifier_state.json"), {
        "task_id": a.task_id, "mode": a.mode, "lane": a.lane,
        "correctness_ok": correctness_ok, "hard_fail_reasons": hard,
        "harness_stage": raw.get("stage"), "import_message": raw.get("import_message"),
    })
    _write(os.path.join(a.log, "correctness_results.json"), {
        "passed": passed, "total": len(results), "cases": results,
    })
    _write(os.path.join(a.log, "benchmark_results.json"), timing)
    return 2 if grader_broken else 0


if __name__ == "__main__":
    sys.exit(main())
