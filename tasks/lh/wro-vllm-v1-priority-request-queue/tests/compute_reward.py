#!/usr/bin/env python3
"""Turn the harness's raw results into reward.json and its companion files.

reward = 0                                   if any hard gate failed
       = 0                                   if speedup <= ref_speedup
       = min(1, ln(speedup/ref) / ln(ref))   otherwise

In the dev profile (the in-session engine) no anchor is read and no reward is
computed: the dev verdict carries gates and the measured speedup only.
"""

import argparse
import json
import math
import os
import re
import sys

TASK_ID = "lh/wro-vllm-v1-priority-request-queue"
MANIFEST = "/opt/verifier-correctness-manifest.json"
PHASE_GATE = {"static": "grader_error", "import": "import_failed",
              "correctness": "correctness_failed", "timing": "timing_failed"}
GATE_KEY = {"import_failed": "import_ok", "correctness_failed": "correctness_ok",
            "timing_failed": "timing_ok"}


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.lower().startswith("model name"):
                return "cpu:" + line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return "cpu:" + (platform.processor() or platform.machine() or "unknown")


def read_anchor(tests_dir: str):
    path = os.path.join(tests_dir, "ref_speedup.txt")
    try:
        text = open(path).read().strip()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return float(text), path
    except OSError:
        pass
    try:
        value = float(json.load(open(MANIFEST))["ref_speedup"])
        return value, MANIFEST
    except Exception:  # noqa: BLE001
        pass
    return 1.0, "default"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--mode", default="candidate")
    ap.add_argument("--profile", default="hidden", choices=["hidden", "dev"])
    ap.add_argument("--tests-dir", required=True)
    ap.add_argument("--harness-rc", type=int, default=0)
    ap.add_argument("--patch-failed", default="")
    args = ap.parse_args()
    log = args.log
    os.makedirs(log, exist_ok=True)

    raw = None
    try:
        raw = json.load(open(args.raw))
    except Exception:  # noqa: BLE001
        raw = None

    hard, errors, notes = [], [], []
    gates = {}
    cases, timing, speedup = [], None, None
    if args.patch_failed:
        hard.append("patch_apply_failed")
        errors.append(f"could not apply {args.patch_failed}")
        gates["patch_ok"] = False
    elif raw is None:
        # the harness never wrote anything: the grader itself is broken
        open(os.path.join(log, "harness_error.txt"), "w").write(
            f"harness wrote no results (rc={args.harness_rc})\n")
        return 3
    else:
        gates.update(raw.get("gates", {}))
        hard += raw.get("hard_fail_reasons", [])
        errors += raw.get("errors", [])
        notes += raw.get("notes", [])
        cases = raw.get("cases", [])
        timing = raw.get("timing")
        speedup = raw.get("speedup")
        if not raw.get("completed"):
            phase = raw.get("phase", "static")
            reason = PHASE_GATE.get(phase, "grader_error")
            if reason == "grader_error" or raw.get("grader_error"):
                open(os.path.join(log, "harness_error.txt"), "w").write(
                    f"harness stopped in phase {phase!r} (rc={args.harness_rc}): "
                    f"{raw.get('grader_error', '')}\n")
                return 3
            why = "timed out" if args.harness_rc in (124, 137) else f"exited rc={args.harness_rc}"
            hard.append(reason)
            gates[GATE_KEY.get(reason, reason)] = False
            errors.append(f"{reason}: the candidate run {why} during the {phase} phase")
            speedup = None

    if not hard and speedup is not None and speedup <= 1.0:
        hard.append("speedup_not_above_baseline")
        gates["speedup_above_baseline"] = False
    elif speedup is not None:
        gates["speedup_above_baseline"] = speedup > 1.0

    reward = None
    ref_speedup = None
    anchor_source = None
    if args.profile == "hidden":
        ref_speedup, anchor_source = read_anchor(args.tests_dir)
        gates["ref_speedup_ok"] = ref_speedup > 1.0
        if ref_speedup <= 1.0:
            hard.append("ref_speedup_invalid")
        if hard or speedup is None:
            reward = 0.0
        elif speedup <= ref_speedup:
            reward = 0.0
        else:
            reward = min(1.0, math.log(speedup / ref_speedup) / math.log(ref_speedup))
        reward = round(max(0.0, reward), 6)

    hard = list(dict.fromkeys(hard))
    n_pass = sum(1 for c in cases if c.get("passed"))
    cv = None
    if timing and timing.get("workloads"):
        cvs = [w["cv"] for w in timing["workloads"] if w.get("cv") is not None]
        cv = max(cvs) if cvs else None
    correctness_ok = not any(h in hard for h in (
        "head_moved", "import_failed", "correctness_failed", "error_contract_failed",
        "patch_apply_failed")) and not any(
        h.startswith(("out_of_scope_edit:", "forbidden_pattern:", "forbidden_runtime:")) for h in hard)

    reward_json = {
        "schema_version": "pesflow_reward_v1",
        "task_id": TASK_ID,
        "task_type": "performance",
        "profile": args.profile,
        "mode": args.mode,
        "reward": reward,
        "speedup": speedup,
        "ref_speedup": ref_speedup,
        "ref_speedup_source": anchor_source,
        "hard_fail_reasons": hard,
        "hard_fails": hard,
        "correctness_ok": correctness_ok,
        "tests": {"passed": n_pass, "total": len(cases)},
        "cv": cv,
        "cv_note": "max over timing workloads of stdev/mean of the per-pair ABBA ratios",
        "actual_hardware_type": cpu_model(),
        "timing": {
            "pairs": (timing or {}).get("pairs", 0),
            "ratios": [r for w in (timing or {}).get("workloads", []) for r in w["ratios"]],
            "workloads": (timing or {}).get("workloads", []),
            "aggregate": "median of per-pair ratios per workload, geometric mean across workloads",
        },
        "gates": gates,
        "errors": errors[:10],
    }
    if notes:
        reward_json["notes"] = notes[:10]

    def dump(name, obj):
        with open(os.path.join(log, name), "w") as fh:
            json.dump(obj, fh, indent=1)

    dump("reward.json", reward_json)
    with open(os.path.join(log, "reward.txt"), "w") as fh:
        fh.write(f"{reward if reward is not None else 0.0}\n")
    dump("verifier_state.json", {"correctness_ok": correctness_ok, "hard_fail_reasons": hard,
                                 "mode": args.mode, "profile": args.profile, "gates": gates})
    dump("correctness_results.json", {"passed": n_pass, "total": len(cases), "cases": cases})
    dump("benchmark_results.json", {"speedup": speedup, "perf_metric": "speedup",
                                    "timing": timing, "cv": cv})
    print(json.dumps(reward_json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
