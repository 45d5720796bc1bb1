"""Where a candidate's time goes, measured by the probe (pesflow_probe.py) once its checks are
done, in the grading's sandbox, on inputs the harness itself passed in the dev grading: the same
calls again, under a profiler, nothing of the grader's figures touched.

Three ways, the first that can be had:
- Nsight Compute on a GPU (`ncu --clock-control none`, the clocks as the grader ran them): each
  kernel's time, DRAM and SM throughput as a share of the card's peak, and occupancy, from a
  replay of one kept call in a child process;
- torch.profiler on a GPU: each kernel's time, with the bytes the call's tensors hold and the
  FLOPs torch counts, for the host to set against the card's ceilings;
- cProfile elsewhere: each function's own time, told apart as the candidate's own Python, native
  calls (builtins, numpy, torch) and other Python.
Only figures leave here; what they mean is evaluator/profile.py's. Standard library (torch when
the inputs hold tensors); Python 3.8+.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time

MAX_CALLS = 20  # profiled calls of one entry point at most
PROFILED_GPU_CALLS = 5  # calls under torch.profiler at most (its own cost per call is large)
MIN_NCU_SEC = 5.0  # an ncu replay is not tried with less time than this left of the profile's budget
TOP = 8  # kernels or functions kept
NCU_METRICS = ("gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
               "dram__bytes.sum")
# the host's Nsight Compute as a local grading binds it (evaluator/hardware.py NCU_MOUNT)
HOST_NCU = "/opt/nvidia/nsight-compute/host/ncu"
_UNREADABLE = ("ERR_NVGPUCTRPERM", "permission to access NVIDIA GPU Performance Counters")


def _torch():
    return sys.modules.get("torch")


def _cuda_inputs(args):
    t = _torch()
    if t is None or not t.cuda.is_available():
        return False
    stack, seen = [args], 0
    while stack and seen < 4096:
        v = stack.pop()
        seen += 1
        if isinstance(v, t.Tensor):
            if v.is_cuda:
                return True
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return False


def _dtype(args):
    """The float dtype holding the most bytes among the inputs: the one the FLOP/s ceiling is read for."""
    t = _torch()
    sizes = {}
    stack = [args]
    while stack:
        v = stack.pop()
        if t is not None and isinstance(v, t.Tensor) and v.is_floating_point():
            name = {t.float32: "fp32", t.bfloat16: "bf16", t.float16: "fp16"}.get(v.dtype, str(v.dtype))
            sizes[name] = sizes.get(name, 0) + v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return max(sizes, key=sizes.get) if sizes else None


def _repeats(call, budget_sec, sync):
    """How many calls fit in half the budget, from one timed call (at least 1, at most MAX_CALLS)."""
    t0 = time.perf_counter()
    call()
    sync()
    one = time.perf_counter() - t0
    return max(1, min(MAX_CALLS, int(0.5 * budget_sec / max(one, 1e-6)))), one


def python_profile(fn, args, kwargs, budget_sec, own_files):
    """cProfile over repeated calls: each function's own time, and whose it is (`own_files`: the
    candidate's module files)."""
    import cProfile  # noqa: PLC0415 - slow to import in every probe: only where a profile is asked for
    import pstats  # noqa: PLC0415 - slow to import in every probe: only where a profile is asked for
    own = {os.path.realpath(f) for f in own_files if f}
    n, one = _repeats(lambda: fn(*args, **kwargs), budget_sec, lambda: None)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    try:
        for _ in range(n):
            fn(*args, **kwargs)
    finally:
        prof.disable()
    wall = (time.perf_counter() - t0) / n
    rows, total = [], 0.0
    shares = {"own": 0.0, "native": 0.0, "other": 0.0}
    for (file, line, name), (_cc, calls, own_time, _cum, _callers) in pstats.Stats(prof).stats.items():
        if name == "<method 'disable' of '_lsprof.Profiler' objects>":
            continue
        kind = "native" if file == "~" else "own" if os.path.realpath(file) in own else "other"
        shares[kind] += own_time
        total += own_time
        where = name if file == "~" else "%s:%d(%s)" % (os.path.basename(file), line, name)
        rows.append({"name": where, "kind": kind, "seconds": own_time / n, "calls": calls // n or calls})
    rows.sort(key=lambda r: -r["seconds"])
    return {"how": "cProfile", "device": "cpu", "calls": n, "seconds_per_call": wall, "first_call": one,
            "functions": rows[:TOP], "shares": {k: (v / total if total else 0.0) for k, v in shares.items()}}


def _timed(fn, args, kwargs, budget_sec, sync):
    """The median wall time of a call, the GPU waited for, with no profiler on: repeated calls
    while half the budget lasts (at least one, at most MAX_CALLS)."""
    fn(*args, **kwargs)  # once untimed: a library's lazy start (cuBLAS, a kernel's first load) is no call's cost
    sync()
    walls, end = [], time.perf_counter() + 0.5 * budget_sec
    while len(walls) < MAX_CALLS and (not walls or time.perf_counter() < end):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        sync()
        walls.append(time.perf_counter() - t0)
    walls.sort()
    return walls[len(walls) // 2], len(walls)


def torch_profile(fn, args, kwargs, budget_sec, nbytes, sync, out=None):
    """On the GPU: the wall time of a call measured plainly, then each kernel's time per call
    under torch.profiler (a few calls: the profiler's own cost per call would swamp the wall
    time), with the bytes the inputs and the output hold (a lower bound on what a call moves)
    and the FLOPs torch counts."""
    t = _torch()
    # only where a GPU profile is asked for:
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415 - slow to import (torch.profiler)
    wall, timed = _timed(fn, args, kwargs, budget_sec, sync)
    n, end = 0, time.perf_counter() + 0.5 * budget_sec
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_flops=True) as prof:
        while n < PROFILED_GPU_CALLS and (n == 0 or time.perf_counter() < end):
            out = fn(*args, **kwargs)
            sync()
            n += 1
    kernels, flops = [], 0
    cuda_type = getattr(getattr(t.autograd, "DeviceType", None), "CUDA", None)
    for e in prof.key_averages():
        if getattr(e, "device_type", None) == cuda_type:
            us = getattr(e, "self_device_time_total", None)
            if us is None:
                us = getattr(e, "self_cuda_time_total", 0)
            kernels.append({"name": e.key, "seconds": float(us) * 1e-6 / n, "count": max(1, e.count // n)})
        else:
            flops += int(getattr(e, "flops", 0) or 0)
    kernels.sort(key=lambda k: -k["seconds"])
    return {"how": "torch.profiler", "device": "cuda", "calls": n, "timed_calls": timed, "seconds_per_call": wall,
            "device_seconds_per_call": sum(k["seconds"] for k in kernels),
            "kernels_per_call": sum(k["count"] for k in kernels), "kernels": kernels[:TOP],
            "bytes_per_call": nbytes((args, kwargs, out)), "flops_per_call": flops // n, "dtype": _dtype(args)}


# ------------------------------------------------------------------ Nsight Compute
def kernel_base(name):
    """A kernel's function name as ncu matches it (--kernel-name-base function): no return type,
    namespaces, template arguments or parameters."""
    depth, out = 0, []
    for ch in name:  # template arguments and parameter lists dropped, nested ones too
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    base = "".join(out).strip().split(" ")[-1]
    return base.split("::")[-1]


def ncu_command(ncu, exe, script, request_file, kernels=()):
    """The replay of one kept call under ncu, clocks left as the grader ran them; only the
    kernels named (the ones torch.profiler found taking the most time), a few launches each."""
    names = sorted({kernel_base(k) for k in kernels if kernel_base(k)})
    pick = (["--kernel-name", "regex:^(%s)$" % "|".join(re.escape(n) for n in names), "--launch-count",
             str(2 * len(names))] if names else ["--launch-count", "20"])
    return [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--metrics", ",".join(NCU_METRICS), *pick,
            exe, "-I", script, "replay", request_file]


def parse_ncu_csv(text):
    """ncu's raw page as CSV (a header row, a units row, one row a kernel launch) -> kernels, each
    with its launches, time per call and mean percentages; None where no row could be read."""
    start = text.find('"ID"')
    if start < 0:
        return None
    rows = list(csv.reader(io.StringIO(text[start:])))
    if len(rows) < 3:
        return None
    head, units = rows[0], rows[1]
    col = {name: i for i, name in enumerate(head)}
    if "Kernel Name" not in col or NCU_METRICS[0] not in col:
        return None
    scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}.get(units[col[NCU_METRICS[0]]], 1e-9)
    byte_scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(units[col["dram__bytes.sum"]], 1) \
        if "dram__bytes.sum" in col else 1
    by_name = {}
    for r in rows[2:]:
        if len(r) != len(head):
            continue

        def num(metric):
            try:
                return float(r[col[metric]].replace(",", "")) if metric in col else None
            except ValueError:
                return None
        k = by_name.setdefault(r[col["Kernel Name"]], {"name": r[col["Kernel Name"]], "launches": 0, "seconds": 0.0,
                                                        "dram_pct": 0.0, "sm_pct": 0.0, "occupancy_pct": 0.0,
                                                        "bytes": 0.0})
        secs = (num(NCU_METRICS[0]) or 0.0) * scale
        k["launches"] += 1
        k["seconds"] += secs
        for key, metric in (("dram_pct", NCU_METRICS[1]), ("sm_pct", NCU_METRICS[2]),
                            ("occupancy_pct", NCU_METRICS[3])):
            k[key] += (num(metric) or 0.0) * secs  # time-weighted means
        k["bytes"] += (num("dram__bytes.sum") or 0.0) * byte_scale
    kernels = []
    for k in by_name.values():
        s = k["seconds"] or 1e-30
        kernels.append({"name": k["name"], "launches": k["launches"], "seconds": k["seconds"], "bytes": k["bytes"],
                        **{key: round(k[key] / s, 2) for key in ("dram_pct", "sm_pct", "occupancy_pct")}})
    kernels.sort(key=lambda k: -k["seconds"])
    return kernels or None


def find_ncu(path=None):
    """ncu on the PATH (`path`, default the process's), else the host's install a local
    grading binds at HOST_NCU, else where CUDA's and Nsight Compute's installers put it (a
    grading's PATH often leaves their folders out)."""
    import glob  # noqa: PLC0415 - slow to import in every probe: only where a GPU profile is asked for
    found = shutil.which("ncu", path=path)
    if found:
        return found
    for pattern in (HOST_NCU, "/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu",
                    "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits and os.access(hits[-1], os.X_OK):
            return hits[-1]
    return None


def ncu_profile(rec, config_dir, budget_sec, kernels=()):
    """One kept call replayed under ncu in a child process; (kernels, None) or (None, why)."""
    ncu = find_ncu()
    if ncu is None:
        return None, "no ncu in the grading: neither its image nor the host has one"
    request = os.path.join("/tmp", "pesflow-profile-%d.json" % os.getpid())
    with open(request, "w") as f:
        json.dump({"rec": rec, "config_dir": config_dir}, f)
    try:
        out = subprocess.run(ncu_command(ncu, sys.executable, os.path.abspath(__file__), request, kernels),
                             capture_output=True, text=True, timeout=budget_sec)
    except subprocess.TimeoutExpired:
        return None, "ncu ran past its %g s" % budget_sec
    except OSError as e:
        return None, "ncu did not start: %s" % e
    finally:
        try:
            os.unlink(request)
        except OSError:
            pass
    text = out.stdout + out.stderr
    if any(s in text for s in _UNREADABLE):
        return None, "the GPU's performance counters cannot be read here (ERR_NVGPUCTRPERM)"
    found = parse_ncu_csv(out.stdout)
    if found is None:
        said = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("==PROF==")]
        return None, "ncu gave no kernel rows (exit %d%s)" % (out.returncode, ": " + said[-1][:200] if said else "")
    return found, None


def replay(request_file):
    """ncu's child: the kept call once, as the probe loaded it."""
    with open(request_file) as f:
        req = json.load(f)
    sys.path.insert(0, req["config_dir"])
    # the probe's loader, from the config folder, in ncu's child only:
    import pesflow_probe_inputs as inputs  # noqa: PLC0415 - slow to import
    rec = req["rec"]
    sys.path[1:1] = [p for p in rec.get("sys_path") or [] if p not in sys.path]
    os.chdir(rec.get("cwd") or "/")
    fn = getattr(inputs.load_module(rec), rec["fn"])
    args, kwargs = inputs.loads(inputs.blob(rec, req["config_dir"]), rec.get("argv"))
    fn(*args, **kwargs)
    t = _torch()
    if t is not None and t.cuda.is_available():
        t.cuda.synchronize()


def profile(calls, budget_sec, helpers, config_dir, baseline_calls=(), total_sec=None):
    """The profile of the candidate's kept calls (`calls`: [(rec, fn, args, kwargs)], the largest
    input first), with the frozen baseline's on the same input where it loads (`baseline_calls`).
    `budget_sec`: the candidate's calls (the baseline's get half); `total_sec`: everything,
    an ncu replay included (None: budget_sec four times over)."""
    total_sec = float(total_sec if total_sec is not None else 4 * budget_sec)
    if not calls:
        return {"why": "no call into the candidate could be replayed here"}
    rec, fn, args, kwargs = calls[0]
    t0 = time.perf_counter()
    result = {"entry": rec.get("fn"), "input_bytes": helpers["nbytes"]((args, kwargs))}
    try:
        if _cuda_inputs((args, kwargs)):
            got = torch_profile(fn, args, kwargs, budget_sec, helpers["nbytes"], helpers["sync"])
            left = total_sec - 1.5 * budget_sec - (time.perf_counter() - t0)  # the baseline's share kept back
            if left >= MIN_NCU_SEC:
                kernels, why = ncu_profile(rec, config_dir, left, [k["name"] for k in got["kernels"][:3]])
            else:
                kernels, why = None, "an ncu replay would cost more than the profile's share of the grading"
            if kernels is not None:
                got.update(how="ncu", ncu_kernels=kernels[:TOP])
            else:
                got["ncu"] = why
        else:
            got = python_profile(fn, args, kwargs, budget_sec, [rec.get("file")])
        result.update(got)
    except Exception as e:  # noqa: BLE001 - no profile, said why: never the probe's end
        return {"why": "the profiled call raised %s" % type(e).__name__, "entry": rec.get("fn")}
    for brec, bfn, bargs, bkwargs in baseline_calls[:1]:
        try:
            if result["device"] == "cuda":
                base = torch_profile(bfn, bargs, bkwargs, budget_sec / 2, helpers["nbytes"], helpers["sync"])
            else:
                base = python_profile(bfn, bargs, bkwargs, budget_sec / 2, [brec.get("file")])
            result["baseline"] = {k: base[k] for k in ("how", "seconds_per_call", "kernels", "functions", "shares",
                                                       "device_seconds_per_call", "kernels_per_call") if k in base}
        except Exception:  # noqa: BLE001 - the baseline's profile is a comparison only
            pass
    result["profile_seconds"] = round(time.perf_counter() - t0, 4)
    return result


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "replay":
    replay(sys.argv[2])
