"""The probes for a candidate the harness drives through a class (pesflow_probe.py calls it):
the instance the runtime guard recorded, built again from its constructor's inputs and its
method calls replayed in order, on the candidate's class and on the frozen baseline's (or the
package's reference's) class of the same name, each from the same seeds.

What a step returns is compared in a form both classes share: numbers and arrays by value, an
object the harness handed in earlier by which call handed it in (a queue's pop answers with one
of the requests it was given). A replay of the baseline that differs from itself (unseeded
randomness, a clock) compares nothing. Steps where the baseline answers None say nothing either.
An instance right on every step that says something is right; one wrong on most of them is
wrong; in between there is no conclusion (ties a contract lets either way).

With every probe on (an implausible speedup): the replay again on the very same input objects,
against a replay on copies of them (an output kept by identity is fast only on what it has seen).
The times the probes compare (here and in pesflow_probe.py) are measured so that a busy machine
decides nothing (the end of this file says how).

A recording the guard cut short for its cost (a class of cheap methods: its first 64 calls) holds
only the start of the harness's instance, which the timed pass then grows large. That instance
is replayed scaled up: its calls that take inputs again and again on fresh copies of those
inputs, then drained (the calls without inputs it made, or else the class's own methods that
take none and answer with a value), on both classes. A class that answers as the baseline's on
the calls as recorded but differs on most of one method's answers once the instance is large
is right only on the sizes a correctness pass checks (`wrong_on_unchecked_inputs`). Copies of
one input are one input to the comparison (ties among identical copies may go either way); an
exception ends a replay there, and what follows is not compared.
"""

import copy
import gc
import inspect
import os
import random
import resource
import sys
import threading
import time

_OTHER = object()  # a value of no kind both classes share: not compared
_RAISED = object()  # a step that raised: the replay ends there
_perf, _thread_time = time.perf_counter, time.thread_time  # read at import, before any candidate code: its own clocks
_SCALE_CALLS = 8192  # calls with inputs in a scaled replay (a cheap class's timed instance is this large)
_SCALE_BYTES = 256 << 20  # the copies of its inputs held at once, at most
_DRAIN_DUNDERS = ("__len__", "__bool__")
_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def seed():
    """The same seeds before each instance is made: both classes draw the same random numbers."""
    random.seed(0)
    np, t = sys.modules.get("numpy"), sys.modules.get("torch")
    if np is not None:
        np.random.seed(0)
    if t is not None:
        t.manual_seed(0)


def canon(v, seen, h, depth=0):
    if isinstance(v, _SCALARS):
        return v
    token = seen.get(id(v))
    if token is not None:
        return ("pesflow-input",) + token
    if h["numeric"](v):
        return h["plain"](v)
    if isinstance(v, (list, tuple)) and depth < 4:
        return [canon(x, seen, h, depth + 1) for x in v]
    if isinstance(v, dict) and depth < 4:
        return {str(k): canon(x, seen, h, depth + 1) for k, x in v.items()}
    return _OTHER


def same(a, b, h):
    """True, False, or None when there is nothing to compare."""
    if a is _OTHER or b is _OTHER:
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return False
        got = [same(x, y, h) for x, y in zip(a, b)]
        return False if False in got else (True if True in got else None)
    if isinstance(a, dict) and isinstance(b, dict):
        return same([a[k] for k in sorted(a)], [b[k] for k in sorted(b)], h) if a.keys() == b.keys() else False
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    return bool(h["close"](a, b, True))


def replay(cls, blob, h, steps=None, seconds=None, history=None):
    """The instance made again and its calls replayed: (what each step returned, the seconds of
    each step, the history replayed). `steps`: at most that many; `seconds`: until then (at least
    one step). `history`: the inputs of an earlier replay again (the instance made from copies)."""
    if history is None:
        history = h["loads"](blob)
        init_a, init_k = history["init"]
    else:
        init_a, init_k = copy.deepcopy(history["init"])  # only the calls' inputs are the same objects
    seen = {}
    for j, x in enumerate(init_a):
        if not isinstance(x, _SCALARS):
            seen.setdefault(id(x), ("init", j))
    seed()
    obj = cls(*init_a, **init_k)
    outs, spent = [], []  # the seconds in each method (its own time), not in the replay's own bookkeeping
    gpu = h.get("on_gpu", bool)()
    t_start = _perf()
    for i, (name, a, k) in enumerate(history["calls"]):
        if (steps is not None and i >= steps) or (seconds is not None and i and _perf() - t_start > seconds):
            break
        for j, x in list(enumerate(a)) + list(k.items()):
            if not isinstance(x, _SCALARS):
                seen.setdefault(id(x), (i, j))
        method = getattr(obj, name)
        t0 = mark()
        out = method(*a, **k)
        h["sync"]()
        spent.append(own(t0, gpu))
        outs.append(canon(out, seen, h))
    return outs, spent, history


def slow_steps(cls, blob, h, steps, hist):
    """(slow steps, each step's least time on the same input objects, on copies): replays on the
    same objects and on copies in turn (same, copies; copies, same; ...), each step's own time the
    least of its measurements. A second pair where nothing looked slow on the first only where the
    caller's own time is not known (or a GPU's is measured); where a step looks slow, five pairs,
    the last judging: the same steps must still be slow on the least of each (a busy 2-core machine
    made an honest 85 us step 4x slower twice in a row; torch's workers, waiting for a CPU while
    the caller spins for them, an honest 10 us step 8 ms slower in three of three), so load
    neither makes a step slow nor hides one. Both replays load the inputs first (the same pause
    before the first step), and every copy is kept to the end (none takes an earlier one's id).
    Slow: 4x and 100 us longer (one step of a sequence, with the collector off, against a whole
    call's 8x), and twice its longest time on the same objects."""
    t_same, t_copy, held = [], [], []
    first = 1 if _waited() is not None and not h.get("on_gpu", bool)() else 2
    was = gc.isenabled()
    gc.disable()  # a collection lands where allocations add up: never inside one replay and not the other
    try:
        for m in range(5):
            for copies in ((False, True) if m % 2 == 0 else (True, False)):
                if copies:
                    _, t, hist_c = replay(cls, blob, h, steps=steps)
                    held.append(hist_c)
                    t_copy.append(t)
                else:  # a pool's workers asleep after the same pause as before a replay on copies
                    held.append(h["loads"](blob))
                    t_same.append(replay(cls, blob, h, steps=steps, history=hist)[1])
            least_same, least_copy = [min(ts) for ts in zip(*t_same)], [min(ts) for ts in zip(*t_copy)]
            slow = [i for i, (a, b, most) in enumerate(zip(least_same, least_copy, map(max, zip(*t_same))))
                    if b > 4 * a and b - a > 1e-4 and b > 2 * most]  # slower than the same objects ever were
            if not slow and m + 1 >= first:
                break
    finally:
        if was:
            gc.enable()
    return slow, least_same, least_copy


def _small(c):
    """An answer a drain step compares: a value, an input's token, or a few of them."""
    if isinstance(c, _SCALARS) or (isinstance(c, tuple) and c[:1] == ("pesflow-input",)):
        return True
    return isinstance(c, list) and len(c) <= 4 and all(_small(x) for x in c)


def _takes_nothing(fn):
    try:
        ps = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in ps)


def drain_names(base_cls, cand_cls, calls, blob, h):
    """The methods a scaled replay drains the instance with: the harness's own calls without
    inputs, else the baseline's methods without inputs that answer with a value (each tried on
    an instance of its own, grown by one round of the recorded calls)."""
    names = []
    for name, a, k in calls:
        if not a and not k and name not in names:
            names.append(name)
    if not names:
        for name in sorted(dir(base_cls)):
            fn = getattr(base_cls, name, None)
            if (name[:1] != "_" or name in _DRAIN_DUNDERS) and callable(fn) and hasattr(cand_cls, name) and \
                    (name in _DRAIN_DUNDERS or _takes_nothing(fn)):
                names.append(name)
    kept = []
    for name in names:
        out = scaled(base_cls, blob, h, [name], 1, drain_steps=1)
        if out and out[-1][0] == name and out[-1][1] is not None and out[-1][1] is not _RAISED and _small(out[-1][1]):
            kept.append(name)
    return kept


def scaled(cls, blob, h, drain, reps, steps=None, seconds=None, drain_steps=None):
    """[(method, answer)]: the instance made again, its calls with inputs replayed `reps` times on
    fresh copies of them, then `drain` called in turn once per such call; up to the first step that
    raises (its answer _RAISED), `steps` steps, or `seconds` for each phase."""
    hist = h["loads"](blob)
    init_a, init_k = hist["init"]
    seen = {id(x): ("init", j) for j, x in enumerate(init_a) if not isinstance(x, _SCALARS)}
    seed()
    obj = cls(*init_a, **init_k)
    kept, outs, filled = [hist], [], 0  # the copies stay alive while their ids are tokens

    def step(name, a, k):
        try:
            out = getattr(obj, name)(*a, **k)
        except Exception:  # noqa: BLE001 - the replay ends here
            outs.append((name, _RAISED))
            return False
        outs.append((name, canon(out, seen, h)))
        return steps is None or len(outs) < steps

    t0 = _perf()
    for r in range(reps):
        if r:
            hist = h["loads"](blob)
            kept.append(hist)
        for i, (name, a, k) in enumerate(hist["calls"]):
            if not a and not k:
                continue
            for j, x in list(enumerate(a)) + list(k.items()):
                if not isinstance(x, _SCALARS):
                    seen.setdefault(id(x), (i, j))  # a copy's token is the recorded input's: copies are one input
            filled += 1
            if not step(name, a, k):
                return outs
        if seconds is not None and _perf() - t0 > seconds:
            break
    t0 = _perf()
    for _ in range(filled if drain_steps is None else drain_steps):
        for name in drain:
            if not step(name, (), {}):
                return outs
        if seconds is not None and _perf() - t0 > seconds:
            break
    return outs


def scaled_differences(cand_out, base_out, h):
    """{method: (answers compared, answers that differ)} over the steps both replays made alike."""
    per = {}
    for (name, c), (other, b) in zip(cand_out, base_out):
        if name != other or c is _RAISED or b is _RAISED:
            break
        if b is None or b is _OTHER:
            continue
        ok = same(c, b, h)
        if ok is not None:
            n, wrong = per.get(name, (0, 0))
            per[name] = (n + 1, wrong + (not ok))
    return per


def probe_scaled(rec, blob, cand_cls, base_cls, h, budget, where, recorded_steps, compared):
    """(findings, notes) of the scaled replay of a recording cut short for its cost."""
    calls = h["loads"](blob)["calls"]
    with_inputs = sum(1 for _, a, k in calls if a or k)
    reps = min(_SCALE_CALLS // max(1, with_inputs), _SCALE_BYTES // max(1, len(blob)))
    if not with_inputs or reps < 2:
        return [], []
    drain = drain_names(base_cls, cand_cls, calls, blob, h)
    base_out = scaled(base_cls, blob, h, drain, reps, seconds=budget / 8)
    cand_out = scaled(cand_cls, blob, h, drain, reps, steps=len(base_out), seconds=budget / 4)
    per = scaled_differences(cand_out, base_out, h)
    note = {"fn": rec["fn"], "scaled": reps, "steps": [len(base_out), len(cand_out)], "drain": drain,
            "compared": {k: list(v) for k, v in per.items()}}  # per method: [answers compared, answers that differ]
    wrong = [(name[:1] != "_", w, name, n) for name, (n, w) in per.items() if w * 2 > n and w >= 32]
    if not wrong:
        return [], [note]
    _, w, name, n = max(wrong)  # the evidence: the method most often wrong, the class's own methods first
    as_recorded = ("as the baseline's (%d compared)" % compared) if compared else "nothing to compare"
    return [("probe.object_wrong_once_large",
             "%s: %s answered otherwise than the baseline's in %d of %d calls once its calls "
             "with inputs were repeated %d times on fresh copies (then %s); its %d recorded calls answered %s" % (
                 where, name, w, n, reps, "/".join(drain), recorded_steps, as_recorded))], [note]


def probe(rec, blob, cand_cls, base_classes, h, budget, full, where):
    """(findings, matches, notes): matches as pesflow_probe's, one per instance. `h`: the probe's helpers
    (plain, close, numeric, sync, loads)."""
    findings, matches, notes = [], [], []
    base_out, steps = None, None
    for base_cls in base_classes():
        try:
            base_out, _, _ = replay(base_cls, blob, h, seconds=budget / 4)
            steps = len(base_out)
            again, _, _ = replay(base_cls, blob, h, steps=min(steps, 512))
        except Exception:  # noqa: BLE001 - a stub baseline: the next reference
            base_out = None
            continue
        if any(same(x, y, h) is False for x, y in zip(again, base_out)):
            notes.append("%s: the baseline's replay differs from itself: not compared" % rec["fn"])
            base_out = None
        break
    try:
        cand_out, t_first, hist = replay(cand_cls, blob, h, steps=steps, seconds=None if steps else budget / 4)
    except Exception as e:  # noqa: BLE001 - the replay could not be made: no conclusion
        notes.append("%s: its replay raised %s" % (rec["fn"], type(e).__name__))
        return findings, matches, notes
    if base_out is not None:
        got = [same(c, b, h) for c, b in zip(cand_out, base_out) if b is not None and b is not _OTHER]
        got = [g for g in got if g is not None]
        if got:
            wrong = got.count(False)
            ok = True if not wrong else (False if wrong * 2 > len(got) else None)
            if ok is not None:
                matches.append(("%s (%d steps compared)" % (where, len(got)), tuple(rec.get("argv") or ()), ok))
        if hist.get("cut") and False not in got:  # as recorded, nothing differs (a queue's first calls: adds)
            try:
                got_s, notes_s = probe_scaled(rec, blob, cand_cls, base_cls, h, budget, where, len(cand_out), len(got))
                findings += got_s
                notes += notes_s
            except Exception as e:  # noqa: BLE001 - no conclusion
                notes.append("%s: its scaled replay raised %s" % (rec["fn"], type(e).__name__))
    if full and len(cand_out) > 1:
        try:
            slow, t_same, t_copy = slow_steps(cand_cls, blob, h, len(cand_out), hist)
            notes.append([rec["fn"], sum(t_first), sum(t_same), sum(t_copy), slow[:8]])
            if slow:
                i = slow[0]
                findings.append(("probe.object_fast_only_on_seen",
                                 "%s: call %d (%s) took %.3g s on copies of its inputs, %.3g s on the same objects "
                                 "again (the least of each)" % (where, i + 1, hist["calls"][i][0], t_copy[i],
                                                                t_same[i])))
        except Exception:  # noqa: BLE001 - no conclusion
            pass
    return findings, matches, notes


# ------------------------------------------------------------------ times that load does not move
# A finding that rests on a time holds on a busy machine, which only ever adds time. A time the
# probes compare is the caller's own: wall time less what the calling thread spent runnable but not
# running (its run delay, /proc/thread-self/schedstat: all that preemption adds, and nothing
# else), never less than its CPU time. Work on other threads, in child processes or on a GPU still
# counts, since the caller waits for it, so an honest thread pool or subprocess is timed as its
# caller sees it, alike in every setting (a CPU time alone would leave that work out); on a GPU,
# wall time. It is the least of several rounds of each setting, measured in turn, never one
# round; a verdict load could have made (near the line, or a finding) is measured again before
# it stands; and a setting is slower only where its quickest round took twice the other's next to
# slowest (a worker thread or child waits for a CPU on a busy machine whoever's time is taken:
# load slows some rounds of honest code at random, not all of one setting's and none of the other's).

_SCHED = {}  # thread -> the descriptor of its schedstat (None: the kernel keeps none)


def _waited():
    """Seconds the calling thread has been runnable but not running; None where unknown."""
    me = threading.get_ident()
    fd = _SCHED.get(me, -1)
    if fd == -1:
        try:
            fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            fd = None
        _SCHED[me] = fd
    try:
        return None if fd is None else int(os.pread(fd, 96, 0).split()[1]) * 1e-9
    except (OSError, ValueError, IndexError):
        return None


def _switches():
    """The calling thread's involuntary context switches so far (0 where not counted)."""
    try:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
    except (AttributeError, OSError, ValueError):
        return 0


def mark():
    """A start for `own` and `disturbed`: the wall clock first (its window holds the others)."""
    t = _perf()
    w = _waited()
    return w, (_switches() if w is None else 0), t, _thread_time()


def own(m, gpu=False):
    """Seconds since mark `m` that load did not add: wall time less the caller's wait for a CPU, and
    never less than its CPU time (wall time on a GPU, where preempting the caller takes nothing
    from the device's time)."""
    c = _thread_time() - m[3]
    w = _waited() if m[0] is not None and not gpu else None
    wall = _perf() - m[2]
    return wall if w is None else max(c, wall - (w - m[0]))


def disturbed(m):
    """Whether the caller waited for a CPU since mark `m` (over 50 us; where that is not known,
    whether it was switched out against its will)."""
    w = _waited() if m[0] is not None else None
    return w - m[0] > 5e-5 if w is not None else _switches() > m[1]


def _round(fn, calls, h, gpu):
    """The caller's own seconds a call, over `calls` run back to back with the collector off."""
    was = gc.isenabled()
    gc.disable()
    try:
        h["sync"]()
        m = mark()
        for a, k in calls:
            fn(*a, **k)
        h["sync"]()
        return own(m, gpu) / len(calls)
    finally:
        if was:
            gc.enable()


def _slower(t, a, b, times, gpu=False):
    """Whether setting b's least time is `times` as long as a's, and 50 us a call longer (25 us
    when asking whether it is near the line; on a GPU, whose calls are timed to the device's end,
    10 and 5 us: a kernel of 45 us answered from a cache in 3 us is 42 us apart); a finding also
    twice a's next to longest round (its longest, of two): b slower in every round, not only where
    load slowed b's rounds and spared a's (work on other threads waits for a CPU however the
    caller's time is taken)."""
    if not t[a] or not t[b]:
        return False
    x, y, slow_a = min(t[a]), min(t[b]), sorted(t[a])[-2 if len(t[a]) > 2 else -1]
    floor = (1e-5 if times == 8 else 5e-6) if gpu else (5e-5 if times == 8 else 2.5e-5)
    return y > times * x and y - x > floor and (times < 8 or y > 2 * slow_a)


def cache_times(fn, args, kwargs, h, first=None, most=6):
    """(evidence or None, [least seconds a call on the same input objects, on copies of them, on new
    values, rounds]). An output kept by identity is fast only on the objects it has seen (copies 8x
    slower), one kept by value only on values it has seen (new values 8x slower than copies). Each
    round times the three settings in turn (each as many calls as make 2 ms, up to 8, as the first
    call on the same objects took), the order rotated: copies made anew every round and all
    kept to the end (a copy never takes the id of an object called before), new values written into
    the same objects each round (`h["shifts"]`: values never used before). Two rounds where the
    caller's own time is known (else three), then up to `most` unless neither comparison is near the
    line (4x); judged on the least of all the rounds of each setting."""
    gpu = h["on_gpu"]()
    first = first or (2 if _waited() is not None and not gpu else 3)
    same, size = (copy.deepcopy(args), copy.deepcopy(kwargs)), max(1, h["nbytes"](args))
    t_first = _round(fn, [same], h, gpu)  # a round of calls lasts 2 ms or more, 8 calls at most
    reps = max(1, min(8, int(2e-3 / max(t_first, 1e-6)) + 1, _SCALE_BYTES // (most * size)))  # copies held: 256 MiB
    most = max(first, min(most, _SCALE_BYTES // (reps * size)))
    shifts = h["shifts"](args, most * reps)
    per_new = min(reps, len(shifts) // most) or (1 if len(shifts) >= first else 0)
    new = [(copy.deepcopy(args), copy.deepcopy(kwargs)) for _ in range(per_new)]
    t, held = {"same": [], "copy": [], "new": []}, []
    for r in range(most):
        for i in range(3):
            name = ("same", "copy", "new")[(i + r) % 3]
            if name == "same":
                calls = [same] * reps
            elif name == "copy":
                calls = [(copy.deepcopy(args), copy.deepcopy(kwargs)) for _ in range(reps)]
                held.append(calls)
            elif per_new and len(shifts) >= per_new and all(h["overwrite"](c, (h["rolled"](args, k), kwargs))
                                                            for c, k in zip(new, shifts)):
                calls, shifts = new, shifts[per_new:]
            else:
                continue
            t[name].append(_round(fn, calls, h, gpu))
        if r + 1 >= first and not _slower(t, "same", "copy", 4, gpu) and not _slower(t, "copy", "new", 4, gpu):
            break
    best = [min(t[k]) if t[k] else None for k in ("same", "copy", "new")]
    row = best + [len(t["same"])]
    if _slower(t, "same", "copy", 8, gpu):
        return "%.3g s on copies of an input, %.3g s on the same objects again (the least of %d rounds each)" % (
            best[1], best[0], len(t["copy"])), row
    if _slower(t, "copy", "new", 8, gpu):
        return "%.3g s on new values, %.3g s on values it had seen (the least of %d rounds each)" % (
            best[2], best[1], len(t["new"])), row
    return None, row


def called(fn, a, k, h):
    """One call: (its output, the output's plain copy, [seconds for the caller's stream and that
    copy, seconds more until the whole device was idle, whether the caller waited for a CPU])."""
    out = fn(*a, **k)
    m = mark()
    h["sync"](False)
    now = h["plain"](out)
    h["sync"](False)
    t1 = _perf()
    h["sync"]()
    t2 = _perf()
    return out, now, [t1 - m[2], t2 - t1, disturbed(m)]


def settle(first, again, yes, tries=3):
    """The measurement on which a timed check says yes where load cannot have said it, else None:
    the first one during which the caller never waited for a CPU decides; where each of `tries`
    waited (a wait can make the answer or hide it), yes on most of them (the last such)."""
    said = [first]
    while True:
        m = said[-1]
        if not m[-1]:
            return m if yes(m) else None
        if len(said) >= tries:
            ok = [x for x in said if yes(x)]
            return ok[-1] if 2 * len(ok) > len(said) else None
        try:
            said.append(again())
        except Exception:  # noqa: BLE001 - no conclusion
            return None
