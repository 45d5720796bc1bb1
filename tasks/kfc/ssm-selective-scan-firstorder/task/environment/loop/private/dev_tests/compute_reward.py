"""Turn the harness result into the verdict files.

Writes reward.json, reward.txt, verifier_state.json, correctness_results.json and
benchmark_results.json into --log. Exit 0 when a verdict was written for the candidate
(whatever its score), 2 when the grader itself broke.

reward = 0                                   if any hard gate failed
       = 0                                   if speedup <= ref_speedup
       = min(1, ln(speedup/ref) / ln(ref))   otherwise
With KERNELBENCH_DEVICE=cpu only correctness runs: reward 0, speedup null, hardware "cpu".
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
    "baseline_called",
    "no_gpu",
    "import_failed",
    "timer_patched",
    "correctness_failed",
    "error_contract_failed",
    "inputs_mutated",
    "output_cached",
    "side_stream_escape",
    "beyond_roofline",
    "timing_failed",
    "speedup_not_above_baseline",
    "ref_speedup_invalid",
]
REPO_GATES = ("patch_apply_failed", "head_moved", "out_of_scope_edit", "ref_speedup_invalid")
TIMING_GATES = ("side_stream_escape", "beyond_roofline", "timing_failed", "speedup_not_above_baseline")


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
    ap.add_argument("--device", required=True)
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
    if raw.get("notes"):
        notes.append(str(raw["notes"]))

    cpu_lane = a.device == "cpu"
    ref, ref_source = _read_anchor(a.tests_dir)
    if not (ref > 1.0) or not math.isfinite(ref):
        hard.append("ref_speedup_invalid")

    timing = raw.get("timing") or {"ran": False}
    speedup = None
    if timing.get("ran"):
        speedup = float(timing.get("speedup", 0.0))
        if not speedup > 1.0:
            hard.append("speedup_not_above_baseline")
    elif not hard and not cpu_lane:
        hard.append("timing_failed")

    seen = set()
    hard = [h for h in hard if not (h in seen or seen.add(h))]

    if hard or speedup is None or speedup <= ref or cpu_lane:
        reward = 0.0
    else:
        reward = min(1.0, math.log(speedup / ref) / math.log(ref))

    gates = {}
    known = raw.get("gates", {})
    for name in GATE_NAMES:
        failed = any(h == name or h.startswith(name + ":") for h in hard)
        if failed:
            gates[name] = False
        elif name in REPO_GATES:
            gates[name] = True
        elif name == "speedup_not_above_baseline":
            gates[name] = True if speedup is not None else None
        elif cpu_lane and name in TIMING_GATES + ("no_gpu",):
            gates[name] = None  # not run on the CPU path
        else:
            gates[name] = known.get(name)
    results = raw.get("correctness", [])
    passed = sum(1 for r in results if r.get("passed"))
    correctness_ok = bool(results) and passed == len(results) and not any(
        h.split(":")[0] in ("correctness_failed", "error_contract_failed", "import_failed", "forbidden_pattern",
                            "baseline_called", "timer_patched", "inputs_mutated", "output_cached",
                            "grader_error", "no_gpu") or h.startswith("candidate_crashed")
        for h in hard)

    hardware = raw.get("hardware") or ("cpu" if cpu_lane else "unknown")
    reward_obj = {
        "schema_version": SCHEMA,
        "task_id": a.task_id,
        "lane": a.lane,
        "mode": a.mode,
        "device": a.device,
        "reward": reward,
        "speedup": speedup,
        "ref_speedup": ref,
        "ref_speedup_source": ref_source,
        "hard_fail_reasons": hard,
        "hard_fails": list(hard),
        "correctness_ok": correctness_ok,
        "tests": {"passed": passed, "total": len(results)},
        "cv": timing.get("cv"),
        "actual_hardware_type": hardware,
        "timing": {
            "pairs": timing.get("pairs", 0),
            "ratios": timing.get("ratios", []),
            "per_workload": [
                {k: w.get(k) for k in ("name", "median_ratio", "cv", "baseline_ms_median", "candidate_ms_median",
                                       "baseline_wall_ms_median", "candidate_wall_ms_median", "roofline_ms",
                                       "baseline_gap_ms_median", "candidate_gap_ms_median", "gap_threshold_ms")}
                for w in timing.get("workloads", [])
            ],
            "aggregate": timing.get("aggregate"),
        },
        "gates": gates,
        "notes": notes,
    }
    if cpu_lane:
        reward_obj["notes"].append("KERNELBENCH_DEVICE=cpu: correctness only, no timing; reward is 0 by design")
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
        "task_id": a.task_id, "mode": a.mode, "lane": a.lane, "device": a.device,
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
