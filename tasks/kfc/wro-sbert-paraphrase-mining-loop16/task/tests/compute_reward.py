"""Combine the static gates and the harness results into the verdict files.

Writes reward.json, reward.txt, verifier_state.json, correctness_results.json
and benchmark_results.json into --log. Exit 0 when reward.json was written;
exit 3 (and grader_error.txt, no reward.json) when the grader itself broke.
"""

import argparse
import json
import math
import os
import re
import sys

GATE_ORDER = [
    "patch_apply_failed", "head_moved", "out_of_scope_edit", "forbidden_pattern",
    "import_failed", "error_contract_failed", "correctness_failed",
    "timing_failed", "speedup_not_above_baseline", "ref_speedup_invalid",
]
MANIFEST = "/opt/verifier-correctness-manifest.json"


def load_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_anchor(tests_dir):
    txt = os.path.join(tests_dir, "ref_speedup.txt")
    try:
        raw = open(txt).read().strip()
        if re.fullmatch(r"[0-9]+(\.[0-9]+)?", raw):
            return float(raw), "tests/ref_speedup.txt"
    except OSError:
        pass
    man = load_json(MANIFEST)
    if isinstance(man, dict):
        try:
            return float(man["ref_speedup"]), MANIFEST
        except (KeyError, TypeError, ValueError):
            pass
    return 1.0, "default"


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.lower().startswith("model name"):
                return "cpu:" + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu:unknown"


def write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        if isinstance(obj, str):
            fh.write(obj)
        else:
            json.dump(obj, fh, indent=2)
    os.replace(tmp, path)


def grader_error(log, text):
    write(os.path.join(log, "grader_error.txt"), text.rstrip() + "\n")
    sys.stderr.write("grader error: %s\n" % text)
    return 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True)
    ap.add_argument("--patch-status", default="ok")
    ap.add_argument("--gates", required=True)
    ap.add_argument("--harness", required=True)
    ap.add_argument("--harness-rc", type=int, default=-1)
    ap.add_argument("--harness-log", default="")
    ap.add_argument("--log", required=True)
    ap.add_argument("--tests-dir", required=True)
    args = ap.parse_args()

    dev = os.path.exists(os.path.join(args.tests_dir, "DEV_COPY"))
    workloads = load_json(os.path.join(args.tests_dir, "workloads.json")) or {}
    task_id = workloads.get("task_id", "kfc/wro-sbert-paraphrase-mining-loop16")
    n_total = (len(workloads.get("cases", [])) + len(workloads.get("error_cases", [])) + 3)

    hard = []
    evaluated = set()
    notes = []

    evaluated.add("patch_apply_failed")
    if args.patch_status != "ok":
        hard.append("patch_apply_failed")
        notes.append("patch status: " + args.patch_status)

    static = None
    if not hard:
        static = load_json(args.gates)
        if static is None:
            return grader_error(args.log, "static gates produced no result")
        evaluated.update(["head_moved", "out_of_scope_edit", "forbidden_pattern"])
        hard += static["hard_fail_reasons"]

    harness = None
    case_records = []
    speedup = None
    timing = None
    if not hard:
        harness = load_json(args.harness)
        tail = ""
        if args.harness_log:
            try:
                tail = open(args.harness_log, errors="replace").read()[-1500:]
            except OSError:
                tail = ""
        if harness is None or harness.get("stage") in ("start", "reference", "baseline_load"):
            stage = harness.get("stage") if harness else "none"
            return grader_error(args.log, "harness broke before the candidate was imported "
                                "(stage %s, rc %d)\n%s" % (stage, args.harness_rc, tail))
        stage = harness["stage"]
        died = stage != "done"
        if died:
            notes.append("harness process ended during stage %r (rc %d)%s" % (
                stage, args.harness_rc, "; time limit hit" if args.harness_rc in (124, 137) else ""))
        evaluated.add("import_failed")
        if harness.get("import_ok") is not True:
            hard.append("import_failed")
            notes.append("import: " + (harness.get("import_error") or "process died while importing"))
        else:
            evaluated.update(["error_contract_failed", "correctness_failed"])
            case_records = (
                [dict(r, group="error_contract") for r in harness.get("error_cases", [])]
                + [dict(r, group="case") for r in harness.get("cases", [])]
                + [dict(r, group="cache_probe") for r in harness.get("cache_probe", [])]
            )
            if any(not r["passed"] for r in harness.get("error_cases", [])) or (died and stage == "error_contract"):
                hard.append("error_contract_failed")
            bad_cases = [r for r in case_records if r["group"] != "error_contract" and not r["passed"]]
            if bad_cases or (died and stage in ("correctness", "cache_probe")):
                hard.append("correctness_failed")
        # the runtime guard: forbidden_runtime:<what>, and background_process
        for h in harness.get("hard_fail_reasons") or []:
            if isinstance(h, str) and h not in hard:
                hard.append(h)
        if harness.get("import_ok") is True:
            if not hard:
                evaluated.add("timing_failed")
                timing = harness.get("timing")
                if timing is None:
                    hard.append("timing_failed")
                    notes.append("timing: " + (harness.get("timing_error") or "harness died while timing"))
                else:
                    speedup = float(timing["speedup"])
                    evaluated.add("speedup_not_above_baseline")
                    if not speedup > 1.0:
                        hard.append("speedup_not_above_baseline")

    ref, ref_source = (None, None)
    if not dev:
        ref, ref_source = read_anchor(args.tests_dir)
        evaluated.add("ref_speedup_invalid")
        if not ref > 1.0:
            hard.append("ref_speedup_invalid")

    if dev or hard or speedup is None:
        reward = None if dev else 0.0
    elif speedup <= ref:
        reward = 0.0
    else:
        reward = min(1.0, math.log(speedup / ref) / math.log(ref))

    gates = {}
    for g in GATE_ORDER:
        if g == "ref_speedup_invalid" and dev:
            continue
        failed = any(h == g or h.startswith(g + ":") for h in hard) or (
            g == "forbidden_pattern" and any(h.startswith("forbidden_runtime:") for h in hard))
        gates[g] = (g in evaluated) and not failed
    skipped = [g for g in gates if g not in evaluated]

    passed = sum(1 for r in case_records if r["passed"])
    correctness_ok = (harness is not None and harness.get("import_ok") is True
                      and not any(h in ("import_failed", "error_contract_failed", "correctness_failed",
                                        "patch_apply_failed", "head_moved") or
                                  h.startswith(("out_of_scope_edit", "forbidden_pattern", "forbidden_runtime"))
                                  for h in hard))

    reward_obj = {
        "schema_version": "pesflow.reward.v1",
        "task_id": task_id,
        "mode": args.mode,
        "dev_engine": dev,
        "reward": reward,
        "speedup": speedup,
        "ref_speedup": ref,
        "ref_speedup_source": ref_source,
        "hard_fail_reasons": hard,
        "hard_fails": list(hard),
        "correctness_ok": correctness_ok,
        "tests": {"passed": passed, "total": n_total},
        "cv": timing["cv"] if timing else None,
        "actual_hardware_type": cpu_model(),
        "timing": {
            "pairs": timing["pairs"] if timing else 0,
            "ratios": timing["ratios"] if timing else [],
            "per_workload": [
                {k: w[k] for k in ("name", "speedup", "cv", "baseline_ms_median", "candidate_ms_median")}
                for w in (timing["workloads"] if timing else [])
            ],
            "aggregate": "geometric mean over workloads of the median per-pair ratio t_base/t_cand",
        },
        "gates": gates,
        "gates_skipped": skipped,
        "notes": notes,
    }
    if dev:
        for k in ("reward", "ref_speedup", "ref_speedup_source"):
            reward_obj.pop(k)
    log = args.log
    write(os.path.join(log, "correctness_results.json"),
          {"task_id": task_id, "mode": args.mode, "cases": case_records,
           "passed": passed, "total": n_total})
    write(os.path.join(log, "benchmark_results.json"),
          {"task_id": task_id, "mode": args.mode, "speedup": speedup,
           "timing": timing, "timing_error": harness.get("timing_error") if harness else None})
    write(os.path.join(log, "verifier_state.json"),
          {"correctness_ok": correctness_ok, "hard_fail_reasons": hard, "mode": args.mode})
    if not dev:
        write(os.path.join(log, "reward.txt"), "%.6f\n" % reward)
    write(os.path.join(log, "reward.json"), reward_obj)
    return 0


if __name__ == "__main__":
    sys.exit(main())
