"""Dynamic part of the paraphrase-mining grader.

Runs in its own process (started by test.sh after the static gates passed):
precomputes the expected answers with the independent reference, loads the
frozen baseline, imports the candidate, then checks the error contract, the
correctness cases and the cache probe, and finally times candidate against
baseline in alternating (ABBA) pairs. Results go to the JSON file named by
$PM_HARNESS_OUT, rewritten after every stage.
"""

import time as _time

_CLOCK = _time.perf_counter_ns  # private reference, taken before any candidate code runs

import gc
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import pm_gen  # noqa: E402
import pm_reference  # noqa: E402

OUT_PATH = os.environ.pop("PM_HARNESS_OUT")
REPO = os.path.realpath(os.environ.pop("PM_REPO", "/app/repo"))
BASELINE_DIR = os.environ.pop("PM_BASELINE_DIR", "/opt/verifier-baseline")
WORKLOADS = json.load(open(os.path.join(HERE, "workloads.json")))
FUNC = WORKLOADS["function"]
SCORE_TOL = 1e-9

state = {
    "stage": "start",
    "import_ok": None,
    "import_error": None,
    "error_cases": [],
    "cases": [],
    "cache_probe": [],
    "timing": None,
    "timing_error": None,
}


def dump():
    tmp = OUT_PATH + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(state, fh, indent=1)
    os.replace(tmp, OUT_PATH)


def short_exc(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return text[:300]


def compare(got, expected):
    """(ok, message) for a candidate answer against the reference answer."""
    if not isinstance(got, list):
        return False, "result must be a list, got %s" % type(got).__name__
    if len(got) != len(expected):
        return False, "returned %d pairs, expected %d" % (len(got), len(expected))
    for pos, (entry, exp) in enumerate(zip(got, expected)):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            return False, "entry %d is not a [score, i, j] triple" % pos
        score, i, j = entry
        for name, v in (("i", i), ("j", j)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                return False, "entry %d: %s must be an int, got %s" % (pos, name, type(v).__name__)
        if isinstance(score, (bool, np.bool_)) or not isinstance(score, (float, int, np.floating, np.integer)):
            return False, "entry %d: score must be a float, got %s" % (pos, type(score).__name__)
        if int(i) != exp[1] or int(j) != exp[2]:
            return False, "entry %d: pair (%d, %d) differs from the expected pair" % (pos, int(i), int(j))
        s = float(score)
        if not (abs(s - exp[0]) <= SCORE_TOL):
            return False, "entry %d: score %r differs from the expected score" % (pos, s)
    return True, ""


def same_input(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def case_spec(case):
    return {k: v for k, v in case.items() if k not in ("name", "top_k", "max_pairs", "timing")}


def main():
    cases = WORKLOADS["cases"]
    probe = WORKLOADS["cache_probe"]

    # 1. Expected answers, computed before any candidate code is loaded.
    state["stage"] = "reference"
    dump()
    expected = {}
    for case in cases:
        x = pm_gen.make(case_spec(case))
        expected[case["name"]] = pm_reference.mine(x, case["top_k"], case["max_pairs"])
    probe_inputs = {}
    for key in ("first", "second", "mutated"):
        spec = dict(probe[key], n=probe["n"], d=probe["d"])
        probe_inputs[key] = spec
        expected["probe:" + key] = pm_reference.mine(pm_gen.make(spec), probe["top_k"], probe["max_pairs"])

    # 2. Frozen baseline (speed denominator) under a private module name. It
    #    imports its out-of-scope helper from the repository.
    state["stage"] = "baseline_load"
    dump()
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    base_path = os.path.join(BASELINE_DIR, os.path.basename(WORKLOADS["scope_file"]))
    spec = importlib.util.spec_from_file_location("_pm_frozen_baseline_paraphrase", base_path)
    base_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base_mod)
    base_fn = getattr(base_mod, FUNC)

    # 3. Candidate import, from the repository only.
    state["stage"] = "import"
    dump()
    while HERE in sys.path:
        sys.path.remove(HERE)
    try:
        mod = importlib.import_module(WORKLOADS["scope_module"])
        mod_file = os.path.realpath(getattr(mod, "__file__", "") or "")
        if not mod_file.startswith(REPO + os.sep):
            raise ImportError("module resolved outside %s: %s" % (REPO, mod_file))
        cand_fn = getattr(mod, FUNC)
        if not callable(cand_fn):
            raise ImportError("%s is not callable" % FUNC)
    except BaseException as exc:  # noqa: BLE001 - anything here is an import failure
        state["import_ok"] = False
        state["import_error"] = short_exc(exc)
        state["stage"] = "done"
        dump()
        return
    state["import_ok"] = True

    # 4. Error contract: non-2-D inputs must raise ValueError.
    state["stage"] = "error_contract"
    dump()
    for ec in WORKLOADS.get("error_cases", []):
        bad = np.ones(ec["shape"], dtype=np.float32)
        rec = {"name": ec["name"], "passed": False, "error": ""}
        try:
            cand_fn(bad, top_k=ec["top_k"], max_pairs=ec["max_pairs"])
            rec["error"] = "no exception raised; ValueError expected"
        except ValueError:
            rec["passed"] = True
        except BaseException as exc:  # noqa: BLE001
            rec["error"] = "expected ValueError, got " + short_exc(exc)
        state["error_cases"].append(rec)
    dump()

    # 5. Correctness on fresh inputs.
    state["stage"] = "correctness"
    dump()
    for case in cases:
        x = pm_gen.make(case_spec(case))
        pristine = x.copy(order="K")
        rec = {"name": case["name"], "passed": False, "error": ""}
        try:
            got = cand_fn(x, top_k=case["top_k"], max_pairs=case["max_pairs"])
            ok, msg = compare(got, expected[case["name"]])
            if ok and not same_input(x, pristine):
                ok, msg = False, "the input array was modified"
            rec["passed"], rec["error"] = ok, msg
        except BaseException as exc:  # noqa: BLE001
            rec["error"] = "raised " + short_exc(exc)
        state["cases"].append(rec)
        dump()

    # 6. Cache probe: same shape, different data, and the same object mutated.
    state["stage"] = "cache_probe"
    dump()
    kw = {"top_k": probe["top_k"], "max_pairs": probe["max_pairs"]}
    first = pm_gen.make(probe_inputs["first"])
    second = pm_gen.make(probe_inputs["second"])
    steps = [
        ("probe_first", first, "probe:first"),
        ("probe_second_same_shape", second, "probe:second"),
        ("probe_first_mutated_in_place", first, "probe:mutated"),
    ]
    for name, arr, exp_key in steps:
        rec = {"name": name, "passed": False, "error": ""}
        try:
            if name == "probe_first_mutated_in_place":
                arr[...] = pm_gen.make(probe_inputs["mutated"])
            pristine = arr.copy(order="K")
            got = cand_fn(arr, **kw)
            ok, msg = compare(got, expected[exp_key])
            if ok and not same_input(arr, pristine):
                ok, msg = False, "the input array was modified"
            rec["passed"], rec["error"] = ok, msg
        except BaseException as exc:  # noqa: BLE001
            rec["error"] = "raised " + short_exc(exc)
        state["cache_probe"].append(rec)
    dump()

    all_ok = (all(r["passed"] for r in state["error_cases"])
              and all(r["passed"] for r in state["cases"])
              and all(r["passed"] for r in state["cache_probe"]))
    if not all_ok:
        state["stage"] = "done"
        dump()
        return

    # 7. ABBA timing against the frozen baseline.
    state["stage"] = "timing"
    dump()
    try:
        state["timing"] = run_timing(base_fn, cand_fn, expected)
    except BaseException as exc:  # noqa: BLE001
        state["timing_error"] = short_exc(exc)
        state["timing_trace"] = traceback.format_exc()[-2000:]
    state["stage"] = "done"
    dump()


def timed_call(fn, x0, top_k, max_pairs):
    x = x0.copy(order="K")
    gc.collect()
    gc.disable()
    try:
        t0 = _CLOCK()
        fn(x, top_k=top_k, max_pairs=max_pairs)
        t1 = _CLOCK()
    finally:
        gc.enable()
    return t1 - t0


def run_timing(base_fn, cand_fn, expected):
    """ABBA pairs, interleaved round-robin over the timing workloads so that a
    burst of machine noise is spread over all of them instead of one."""
    n_pairs = int(WORKLOADS.get("timing_pairs", 9))
    work = []
    for case in WORKLOADS["cases"]:
        if not case.get("timing"):
            continue
        x0 = pm_gen.make(case_spec(case))
        k, m = case["top_k"], case["max_pairs"]
        # Warm-up, one call each; the candidate's answer is checked again here.
        base_fn(x0.copy(order="K"), top_k=k, max_pairs=m)
        ok, msg = compare(cand_fn(x0.copy(order="K"), top_k=k, max_pairs=m), expected[case["name"]])
        if not ok:
            raise AssertionError("warm-up answer wrong on %s: %s" % (case["name"], msg))
        work.append({"name": case["name"], "x0": x0, "k": k, "m": m,
                     "base_ns": [], "cand_ns": [], "ratios": []})
    for p in range(n_pairs):
        for w in work:
            x0, k, m = w["x0"], w["k"], w["m"]
            if p % 2 == 0:
                tb = timed_call(base_fn, x0, k, m)
                tc = timed_call(cand_fn, x0, k, m)
            else:
                tc = timed_call(cand_fn, x0, k, m)
                tb = timed_call(base_fn, x0, k, m)
            tc = max(tc, 1)
            w["base_ns"].append(tb)
            w["cand_ns"].append(tc)
            w["ratios"].append(tb / tc)
    per_workload = []
    for w in work:
        ratios = w["ratios"]
        mean = statistics.fmean(ratios)
        cv = statistics.pstdev(ratios) / mean if mean > 0 else float("inf")
        per_workload.append({
            "name": w["name"],
            "pairs": n_pairs,
            "ratios": ratios,
            "speedup": statistics.median(ratios),
            "cv": cv,
            "baseline_ms_median": statistics.median(w["base_ns"]) / 1e6,
            "candidate_ms_median": statistics.median(w["cand_ns"]) / 1e6,
        })
    speedup = math.exp(statistics.fmean(math.log(w["speedup"]) for w in per_workload))
    return {
        "speedup": speedup,
        "cv": statistics.fmean(w["cv"] for w in per_workload),
        "pairs": sum(w["pairs"] for w in per_workload),
        "ratios": [r for w in per_workload for r in w["ratios"]],
        "workloads": per_workload,
    }


if __name__ == "__main__":
    main()
