"""What a candidate's profile means, for the model (search.feedback engineer): where its time goes,
against the grading machine's ceilings (evaluator/ceilings.py), and the one thing that limits it.

The figures come from the trust probe's last step (evaluator/trust/inside/pesflow_profile.py): a
dev grading's kept calls replayed under Nsight Compute, torch.profiler or cProfile, in the
grading's sandbox, after the grader, so no figure of the grading moves. Here they become a few
lines and a `limiter`, one of LIMITERS, that a model (and `loop.roofline_stop`) can act on.

A package whose score is a count (instructions, bytes, ops, recompiles: its task.toml says so,
evaluator/trust/watch.py `figure_kind`) gets no timing profile: time is not what it scores. It
gets one line, what is counted and the dev grading's own baseline and candidate figures.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.dev_details import DEV_PRODUCTS
from evaluator.trust.watch import DIAGNOSED, WATCHED, figure_kind, metric_is_timed

if TYPE_CHECKING:
    from evaluator.task import Task

# what bounds a candidate, as the profile tells it
LIMITERS = {
    "memory": "memory bandwidth: move fewer bytes (fuse, keep data on chip, narrower types)",
    "compute": "compute throughput: fewer or cheaper operations, tensor cores, a better algorithm",
    "latency": "neither bandwidth nor compute near a ceiling: more parallel work per kernel, "
               "higher occupancy, fewer stalls",
    "launch": "many short kernels, the GPU waiting on their launches: fuse them, or capture the sequence (CUDA graphs)",
    "host": "the GPU waits on host work that is not launches: Python, synchronizations or copies between kernels",
    "python": "the candidate's own Python code (the interpreter): vectorize, move loops into "
              "native code, or change the algorithm",
    "native": "native calls (builtins, numpy, torch): fewer or larger calls, less data, or a better algorithm",
    "library": "Python outside the candidate (libraries it calls): call them less, or differently",
}
BOUND_SHARE = 0.5  # a ceiling's share at which it is what bounds a kernel (torch.profiler's estimate)
NCU_BOUND_PCT = 60.0  # Nsight Compute's throughput, % of peak, at which a unit is the bound
SHORT_KERNEL_SEC = 20e-6  # a kernel this short costs about what launching it does
MANY_KERNELS = 8  # launches a call needs before their overhead can be what bounds it
# The host time one launch costs through a Python framework (an op's dispatch, a Triton
# launcher): a GPU idle for no more than this per kernel is waiting on launches, not on host work.
LAUNCH_GAP_SEC = 50e-6
IDLE_SHARE = 0.5  # the GPU idle this share of a call: what it waits on bounds the call, not its kernels
PROFILE_FILE = "profile.json"


@dataclass(frozen=True)
class Metric:
    """What a package scores, from its own declarations: `timed` (the format's default, a time
    ratio) or `counted`; `name` the declaration that says what (metric_kind first)."""

    kind: str
    name: str | None = None

    @property
    def counted(self) -> bool:
        return self.kind == "counted"

    @classmethod
    def declared(cls, metric_kind: str | None, timing_metric: str | None) -> "Metric":
        kind, _ = figure_kind(metric_kind, timing_metric)
        said = [m.strip() for m in (metric_kind, timing_metric) if m and m.strip()]
        counts = [m for m in said if not metric_is_timed(m)]
        return cls(kind, (counts or said or [None])[0])


def metric_of(task: "Task") -> Metric:
    """The package's metric (task.toml primary_metric.metric_kind, verifier.timing_metric)."""
    return Metric.declared(task.toml.primary_metric.metric_kind, task.toml.verifier.timing_metric)


@dataclass(frozen=True)
class Counts:
    """A dev grading's own counts (its benchmark_results.json), never an anchor: per unit the
    engine names (candidate_X / baseline_X), summed over its workloads, and its own ratio."""

    unit: str | None  # X of candidate_X / baseline_X, where the engine writes raw counts
    baseline: float | None
    candidate: float | None
    workloads: int
    ratio: float | None  # baseline over candidate, as the engine aggregates it (its speedup)
    metric: str | None  # the engine's own name of its metric


def budget(profile_sec: float, share: float, grader_seconds: float | None) -> dict[str, float]:
    """What a profile may spend: `total_sec` in all, `share` of the grader's own time (its calls,
    the baseline's, an ncu replay; at least a second), the candidate's calls `budget_sec` of it
    (at most profile_sec; the baseline's half that), the rest an ncu replay's where enough is left."""
    total = max(1.0, share * grader_seconds) if grader_seconds else 4 * profile_sec
    return {"budget_sec": round(min(profile_sec, total / 5), 3), "total_sec": round(total, 3)}


def read(log_dir: Path) -> dict[str, Any] | None:
    """The probe's profile of a grading (or of the grading watched or diagnosed beside it), None where none was made."""
    for p in (log_dir / "probe" / "trust" / PROFILE_FILE, log_dir / WATCHED / "probe" / "trust" / PROFILE_FILE,
              log_dir / DIAGNOSED / "probe" / "trust" / PROFILE_FILE):
        try:
            v = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(v, dict):
            return v
    return None


def _pct(x: float | None) -> str:
    return f"{100 * x:.0f}%" if x is not None else "?"


def _time(sec: float) -> str:
    return f"{sec * 1e3:.3g} ms" if sec >= 1e-3 else f"{sec * 1e6:.3g} us"


def _short(name: str, n: int = 90) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."


def summary(raw: dict[str, Any] | None, facts: dict[str, Any] | None, why_none: str = "",
            metric: Metric | None = None, log_dir: Path | None = None) -> dict[str, Any]:
    """{"how", "limiter", "roofline", "lines"}: `roofline` is the dominant kernel's share of its
    nearest ceiling (GPU only, else None); `lines` what a prompt shows. `metric` (metric_of): a
    counted one gets the count line of `log_dir`'s dev figures instead, with or without `raw`."""
    if metric is not None and metric.counted:
        return count_summary(metric, read_counts(log_dir) if log_dir is not None else None, why_none)
    if not raw or raw.get("why") or not raw.get("how"):
        why = (raw or {}).get("why") or why_none or "no profile was made"
        return {"how": None, "limiter": None, "roofline": None, "lines": [f"(no profile: {why})"]}
    if raw.get("device") == "cuda":
        return _gpu(raw, facts or {})
    return _cpu(raw)


# ------------------------------------------------------------------ a counted metric
def _finite(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _pairs(node: Any, out: list[dict[str, float]]) -> None:
    """Each workload's candidate_X / baseline_X figures ({X: (baseline, candidate)}), nested
    anywhere; nothing under a key naming an anchor (ref_)."""
    if isinstance(node, list):
        for x in node:
            _pairs(x, out)
    elif isinstance(node, dict):
        found = {k[len("candidate_"):]: (_finite(node.get("baseline_" + k[len("candidate_"):])), _finite(v))
                 for k, v in node.items() if k.startswith("candidate_") and "ref" not in k}
        found = {x: bc for x, bc in found.items() if None not in bc}
        if found:
            out.append(found)  # type: ignore[arg-type]
            return
        for k, v in node.items():
            if isinstance(v, (list, dict)) and "ref" not in k:
                _pairs(v, out)


def read_counts(log_dir: Path) -> Counts | None:
    """The dev engine's counts of a grading (DEV_PRODUCTS' benchmark_results.json), None where
    it wrote none."""
    for where in DEV_PRODUCTS:
        p = Path(log_dir) / where / "benchmark_results.json"
        try:
            if p.is_symlink() or not p.is_file() or p.stat().st_size > 4 << 20:
                continue
            bench = json.loads(p.read_text(errors="replace"))
        except (OSError, ValueError):
            continue
        if not isinstance(bench, dict):
            continue
        per: list[dict[str, Any]] = []
        _pairs(bench.get("workloads"), per)
        units = set.intersection(*(set(w) for w in per)) if per else set()
        unit = sorted(units)[0] if units else None  # one unit every workload counts in
        ratio = _finite(bench.get("aggregate_speedup"))
        if ratio is None and isinstance(bench.get("workloads"), list) and len(bench["workloads"]) == 1:
            ratio = _finite((bench["workloads"][0] or {}).get("speedup"))
        return Counts(unit=unit, baseline=sum(w[unit][0] for w in per) if unit else None,
                      candidate=sum(w[unit][1] for w in per) if unit else None, workloads=len(per), ratio=ratio,
                      metric=bench.get("metric") if isinstance(bench.get("metric"), str) else None)
    return None


def _count(v: float) -> str:
    return f"{v:.0f}" if v == int(v) and abs(v) < 1e15 else f"{v:.6g}"


def count_summary(metric: Metric, counts: Counts | None, why_none: str = "") -> dict[str, Any]:
    """The one line a counted metric gets: what is counted, and the baseline's and the
    candidate's count as the dev grading measured them; no timing, no limiter."""
    what = f"the score counts {metric.name} (the package's metric), not time: no timing profile"
    if counts is None or (counts.unit is None and counts.ratio is None):
        said = why_none or "the dev grading wrote no counts"
        return {"how": "count", "limiter": None, "roofline": None, "lines": [f"{what}; ({said})"]}
    if counts.unit is not None:
        over = f" over {counts.workloads} workloads" if counts.workloads > 1 else ""
        figs = (f"{counts.unit}{over}: baseline {_count(counts.baseline or 0.0)}, candidate "
                f"{_count(counts.candidate or 0.0)}")
        if counts.ratio is not None:
            figs += f" (baseline/candidate {counts.ratio:.4g}x)"
    else:
        figs = f"baseline/candidate {counts.metric or metric.name} {counts.ratio:.4g}x (the engine wrote no raw counts)"
    return {"how": "count", "limiter": None, "roofline": None, "lines": [f"{what}; the dev grading's {figs}"]}


def _baseline_line(raw: dict[str, Any]) -> list[str]:
    base = raw.get("baseline") or {}
    if not base.get("seconds_per_call"):
        return []
    return [f"the frozen baseline on the same input: {_time(float(base['seconds_per_call']))} a call"]


def _cpu(raw: dict[str, Any]) -> dict[str, Any]:
    shares = raw.get("shares") or {}
    own, native, other = (float(shares.get(k) or 0.0) for k in ("own", "native", "other"))
    # the largest share
    limiter = max((("python", own), ("native", native), ("library", other)), key=lambda kv: kv[1])[0]
    total = sum(float(f.get("seconds") or 0.0) for f in raw.get("functions") or []) or 1e-30
    lines = [f"cProfile over {raw.get('calls')} calls of {raw.get('entry')} on an input the dev grader passed: "
             f"{_time(float(raw.get('seconds_per_call') or 0.0))} a call", *_baseline_line(raw),
             f"time by whose code: the candidate's own Python {_pct(own)}, native calls "
             f"{_pct(native)}, other Python {_pct(other)}"]
    for f in (raw.get("functions") or [])[:5]:
        lines.append(f"  {_short(str(f.get('name')))}: {_pct(float(f.get('seconds') or 0.0) / total)} of its time, "
                     f"called {f.get('calls')}x in each call of {raw.get('entry')}")
    lines.append(f"limiter: {limiter} ({LIMITERS[limiter]})")
    return {"how": "cProfile", "limiter": limiter, "roofline": None, "lines": lines}


def _short_share(busy: float, n_k: int, kernels: list[dict[str, Any]]) -> float:
    """The share of GPU time in kernels shorter than SHORT_KERNEL_SEC a launch: the kept (longest)
    kernels each by its own mean, the ones not kept by theirs."""
    if busy <= 0 or n_k <= 0:
        return 0.0
    short = kept_sec = 0.0
    kept_n = 0
    for k in kernels:
        sec, n = float(k.get("seconds") or 0.0), max(1, int(k.get("count") or 1))
        kept_sec, kept_n = kept_sec + sec, kept_n + n
        short += sec if sec / n < SHORT_KERNEL_SEC else 0.0
    rest_sec, rest_n = max(0.0, busy - kept_sec), n_k - kept_n
    if rest_n > 0 and rest_sec / rest_n < SHORT_KERNEL_SEC:
        short += rest_sec
    return min(1.0, short / busy)


def time_shape(wall: float, busy: float, n_k: int, kernels: list[dict[str, Any]]) -> tuple[str | None, bool]:
    """(limiter, idle) from how a call's time is laid out, before any ceiling: a GPU idle most
    of the call waits on launches where the idle time is no more than LAUNCH_GAP_SEC a kernel
    over many kernels, else on host work (`idle` True: this outranks the kernels' own bound);
    a busy GPU whose time is mostly many short kernels is bound by their launches too."""
    idle = max(0.0, wall - busy)
    if wall > 0 and idle >= IDLE_SHARE * wall:
        return ("launch" if n_k >= MANY_KERNELS and idle <= n_k * LAUNCH_GAP_SEC else "host"), True
    if n_k >= MANY_KERNELS and _short_share(busy, n_k, kernels) >= 0.5:
        return "launch", False
    return None, False


def _gpu(raw: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    wall = float(raw.get("seconds_per_call") or 0.0)
    busy = float(raw.get("device_seconds_per_call") or 0.0)
    n_k = int(raw.get("kernels_per_call") or 0)
    bw = float(facts.get("bandwidth_gbs") or 0.0) * 1e9
    peak = float((facts.get("tflops") or {}).get(raw.get("dtype") or "", 0.0)) * 1e12
    where = facts.get("source") or "no ceiling known"
    lines = [f"{raw.get('entry')} on an input the dev grader passed: {_time(wall)} a call (median of "
             f"{raw.get('timed_calls', '?')}), the GPU busy {_time(busy)} of it in {n_k} kernel launches "
             f"({raw.get('how')}, {raw.get('calls')} calls)",
             *_baseline_line(raw)]
    if wall > busy > 0 and n_k > 0:
        lines.append(f"the GPU idle {_pct((wall - busy) / wall)} of the call: "
                     f"{_time((wall - busy) / n_k)} of host time per launch")
    bw_share = flop_share = None
    if busy > 0 and raw.get("bytes_per_call"):
        gbs = float(raw["bytes_per_call"]) / busy
        bw_share = gbs / bw if bw else None
        lines.append(f"its tensors hold {float(raw['bytes_per_call']) / 1e6:.3g} MB a call: "
                     f"at least {gbs / 1e9:.3g} GB/s, "
                     + (f"{_pct(bw_share)} of {bw / 1e9:g} GB/s ({where})" if bw else "no bandwidth ceiling known"))
    if busy > 0 and raw.get("flops_per_call"):
        fl = float(raw["flops_per_call"]) / busy
        flop_share = fl / peak if peak else None
        lines.append(f"{float(raw['flops_per_call']):.3g} FLOPs a call (torch's count): {fl / 1e12:.3g} TFLOP/s, "
                     f"{_pct(flop_share)} of the {raw.get('dtype')} ceiling")
    ncu = raw.get("ncu_kernels")
    if ncu:
        bound, roofline = _ncu_lines(ncu, lines)
    else:
        bound, roofline = _kernel_lines(raw, busy, bw_share, flop_share, lines)
    shape, idle = time_shape(wall, busy, n_k, raw.get("kernels") or [])
    if shape and (idle or bound == "latency"):
        limiter = shape
        if idle and roofline is not None:
            roofline *= busy / wall  # the call, not its kernels, is what is near a ceiling or not
    else:
        limiter = bound
    lines.append(f"limiter: {limiter} ({LIMITERS[limiter]})")
    return {"how": raw.get("how"), "limiter": limiter, "roofline": roofline, "lines": lines}


def _ncu_lines(ncu: list[dict[str, Any]], lines: list[str]) -> tuple[str, float]:
    """Nsight Compute's kernels as lines; the dominant one's bound and its roofline share."""
    total = sum(float(k["seconds"]) for k in ncu) or 1e-30
    for k in ncu[:5]:
        lines.append(f"  {_short(k['name'])}: {_pct(float(k['seconds']) / total)} of GPU "
                     f"time, {k['launches']} launches, DRAM {k['dram_pct']:.0f}% / SM {k['sm_pct']:.0f}% of peak, "
                     f"occupancy {k['occupancy_pct']:.0f}%, limiter {_ncu_limiter(k)}")
    top = ncu[0]
    return _ncu_limiter(top), max(top["dram_pct"], top["sm_pct"]) / 100


def _kernel_lines(raw: dict[str, Any], busy: float, bw_share: float | None, flop_share: float | None,
                  lines: list[str]) -> tuple[str, float | None]:
    """torch.profiler's kernels as lines; the bound the ceilings' shares give, and the nearest."""
    total = busy or 1e-30
    for k in (raw.get("kernels") or [])[:5]:
        lines.append(f"  {_short(k['name'])}: {_pct(float(k['seconds']) / total)} of GPU time, {k['count']} a call, "
                     f"{_time(float(k['seconds']) / max(1, int(k['count'])))} each")
    if raw.get("ncu"):
        lines.append(f"(no Nsight Compute counters: {raw['ncu']}; bandwidth from the tensors' sizes, a lower bound)")
    shares = [x for x in (bw_share, flop_share) if x is not None]
    roofline = max(shares) if shares else None
    if bw_share is not None and bw_share >= BOUND_SHARE and bw_share >= (flop_share or 0):
        return "memory", roofline
    if flop_share is not None and flop_share >= BOUND_SHARE:
        return "compute", roofline
    return "latency", roofline


def _ncu_limiter(k: dict[str, Any]) -> str:
    dram, sm = float(k.get("dram_pct") or 0.0), float(k.get("sm_pct") or 0.0)
    if max(dram, sm) >= NCU_BOUND_PCT:
        return "memory" if dram >= sm else "compute"
    return "latency"
