"""GPU timing for the grader: ABBA pairs against the frozen baseline, with integrity checks.

Per timing workload:
- a pool of input sets is generated on the GPU; every call takes the next set in the
  cycle and first rewrites it in place with new values, so no call sees the inputs of
  the call before it and nothing keyed on tensor identity can serve an old answer;
- both sides are warmed up (3 calls each), then synchronized;
- before every timed call 256 MiB of scratch is written (H200 L2 is 60 MB) and the device
  synchronized; the call is timed with CUDA events on the current stream, and by the host
  clock from just before the call to after a full device synchronize;
- pair i runs (baseline, candidate) when i is even and (candidate, baseline) when odd;
  ratio = t_baseline / t_candidate from the event times; speedup = median ratio per
  workload, geometric mean across workloads;
- the candidate's output of at least 3 timed calls is checked against the reference for
  that call's own inputs (output_cached) and those inputs against a copy taken before the
  call (inputs_mutated);
- side_stream_escape: the candidate's median wall time exceeds max(1.5 x its median event
  time, event time + 0.2 ms): work escaped the timed stream;
- beyond_roofline: the candidate's median event time is below 0.9 x the least time the
  bytes and flops of the workload need on this GPU (it skips work).
"""

import math
import statistics

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024

# Peak rates by device name: bytes/s of HBM, FLOP/s of plain fp32, tf32 and fp16/bf16
# tensor-core math (dense). Looked up by substring, most specific first.
PEAKS = [
    ("H200", {"bw": 4.8e12, "fp32": 67e12, "tf32": 495e12, "half": 989e12}),
    ("H100", {"bw": 3.35e12, "fp32": 67e12, "tf32": 495e12, "half": 989e12}),
    ("H20", {"bw": 4.0e12, "fp32": 44e12, "tf32": 74e12, "half": 148e12}),
]
UNKNOWN_PEAK = {k: max(p[k] for _, p in PEAKS) for k in ("bw", "fp32", "tf32", "half")}


def peaks_for(name):
    for key, peaks in PEAKS:
        if key in (name or ""):
            return key, peaks
    return "unknown (largest known peaks)", UNKNOWN_PEAK


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def run(cases, reference, base_fn, cand_fn, plan, device, timers):
    Event = timers["torch.cuda.Event"]
    sync = timers["torch.cuda.synchronize"]
    clock = timers["time.perf_counter_ns"]
    pairs = max(15, int(plan.get("timing_pairs", 15)))
    pool_size = max(4, int(plan.get("pool", 6)))
    gpu_name = torch.cuda.get_device_name()
    peak_key, peaks = peaks_for(gpu_name)

    report = {"ran": True, "pairs": pairs, "pool": pool_size, "gpu": gpu_name, "peak_table": peak_key,
              "workloads": [], "ratios": []}
    fails, results = [], []
    medians = []
    scratch = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)

    for spec in plan["timing"]:
        seed0 = int(spec["seed"]) * 1000
        pool = [cases.build(spec, device, seed0 + i) for i in range(pool_size)]
        serial = [0]

        def next_set():
            slot = pool[serial[0] % pool_size]
            serial[0] += 1
            cases.refresh_(slot, spec, device, seed0 + 500 + serial[0])
            return slot

        for _ in range(3):
            base_fn(*next_set()["args"])
            cand_fn(*next_set()["args"])
        sync()

        check_at = {0, pairs // 2, pairs - 1}
        ratios, tb, tc, wall_c, wall_b = [], [], [], [], []
        for p in range(pairs):
            order = ("base", "cand") if p % 2 == 0 else ("cand", "base")
            got = {}
            for side in order:
                slot = next_set()
                fn = base_fn if side == "base" else cand_fn
                checked = side == "cand" and p in check_at
                before = cases.clone_case(slot) if checked else None
                scratch.fill_(float(serial[0] % 97))
                sync()
                start = Event(enable_timing=True)
                end = Event(enable_timing=True)
                t0 = clock()
                start.record()
                out = fn(*slot["args"], **slot["kwargs"])
                end.record()
                sync()
                t1 = clock()
                got[side] = (start.elapsed_time(end), (t1 - t0) / 1e6)
                if checked:
                    msg = cases.check_output(out, before, reference)
                    results.append({"name": f"timed_call:{spec['name']}:pair{p}", "kind": "timed_call",
                                    "passed": msg is None, "message": msg})
                    if msg is not None:
                        fails.append("output_cached")
                    for i, (x, y) in enumerate(zip(cases.tensors_of(before), cases.tensors_of(slot))):
                        if not torch.equal(x, y):
                            fails.append("inputs_mutated")
                            results.append({"name": f"timed_call_inputs:{spec['name']}:pair{p}",
                                            "kind": "timed_call", "passed": False,
                                            "message": f"input #{i} was modified in place"})
                            break
                    del before
                del out
            eb, wb = got["base"]
            ec, wc = got["cand"]
            ratios.append(eb / max(ec, 1e-6))
            tb.append(eb)
            tc.append(ec)
            wall_b.append(wb)
            wall_c.append(wc)

        med = _median(ratios)
        mean = statistics.fmean(ratios)
        cv = statistics.pstdev(ratios) / mean if mean > 0 else float("inf")
        medians.append(med)
        ev_c, w_c = _median(tc), _median(wall_c)
        escaped = w_c > max(1.5 * ev_c, ev_c + 0.2)
        if escaped:
            fails.append("side_stream_escape")
        nbytes, flops, kind = cases.roofline(spec)
        bound_ms = max(nbytes / peaks["bw"], flops / peaks[kind]) * 1e3
        impossible = ev_c < 0.9 * bound_ms
        if impossible:
            fails.append("beyond_roofline")
        report["ratios"].extend(ratios)
        report["workloads"].append({
            "name": spec["name"], "spec": {k: v for k, v in spec.items() if k != "name"},
            "ratios": ratios, "median_ratio": med, "cv": cv,
            "baseline_ms_median": _median(tb), "candidate_ms_median": ev_c,
            "baseline_wall_ms_median": _median(wall_b), "candidate_wall_ms_median": w_c,
            "roofline_ms": bound_ms, "roofline_peak": kind,
            "side_stream_escape": escaped, "beyond_roofline": impossible,
        })
        del pool
        torch.cuda.empty_cache()

    del scratch
    report["speedup"] = math.exp(sum(math.log(max(m, 1e-12)) for m in medians) / len(medians))
    report["cv"] = max(w["cv"] for w in report["workloads"])
    report["aggregate"] = "median of per-pair event-time ratios per workload, geometric mean across workloads"
    return report, sorted(set(fails)), results
