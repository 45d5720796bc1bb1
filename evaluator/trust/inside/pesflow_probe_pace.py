"""The figure reproduced by pesflow (pesflow_probe.py): the frozen baseline and the candidate
timed on the same kept inputs of the grader's timing pass with pesflow's own clock (read at
this module's import, before any candidate code ran). The baseline is timed first, before the
candidate's modules are loaded (a candidate that slows whatever runs after it, by a thread,
a patched global or a planted file, cannot reach it), the candidate after every other probe;
each call's time is the caller's own (what load did not add: pesflow_probe_objects.own) plus
the CPU time of the child processes it waited for. The host sets the grader's speedup beside
it (screen.py `not_reproduced`). Standard library; Python 3.8+.
"""

import copy
import gc
import os
import time

import pesflow_probe_objects as objects

_WALL = time.perf_counter  # read now: candidate code loaded later cannot stand in for it
_TIMES = os.times
_ROUNDS = 3  # the least of three: the lines it is judged by are 3x and 10x apart, not a spread
_ROUND_SEC = 2e-3  # a round is as many calls as make this, up to 8
_CASES = 3  # the kept calls that hold the most data
_HELD = 256 << 20  # bytes of input copies a round holds at most


def _children():
    t = _TIMES()
    return t.children_user + t.children_system


def _round(fn, args, kwargs, reps, h, gpu):
    """The caller's seconds a call, over `reps` calls on fresh copies (never the objects of an
    earlier round: an output kept by identity answers nothing here)."""
    calls = [(copy.deepcopy(args), copy.deepcopy(kwargs)) for _ in range(reps)]
    was = gc.isenabled()
    gc.disable()
    try:
        h["sync"]()
        kids = _children()
        m = objects.mark()
        for a, k in calls:
            fn(*a, **k)
        h["sync"]()
        return (objects.own(m, gpu) + (_children() - kids)) / reps
    finally:
        if was:
            gc.enable()


def least(fn, args, kwargs, h, budget_sec, cold_ok=False, answer=None):
    """(the least seconds a call over up to _ROUNDS rounds, rounds), or None: one untimed call
    first (a JIT's build, a lazy import), then rounds while the budget holds one more (each as
    long as that first call foretells). Where not one round fits, the first call's time with 0
    rounds if `cold_ok` (the baseline: a cold call is no faster, so it can only make the figure
    easier to reproduce), else None (the candidate: no figure from a cold call). The first
    call's output as plain values goes into `answer` (a list) where one is given."""
    gpu = h["on_gpu"]()
    end = _WALL() + budget_sec
    t0 = _WALL()
    out = fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    h["sync"]()
    first = _WALL() - t0
    if answer is not None:
        try:
            answer.append(h["plain"](out))
        except Exception:  # noqa: BLE001 - no plain answer: the probe calls the baseline itself
            pass
    del out
    reps = max(1, min(8, int(_ROUND_SEC / max(first, 1e-6)), _HELD // max(1, h["nbytes"]((args, kwargs)))))
    got = []
    while len(got) < _ROUNDS and _WALL() + 1.5 * first * reps < end:
        got.append(_round(fn, args, kwargs, reps, h, gpu))
    if got:
        return min(got), len(got)
    return (first, 0) if cold_ok else None


def cases(recs, baseline_refs, blob_of, loads):
    """[(index, rec, args, kwargs)]: the kept calls of functions with a frozen baseline, those
    whose input holds the most data first (its pickle's size)."""
    out = []
    for idx, rec in sorted(enumerate(recs), key=lambda x: -int(x[1].get("size") or 0)):
        if rec.get("cls") or rec.get("file") not in baseline_refs or len(out) >= _CASES:
            continue
        try:
            args, kwargs = loads(blob_of(rec), rec.get("argv"))
        except Exception:  # noqa: BLE001 - the probes' loop says why
            continue
        out.append((idx, rec, args, kwargs))
    return out


def baseline_first(chosen, base_of, h, budget_sec, answers=None):
    """{index: (seconds, rounds)} of the baseline on each chosen call, before any candidate code;
    its answer on each (plain values) into `answers` by index, where one is given: the probe
    compares the candidate's with it, with no call of the baseline more."""
    out = {}
    end = _WALL() + budget_sec
    for idx, rec, args, kwargs in chosen:
        if _WALL() > end:
            break
        try:
            fn = base_of(rec)
            if fn is not None:
                got = []
                out[idx] = least(fn, args, kwargs, h, max(0.0, end - _WALL()), cold_ok=True, answer=got)
                if got and answers is not None:
                    answers[idx] = got[0]
        except Exception:  # noqa: BLE001 - a baseline that does not run here: no figure
            continue
    return out


def candidate_after(chosen, base_times, fn_of, h, budget_sec):
    """[[function, call number, candidate's seconds a call, baseline's, rounds]]."""
    rows = []
    end = _WALL() + budget_sec
    for idx, rec, args, kwargs in chosen:
        if idx not in base_times or _WALL() > end:
            continue
        try:
            got = least(fn_of(rec), args, kwargs, h, max(0.0, end - _WALL()))
        except Exception:  # noqa: BLE001 - the probes' loop says why
            continue
        if got is not None:
            rows.append([rec["fn"], rec.get("n"), got[0], base_times[idx][0], min(got[1], base_times[idx][1])])
    return rows
