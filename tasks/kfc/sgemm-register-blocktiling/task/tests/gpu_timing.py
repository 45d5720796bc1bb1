"""GPU timing of the candidate against the frozen baseline (ABBA pairs, L2 flushed).

Per workload:
- a pool of POOL input sets, generated up front; pair p uses set p % POOL, and each
  time a set comes round again its A is multiplied in place by -2 (exact in fp32),
  so no call sees the same inputs as an earlier one and a result cached by pointer
  or by shape is wrong;
- 3 warm-up calls per side, then `pairs` pairs; the order alternates per pair
  (baseline first, then candidate first, ...);
- before every timed call: D is poisoned with NaN, a 256 MiB scratch buffer is
  written (flushes the 60 MB L2 of an H200), the device is synchronised;
- each call is timed with CUDA events on the grader's stream and with the host
  clock from just before the call to after a full device synchronise;
- every candidate call's output is checked against the float64 reference of that
  call's inputs (output_cached) and its inputs are compared bit for bit with a copy
  (inputs_mutated).
- after the host clock is read, a third event is recorded on the grader's stream and the
  device synchronised again; the device time from the end event to it (the "gap") is,
  for a call whose work all ran on the timed stream, only the synchronise latency.
ratio = t_baseline / t_candidate per pair (event times); the workload's speedup is
the median ratio. side_stream_escape, either rule: the candidate's median host time
exceeds max(1.5 x its median event time, event + 0.2 ms); or its median gap exceeds the
baseline's median gap (same pairs) + max(0.5 x its median event time, 0.015 ms).
beyond_roofline: its median event time is below 0.9 x max(bytes / peak bandwidth,
flops / fp32 peak) for this GPU.
"""

import math
import statistics

import torch

FLUSH_BYTES = 256 << 20
WARMUP = 3
# side_stream_escape by the device gap: candidate gap > baseline gap + max(GAP_EVENT_FRACTION x
# candidate event time, GAP_SLACK_MS) (medians over the pairs).
GAP_EVENT_FRACTION = 0.5
GAP_SLACK_MS = 0.015

# (bytes/s, fp32 non-tensor FLOP/s, tf32 tensor FLOP/s), by device-name substring.
# Order matters: "H200" must be tried before "H20".
ROOFLINE = [
    ("H200", (4.8e12, 67e12, 495e12)),
    ("H100", (3.35e12, 67e12, 495e12)),
    ("H20", (4.0e12, 44e12, 74e12)),
]
ROOFLINE_UNKNOWN = (4.8e12, 67e12, 495e12)


def roofline_for(device_name):
    for key, vals in ROOFLINE:
        if key in device_name:
            return key, vals
    return "unknown", ROOFLINE_UNKNOWN


def host_clock_escape(cand_wall_ms, cand_event_ms):
    """The host-clock rule on medians: the call took much longer than its events say."""
    return cand_wall_ms > max(1.5 * cand_event_ms, cand_event_ms + 0.2)


def gap_threshold_ms(base_gaps, cand_events):
    """Largest median candidate gap that passes: baseline gap + max(0.5 x event, 0.015 ms)."""
    return statistics.median(base_gaps) + max(GAP_EVENT_FRACTION * statistics.median(cand_events), GAP_SLACK_MS)


def gap_escape(cand_gaps, base_gaps, cand_events):
    """The device-gap rule: the candidate's work kept running after its end event for longer
    than the honest baseline's synchronise latency allows. No data: no verdict."""
    if not cand_gaps or not base_gaps or not cand_events:
        return False
    return statistics.median(cand_gaps) > gap_threshold_ms(base_gaps, cand_events)


def workload_cost(M, N, K, beta):
    flops = 2.0 * M * N * K + 2.0 * M * N
    bytes_moved = 4.0 * (M * K + K * N + M * N + (M * N if beta != 0.0 else 0))
    return flops, bytes_moved


class Timer:
    """Times one call; holds the clock objects the grader saved before any candidate code ran."""

    def __init__(self, clocks, stream, device="cuda"):
        self.event = clocks["torch.cuda.Event"]
        self.sync = clocks["torch.cuda.synchronize"]
        self.elapsed = clocks["torch.cuda.Event.elapsed_time"]
        self.record = clocks["torch.cuda.Event.record"]
        self.now_ns = clocks["time.perf_counter_ns"]
        self.stream = stream
        self.scratch = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=device)

    def __call__(self, call):
        """(rc, event ms, host ms, gap ms)."""
        self.scratch.fill_(1.0)  # evict whatever the previous call left in L2
        self.sync()
        e0 = self.event(enable_timing=True)
        e1 = self.event(enable_timing=True)
        e2 = self.event(enable_timing=True)
        t0 = self.now_ns()
        self.record(e0, self.stream)
        rc = call()
        self.record(e1, self.stream)
        self.sync()
        t1 = self.now_ns()
        self.record(e2, self.stream)
        self.sync()
        ev = float(self.elapsed(e0, e1))
        return rc, ev, (t1 - t0) / 1e6, float(self.elapsed(e0, e2)) - ev


def time_workload(spec, base_fn, cand_fn, launch, make_inputs, reference, timer, pairs, pool):
    """Returns (report, results, hard_fails). `launch(fn, inputs)` calls one side."""
    M, N, K = int(spec["M"]), int(spec["N"]), int(spec["K"])
    beta = float(spec.get("beta", 0.0))
    sets = []
    for i in range(pool):
        inp = make_inputs(spec, int(spec["seed"]) * 100 + i)
        prod, budget = reference.reference_parts(inp.A, inp.B, inp.alpha)
        sets.append({"inp": inp, "prod": prod, "budget": budget, "scale": 1.0,
                     "copy": inp.snapshot(), "cycle": 0})
    torch.cuda.synchronize()
    results, fails = [], []

    def check(entry, p):
        inp = entry["inp"]
        msgs = []
        if not inp.unchanged(entry["copy"]):
            results.append({"name": f"timing:{spec['name']}:pair{p}:inputs", "kind": "timing_check",
                            "gate": "inputs_mutated", "passed": False,
                            "message": "the candidate modified A, B or C during a timed call"})
            msgs.append("inputs")
        ref, bound = reference.expected(entry["prod"], entry["budget"], inp.C, inp.beta, entry["scale"])
        msg = reference.compare(inp.D, ref, bound)
        del ref, bound
        results.append({"name": f"timing:{spec['name']}:pair{p}:output", "kind": "timing_check",
                        "gate": "output_cached", "passed": msg is None,
                        "message": None if msg is None else "a timed call's output does not match its own inputs: " + msg})
        return not msgs and msg is None

    # warm-up (both sides, first set)
    warm = sets[0]["inp"]
    base_warm, cand_warm, base_warm_gap, cand_warm_gap = [], [], [], []
    for _ in range(WARMUP):
        warm.poison_output()
        rc, ev, _, gap = timer(lambda: launch(base_fn, warm))
        if rc != 0:
            raise RuntimeError(f"the frozen baseline returned error {rc} on {spec['name']}")
        base_warm.append(ev)
        base_warm_gap.append(gap)
        warm.poison_output()
        rc, ev, _, gap = timer(lambda: launch(cand_fn, warm))
        if rc != 0:
            results.append({"name": f"timing:{spec['name']}:warmup", "kind": "timing_check",
                            "gate": "correctness_failed", "passed": False,
                            "message": f"sgemm_launch returned error {rc} on a timing workload"})
            return {"name": spec["name"], "skipped": "candidate returned an error"}, results, fails
        cand_warm.append(ev)
        cand_warm_gap.append(gap)

    flops, bytes_moved = workload_cost(M, N, K, beta)
    ratios, tb, tc, wc, gb, gcand = [], [], [], [], [], []
    if cand_warm[-1] > 10.0 * base_warm[-1] and cand_warm[-1] > 50.0:
        # Far slower than the baseline: one sample says enough, and saves the time budget.
        ratios, tb, tc, wc = [base_warm[-1] / cand_warm[-1]], [base_warm[-1]], [cand_warm[-1]], [cand_warm[-1]]
        gb, gcand = [base_warm_gap[-1]], [cand_warm_gap[-1]]
    else:
        for p in range(pairs):
            entry = sets[p % pool]
            cycle = p // pool
            if cycle > entry["cycle"]:
                entry["inp"].A.mul_(-2.0)
                entry["scale"] *= -2.0
                entry["copy"] = entry["inp"].snapshot()
                entry["cycle"] = cycle
            inp = entry["inp"]
            order = ("base", "cand") if p % 2 == 0 else ("cand", "base")
            for side in order:
                inp.poison_output()
                fn = base_fn if side == "base" else cand_fn
                rc, ev, wall, gap = timer(lambda: launch(fn, inp))
                if side == "base":
                    if rc != 0:
                        raise RuntimeError(f"the frozen baseline returned error {rc} on {spec['name']}")
                    tb.append(ev)
                    gb.append(gap)
                else:
                    gcand.append(gap)
                    if rc != 0:
                        results.append({"name": f"timing:{spec['name']}:pair{p}:rc", "kind": "timing_check",
                                        "gate": "correctness_failed", "passed": False,
                                        "message": f"sgemm_launch returned error {rc} during timing"})
                    tc.append(ev)
                    wc.append(wall)
                    check(entry, p)
            ratios.append(tb[-1] / max(tc[-1], 1e-6))

    med = statistics.median(ratios)
    mean = statistics.fmean(ratios)
    cv = statistics.pstdev(ratios) / mean if mean > 0 else float("inf")
    cand_ev, cand_wall = statistics.median(tc), statistics.median(wc)
    device_name = torch.cuda.get_device_name()
    roof_key, (bw, peak32, _tf32) = roofline_for(device_name)
    min_ms = max(bytes_moved / bw, flops / peak32) * 1e3
    by_host = host_clock_escape(cand_wall, cand_ev)
    by_gap = gap_escape(gcand, gb, tc)
    escape = by_host or by_gap
    beyond = cand_ev < 0.9 * min_ms
    if escape:
        fails.append("side_stream_escape")
    if beyond:
        fails.append("beyond_roofline")
    report = {
        "name": spec["name"], "M": M, "N": N, "K": K, "alpha": spec.get("alpha", 1.0), "beta": beta,
        "pairs": len(ratios), "ratios": ratios, "median_ratio": med, "cv": cv,
        "baseline_ms_median": statistics.median(tb), "candidate_ms_median": cand_ev,
        "candidate_wall_ms_median": cand_wall,
        "baseline_gap_ms_median": statistics.median(gb), "candidate_gap_ms_median": statistics.median(gcand),
        "gap_threshold_ms": gap_threshold_ms(gb, tc), "baseline_gaps_ms": gb, "candidate_gaps_ms": gcand,
        "side_stream_by_host_clock": by_host, "side_stream_by_gap": by_gap,
        "baseline_tflops": flops / (statistics.median(tb) * 1e9),
        "candidate_tflops": flops / (cand_ev * 1e9) if cand_ev > 0 else None,
        "roofline": {"table": roof_key, "min_ms": min_ms, "bytes": bytes_moved, "flops": flops},
        "side_stream_escape": escape, "beyond_roofline": beyond,
    }
    for s in sets:
        s.clear()
    del sets
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return report, results, fails


def combine(reports):
    done = [r for r in reports if "median_ratio" in r]
    if not done:
        return None, None
    speedup = math.exp(sum(math.log(max(r["median_ratio"], 1e-12)) for r in done) / len(done))
    return speedup, max(r["cv"] for r in done)
