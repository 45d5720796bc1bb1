"""The figure reproduced by pesflow (pesflow_probe.py): the frozen baseline and the candidate
timed with pesflow's own clock (read at this module's import, before any candidate code ran)
on the kept inputs of the grader's timing pass given new values the grading never passed: every
timed call its own (pesflow_probe_values `rolled`, by shifts from the far end of the range the
other probes take theirs from), so an answer kept by value is no faster here; plain copies only
where the baseline does not take new values, and the row says so. A stub baseline (one that does
not run) is stood in for by the package's reference, the figure's other end. The baseline is timed first, before the
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
_MOST_CALLS = _ROUNDS * 8  # new values a case asks for: every timed call its own


def _children():
    t = _TIMES()
    return t.children_user + t.children_system


def new_values(args, kwargs, h):
    """The shifts of new values for a case's timed calls (pesflow_probe_values `far_shifts`: far
    from those the grading's other probes take); [] where its inputs hold nothing to shift."""
    return h["far_shifts"]((args, kwargs), _MOST_CALLS)


def _calls(args, kwargs, reps, h, ks):
    """`reps` calls' inputs: new values by the shifts `ks` (each used once), else fresh copies
    (never the objects of an earlier round: an output kept by identity answers nothing here)."""
    if ks is None:
        return [(copy.deepcopy(args), copy.deepcopy(kwargs)) for _ in range(reps)]
    return [h["rolled"]((args, kwargs), k) for k in ks]


def _round(fn, calls, h, gpu):
    """The caller's seconds a call, over `calls`."""
    reps = len(calls)
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


def least(fn, args, kwargs, h, budget_sec, cold_ok=False, answer=None, ks=None, left=None):
    """(the least seconds a call over up to _ROUNDS rounds, rounds, on new values), or None: one
    untimed call first (a JIT's build, a lazy import), then rounds while the budget holds one
    more (each as long as that first call foretells), on the new values of the shifts `ks` (each
    once: fewer rounds where they run out; copies from there on where they raise, so that a
    baseline's time is there to time the candidate on the same kind of inputs), else on copies.
    Where not one round fits, the first call's time with 0 rounds if `cold_ok` (the baseline: a
    cold call is no faster, so it can only make the figure easier to reproduce), else None (the
    candidate: no figure from a cold call). The first call's output as plain values goes into
    `answer` (a list) where one is given, and what it changed of its inputs into `left`."""
    gpu = h["on_gpu"]()
    end = _WALL() + budget_sec
    used = (copy.deepcopy(args), copy.deepcopy(kwargs))
    t0 = _WALL()
    out = fn(*used[0], **used[1])
    h["sync"]()
    first = _WALL() - t0
    if answer is not None:
        try:
            answer.append(h["plain"](out))
            if left is not None:
                left.append(h["left_changed"](used, (args, kwargs)))
        except Exception:  # noqa: BLE001 - no plain answer: the probe calls the baseline itself
            pass
    del out, used
    reps = max(1, min(8, int(_ROUND_SEC / max(first, 1e-6)), _HELD // max(1, h["nbytes"]((args, kwargs)))))
    if ks is not None:  # short inputs have few new values: shorter rounds, every one on new values
        ks = ks or None
        reps = max(1, min(reps, len(ks or ()) // _ROUNDS))
    got = []
    while len(got) < _ROUNDS and _WALL() + 1.5 * first * reps < end:
        if ks is not None and len(ks) < reps * (len(got) + 1):
            break
        part = None if ks is None else ks[reps * len(got):reps * (len(got) + 1)]
        try:
            got.append(_round(fn, _calls(args, kwargs, reps, h, part), h, gpu))
        except Exception:  # noqa: BLE001 - new values it does not take (cold_ok: the baseline's)
            if ks is None or not cold_ok:
                raise
            ks, got = None, []
    if got:
        return min(got), len(got), ks is not None
    return (first, 0, False) if cold_ok else None


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


def baseline_first(chosen, stand_ins, h, budget_sec, answers=None, changes=None):
    """{index: (seconds, rounds, new values, whose)} of the baseline on each chosen call, before
    any candidate code: `stand_ins(rec)` gives [(whose, function)], the frozen baseline's first,
    then the package's references' (the first that runs is timed: a stub baseline's figure is
    against a reference). Its answer on each (plain values) into `answers` by index, where one
    is given: the probe compares the candidate's with it, with no call of the baseline more; and
    into `changes` what that call changed of its inputs (None: nothing), where both are given."""
    out = {}
    end = _WALL() + budget_sec
    for idx, rec, args, kwargs in chosen:
        for whose, fn in stand_ins(rec):
            if _WALL() > end:
                break
            try:
                got, left = [], []
                # on a GPU, copies: rolled offsets can fault a kernel, and a fault ends every probe after it
                ks = None if h["on_gpu"]() else new_values(args, kwargs, h) or None
                sec, rounds, new = least(fn, args, kwargs, h, max(0.0, end - _WALL()), cold_ok=True, answer=got,
                                         ks=ks, left=left)
                out[idx] = (sec, rounds, new, whose)
                if got and answers is not None:
                    answers[idx] = got[0]
                    if changes is not None and left:
                        changes[idx] = left[0]
                break
            except Exception:  # noqa: BLE001 - one that does not run here (a stub): the next
                continue
    return out


def candidate_after(chosen, base_times, fn_of, h, budget_sec):
    """[[function, call number, candidate's seconds a call, baseline's, rounds, timed on new
    values, whose the baseline's time is (baseline, or a reference for a stub)]]: the candidate
    on the same kind of inputs as the baseline."""
    rows = []
    end = _WALL() + budget_sec
    for idx, rec, args, kwargs in chosen:
        if idx not in base_times or _WALL() > end:
            continue
        base_sec, base_rounds, new, whose = base_times[idx]
        try:
            got = least(fn_of(rec), args, kwargs, h, max(0.0, end - _WALL()),
                        ks=new_values(args, kwargs, h) if new else None)
        except Exception:  # noqa: BLE001 - new values the baseline takes and it refuses: timed on copies
            got, new = None, False
            try:
                got = least(fn_of(rec), args, kwargs, h, max(0.0, end - _WALL()))
            except Exception:  # noqa: BLE001 - the probes' loop says why
                continue
        if got is not None:
            rows.append([rec["fn"], rec.get("n"), got[0], base_sec, min(got[1], base_rounds), new, whose])
    return rows
