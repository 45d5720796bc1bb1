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
- after each timed call (end event, full device synchronize, host clock read) a third event
  is recorded on the current stream and the device synchronized again: the device time from
  the end event to that one (the "gap") is, for a call whose work all ran before its end
  event, only the host's synchronize latency;
- the candidate's inputs are copied before each of its calls, and after the call it is
  decided (random.SystemRandom, selection sampling) whether this call is checked: exactly
  CHECKS_PER_WORKLOAD of the pairs (all of them if fewer) are, at positions nobody can know
  before the calls are made. A checked call's output is compared with the reference for its
  own inputs (output_cached) and the inputs with the copy (inputs_mutated);
- side_stream_escape, either rule: (host clock) the candidate's median wall time exceeds
  max(1.5 x its median event time, event time + 0.2 ms); (device gap) its median gap
  exceeds the baseline's median gap in the same pairs + max(0.5 x its median event time,
  0.015 ms): work escaped the timed stream and was still running after the end event;
- beyond_roofline: the candidate's median event time is below 0.9 x the least time the
  bytes and flops of the workload need on this GPU (it skips work).
"""

import math
import random
import statistics

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024
CHECKS_PER_WORKLOAD = 5
# side_stream_escape by the device gap: candidate gap > baseline gap + max(GAP_EVENT_FRACTION x
# candidate event time, GAP_SLACK_MS) (medians over the pairs).
GAP_EVENT_FRACTION = 0.5
GAP_SLACK_MS = 0.015

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


def host_clock_escape(cand_wall_ms, cand_event_ms):
    """The host-clock rule on medians: the call took much longer than its events say."""
    return cand_wall_ms > max(1.5 * cand_event_ms, cand_event_ms + 0.2)


def gap_threshold_ms(base_gaps, cand_events):
    """Largest median candidate gap that passes: baseline gap + max(0.5 x event, 0.015 ms)."""
    return _median(base_gaps) + max(GAP_EVENT_FRACTION * _median(cand_events), GAP_SLACK_MS)


def gap_escape(cand_gaps, base_gaps, cand_events):
    """The device-gap rule: the candidate's work kept running after its end event for longer
    than the honest, single-stream baseline's synchronize latency allows. No data: no verdict."""
    if not cand_gaps or not base_gaps or not cand_events:
        return False
    return _median(cand_gaps) > gap_threshold_ms(base_gaps, cand_events)


class CheckPicker:
    """Picks exactly min(want, total) of `total` calls, uniformly, one decision per call made
    after that call (selection sampling): which calls are checked exists nowhere in advance."""

    def __init__(self, total, want, rng=None):
        self.left = int(total)
        self.need = min(int(want), self.left)
        self.rng = rng if rng is not None else random.SystemRandom()

    def next(self):
        if self.left <= 0:
            return False
        pick = self.need > 0 and self.rng.random() * self.left < self.need
        self.left -= 1
        if pick:
            self.need -= 1
        return pick


def run(cases, reference, base_fn, cand_fn, plan, device, timers):
    Event = timers["torch.cuda.Event"]
    sync = timers["torch.cuda.synchronize"]
    clock = timers["time.perf_counter_ns"]
    record = timers["torch.cuda.Event.record"]
    elapsed = timers["torch.cuda.Event.elapsed_time"]
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

        picker = CheckPicker(pairs, CHECKS_PER_WORKLOAD)
        ratios, tb, tc, wall_c, wall_b, gap_b, gap_c = [], [], [], [], [], [], []
        for p in range(pairs):
            order = ("base", "cand") if p % 2 == 0 else ("cand", "base")
            got = {}
            for side in order:
                slot = next_set()
                fn = base_fn if side == "base" else cand_fn
                before = cases.clone_case(slot) if side == "cand" else None
                scratch.fill_(float(serial[0] % 97))
                sync()
                start = Event(enable_timing=True)
                end = Event(enable_timing=True)
                after_sync = Event(enable_timing=True)
                t0 = clock()
                record(start)
                out = fn(*slot["args"], **slot["kwargs"])
                record(end)
                sync()
                t1 = clock()
                record(after_sync)
                sync()
                ev = elapsed(start, end)
                got[side] = (ev, (t1 - t0) / 1e6, elapsed(start, after_sync) - ev)
                if side == "cand" and picker.next():
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
            eb, wb, gb = got["base"]
            ec, wc, gcand = got["cand"]
            ratios.append(eb / max(ec, 1e-6))
            tb.append(eb)
            tc.append(ec)
            wall_b.append(wb)
            wall_c.append(wc)
            gap_b.append(gb)
            gap_c.append(gcand)

        med = _median(ratios)
        mean = statistics.fmean(ratios)
        cv = statistics.pstdev(ratios) / mean if mean > 0 else float("inf")
        medians.append(med)
        ev_c, w_c = _median(tc), _median(wall_c)
        by_host = host_clock_escape(w_c, ev_c)
        by_gap = gap_escape(gap_c, gap_b, tc)
        escaped = by_host or by_gap
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
            "baseline_gap_ms_median": _median(gap_b), "candidate_gap_ms_median": _median(gap_c),
            "gap_threshold_ms": gap_threshold_ms(gap_b, tc),
            "baseline_gaps_ms": gap_b, "candidate_gaps_ms": gap_c,
            "roofline_ms": bound_ms, "roofline_peak": kind,
            "side_stream_escape": escaped, "side_stream_by_host_clock": by_host, "side_stream_by_gap": by_gap,
            "checked_calls": CHECKS_PER_WORKLOAD if pairs >= CHECKS_PER_WORKLOAD else pairs,
            "beyond_roofline": impossible,
        })
        del pool
        torch.cuda.empty_cache()

    del scratch
    report["speedup"] = math.exp(sum(math.log(max(m, 1e-12)) for m in medians) / len(medians))
    report["cv"] = max(w["cv"] for w in report["workloads"])
    report["aggregate"] = "median of per-pair event-time ratios per workload, geometric mean across workloads"
    return report, sorted(set(fails)), results
