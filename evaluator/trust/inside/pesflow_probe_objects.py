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
import random
import sys
import time

_OTHER = object()  # a value of no kind both classes share: not compared
_RAISED = object()  # a step that raised: the replay ends there
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
    outs, spent = [], []  # the seconds in each method, not in the replay's own bookkeeping
    t_start = time.perf_counter()
    for i, (name, a, k) in enumerate(history["calls"]):
        if (steps is not None and i >= steps) or (seconds is not None and i and time.perf_counter() - t_start > seconds):
            break
        for j, x in list(enumerate(a)) + list(k.items()):
            if not isinstance(x, _SCALARS):
                seen.setdefault(id(x), (i, j))
        method = getattr(obj, name)
        t0 = time.perf_counter()
        out = method(*a, **k)
        h["sync"]()
        spent.append(time.perf_counter() - t0)
        outs.append(canon(out, seen, h))
    return outs, spent, history


def kept_steps(t_same, t_copy):
    """Steps many times slower on copies of their inputs than on the same objects again (4x: one
    step of a sequence, measured twice with the collector off, against a whole call's 8x)."""
    return [i for i, (a, b) in enumerate(zip(t_same, t_copy)) if b > 4 * a and b - a > 1e-4]


def timed_pair(cls, blob, h, steps, hist):
    was = gc.isenabled()
    gc.disable()  # a collection lands where allocations add up: never inside one replay and not the other
    try:
        _, t_same, _ = replay(cls, blob, h, steps=steps, history=hist)  # the same input objects
        _, t_copy, _ = replay(cls, blob, h, steps=steps)  # copies of them
    finally:
        if was:
            gc.enable()
    return t_same, t_copy


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

    t0 = time.perf_counter()
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
        if seconds is not None and time.perf_counter() - t0 > seconds:
            break
    t0 = time.perf_counter()
    for _ in range(filled if drain_steps is None else drain_steps):
        for name in drain:
            if not step(name, (), {}):
                return outs
        if seconds is not None and time.perf_counter() - t0 > seconds:
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
    return [("wrong_on_unchecked_inputs", "%s: %s answered otherwise than the baseline's in %d of %d calls once its calls "
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
            t_same, t_copy = timed_pair(cand_cls, blob, h, len(cand_out), hist)
            slow = kept_steps(t_same, t_copy)
            for _ in range(2):  # measured twice more: the same steps each time, or it was the machine
                if not slow:  # (a busy 2-core machine made an honest 85 us step 4x slower twice in a row)
                    break
                t_same2, t_copy2 = timed_pair(cand_cls, blob, h, len(cand_out), hist)
                slow = [i for i in kept_steps(t_same2, t_copy2) if i in slow]
            notes.append([rec["fn"], sum(t_first), sum(t_same), sum(t_copy), slow[:8]])
            if slow:
                i = slow[0]
                findings.append(("output_cached", "%s: call %d (%s) took %.3g s on copies of its inputs, %.3g s on the same "
                                 "objects again" % (where, i + 1, hist["calls"][i][0], t_copy[i], t_same[i])))
        except Exception:  # noqa: BLE001 - no conclusion
            pass
    return findings, matches, notes
