"""What a candidate's profile means, for the model (search.feedback engineer): where its time goes,
against the grading machine's ceilings (evaluator/ceilings.py), and the one thing that limits it.

The figures come from the trust probe's last step (evaluator/trust/inside/pesflow_profile.py): a
dev grading's kept calls replayed under Nsight Compute, torch.profiler or cProfile, in the
grading's sandbox, after the grader, so no figure of the grading moves. Here they become a few
lines and a `limiter`, one of LIMITERS, that a model (and `loop.roofline_stop`) can act on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# what bounds a candidate, as the profile tells it
LIMITERS = {
    "memory": "memory bandwidth: move fewer bytes (fuse, keep data on chip, narrower types)",
    "compute": "compute throughput: fewer or cheaper operations, tensor cores, a better algorithm",
    "latency": "neither bandwidth nor compute near a ceiling: more parallel work per kernel, higher occupancy, fewer stalls",
    "launch": "many short kernels: fuse them, or capture the sequence (CUDA graphs)",
    "host": "the GPU waits on the host: Python, synchronizations or copies between kernels",
    "python": "the candidate's own Python code (the interpreter): vectorize, move loops into native code, or change the algorithm",
    "native": "native calls (builtins, numpy, torch): fewer or larger calls, less data, or a better algorithm",
    "library": "Python outside the candidate (libraries it calls): call them less, or differently",
}
BOUND_SHARE = 0.5  # a ceiling's share at which it is what bounds a kernel (torch.profiler's estimate)
NCU_BOUND_PCT = 60.0  # Nsight Compute's throughput, % of peak, at which a unit is the bound
SHORT_KERNEL_SEC = 20e-6
PROFILE_FILE = "profile.json"


def budget(profile_sec: float, share: float, grader_seconds: float | None) -> dict[str, float]:
    """What a profile may spend: `total_sec` in all, `share` of the grader's own time (its calls,
    the baseline's, an ncu replay; at least a second), the candidate's calls `budget_sec` of it
    (at most profile_sec; the baseline's half that), the rest an ncu replay's where enough is left."""
    total = max(1.0, share * grader_seconds) if grader_seconds else 4 * profile_sec
    return {"budget_sec": round(min(profile_sec, total / 5), 3), "total_sec": round(total, 3)}


def read(log_dir: Path) -> dict[str, Any] | None:
    """The probe's profile of a grading (or of its watched twin), None where none was made."""
    for p in (log_dir / "probe" / "trust" / PROFILE_FILE, log_dir / "watched" / "probe" / "trust" / PROFILE_FILE):
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


def summary(raw: dict[str, Any] | None, facts: dict[str, Any] | None, why_none: str = "") -> dict[str, Any]:
    """{"how", "limiter", "roofline", "lines"}: `roofline` is the dominant kernel's share of its
    nearest ceiling (GPU only, else None); `lines` what a prompt shows."""
    if not raw or raw.get("why") or not raw.get("how"):
        why = (raw or {}).get("why") or why_none or "no profile was made"
        return {"how": None, "limiter": None, "roofline": None, "lines": [f"(no profile: {why})"]}
    if raw.get("device") == "cuda":
        return _gpu(raw, facts or {})
    return _cpu(raw)


def _baseline_line(raw: dict[str, Any]) -> list[str]:
    base = raw.get("baseline") or {}
    if not base.get("seconds_per_call"):
        return []
    return [f"the frozen baseline on the same input: {_time(float(base['seconds_per_call']))} a call"]


def _cpu(raw: dict[str, Any]) -> dict[str, Any]:
    shares = raw.get("shares") or {}
    own, native, other = (float(shares.get(k) or 0.0) for k in ("own", "native", "other"))
    limiter = max((("python", own), ("native", native), ("library", other)), key=lambda kv: kv[1])[0]  # the largest share
    total = sum(float(f.get("seconds") or 0.0) for f in raw.get("functions") or []) or 1e-30
    lines = [f"cProfile over {raw.get('calls')} calls of {raw.get('entry')} on an input the dev grader passed: "
             f"{_time(float(raw.get('seconds_per_call') or 0.0))} a call", *_baseline_line(raw),
             f"time by whose code: the candidate's own Python {_pct(own)}, native calls {_pct(native)}, other Python {_pct(other)}"]
    for f in (raw.get("functions") or [])[:5]:
        lines.append(f"  {_short(str(f.get('name')))}: {_pct(float(f.get('seconds') or 0.0) / total)} of its time, "
                     f"called {f.get('calls')}x in each call of {raw.get('entry')}")
    lines.append(f"limiter: {limiter} ({LIMITERS[limiter]})")
    return {"how": "cProfile", "limiter": limiter, "roofline": None, "lines": lines}


def _gpu(raw: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    wall = float(raw.get("seconds_per_call") or 0.0)
    busy = float(raw.get("device_seconds_per_call") or 0.0)
    n_k = int(raw.get("kernels_per_call") or 0)
    bw = float(facts.get("bandwidth_gbs") or 0.0) * 1e9
    peak = float((facts.get("tflops") or {}).get(raw.get("dtype") or "", 0.0)) * 1e12
    where = facts.get("source") or "no ceiling known"
    lines = [f"{raw.get('entry')} on an input the dev grader passed: {_time(wall)} a call (median of {raw.get('timed_calls', '?')}), "
             f"the GPU busy {_time(busy)} of it in {n_k} kernel launches ({raw.get('how')}, {raw.get('calls')} calls)",
             *_baseline_line(raw)]
    bw_share = flop_share = None
    if busy > 0 and raw.get("bytes_per_call"):
        gbs = float(raw["bytes_per_call"]) / busy
        bw_share = gbs / bw if bw else None
        lines.append(f"its tensors hold {float(raw['bytes_per_call']) / 1e6:.3g} MB a call: at least {gbs / 1e9:.3g} GB/s, "
                     + (f"{_pct(bw_share)} of {bw / 1e9:g} GB/s ({where})" if bw else "no bandwidth ceiling known"))
    if busy > 0 and raw.get("flops_per_call"):
        fl = float(raw["flops_per_call"]) / busy
        flop_share = fl / peak if peak else None
        lines.append(f"{float(raw['flops_per_call']):.3g} FLOPs a call (torch's count): {fl / 1e12:.3g} TFLOP/s, "
                     f"{_pct(flop_share)} of the {raw.get('dtype')} ceiling")
    ncu = raw.get("ncu_kernels")
    if ncu:
        total = sum(float(k["seconds"]) for k in ncu) or 1e-30
        for k in ncu[:5]:
            lines.append(f"  {_short(k['name'])}: {_pct(float(k['seconds']) / total)} of GPU time, {k['launches']} launches, "
                         f"DRAM {k['dram_pct']:.0f}% / SM {k['sm_pct']:.0f}% of peak, occupancy {k['occupancy_pct']:.0f}%, "
                         f"limiter {_ncu_limiter(k)}")
        top = ncu[0]
        limiter, roofline = _ncu_limiter(top), max(top["dram_pct"], top["sm_pct"]) / 100
    else:
        total = busy or 1e-30
        for k in (raw.get("kernels") or [])[:5]:
            lines.append(f"  {_short(k['name'])}: {_pct(float(k['seconds']) / total)} of GPU time, {k['count']} a call, "
                         f"{_time(float(k['seconds']) / max(1, int(k['count'])))} each")
        if raw.get("ncu"):
            lines.append(f"(no Nsight Compute counters: {raw['ncu']}; bandwidth from the tensors' sizes, a lower bound)")
        shares = [s for s in (bw_share, flop_share) if s is not None]
        roofline = max(shares) if shares else None
        if bw_share is not None and bw_share >= BOUND_SHARE and bw_share >= (flop_share or 0):
            limiter = "memory"
        elif flop_share is not None and flop_share >= BOUND_SHARE:
            limiter = "compute"
        elif wall > 0 and busy < 0.5 * wall:
            limiter = "host"
        elif n_k >= 5 and busy / max(1, n_k) < SHORT_KERNEL_SEC:
            limiter = "launch"
        else:
            limiter = "latency"
    lines.append(f"limiter: {limiter} ({LIMITERS[limiter]})")
    return {"how": raw.get("how"), "limiter": limiter, "roofline": roofline, "lines": lines}


def _ncu_limiter(k: dict[str, Any]) -> str:
    dram, sm = float(k.get("dram_pct") or 0.0), float(k.get("sm_pct") or 0.0)
    if max(dram, sm) >= NCU_BOUND_PCT:
        return "memory" if dram >= sm else "compute"
    return "latency"
