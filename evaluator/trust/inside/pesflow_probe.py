"""pesflow's probes, run as a fresh process after the grader has finished (so the score is
untouched), in the grading's own sandbox (its scope files first put back as graded) or in a
fresh one of the same image: the candidate's entry points called again on the inputs the runtime
guard kept from the harness's calls (those of the timing pass too), with the process's argv
and working folder as they were.

For each kept call: the output's kinds; the output again after a pause (work still running
after the return changes it); the output against the frozen baseline's (or the package's
reference's) on the same input; the inputs rewritten in place to another input's values and
the call repeated (an output kept from before hands back the old answer); and the time of a
repeated call on the same objects against calls on copies and on new values (an output
cache is fast only on what it has seen), measured so that load decides nothing
(pesflow_probe_objects.py, its end). Writes /.pesflow-trust-out/probe.json. Standard
library (numpy and torch when the inputs hold them); Python 3.8+.
"""

import atexit
import copy
import hashlib
import importlib
import json
import os
import sys
import time

import pesflow_probe_inputs as inputs
import pesflow_probe_objects as objects
import pesflow_same_answer as same_answer
from pesflow_probe_inputs import load_module, loads
from pesflow_probe_values import _np, _torch, close, numeric, on_gpu, plain, sync  # noqa: F401 - the probes' helpers

_T0 = time.perf_counter()
_T0_WALL = time.time()  # the host's clock too: what the handing over costs (screen.py)
WARM = None  # what the warm probe (pesflow_probe_warm.py) imported before the grader ended, when it runs this

CONFIG = "/.pesflow-trust/config.json"
if not os.path.exists(CONFIG):  # pesflow's own tests (the guard's rule: a grading's config always wins)
    CONFIG = os.environ.get("PESFLOW_TRUST_TEST_CONFIG") or CONFIG
OUT = "/.pesflow-trust-out/probe.json"
if not os.path.exists(os.path.dirname(OUT)):
    OUT = os.environ.get("PESFLOW_TRUST_TEST_OUT") or OUT


_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def _flat(v):
    """A list of plain scalars (or of tuples of them): new values of it are its items reordered."""
    return type(v) is list and len(v) > 1 and all(
        type(x) in _SCALARS or (type(x) is tuple and all(type(y) in _SCALARS for y in x)) for x in v)


def leaves(v, out=None):
    """The mutable values an input holds, in order: arrays, tensors and lists of scalars (inputs
    of every kind the harness passes, not only arrays, get new values)."""
    out = [] if out is None else out
    np, t = _np(), _torch()
    if (np is not None and isinstance(v, np.ndarray) and v.flags.writeable) or (t is not None and isinstance(v, t.Tensor)) or _flat(v):
        out.append(v)
    elif isinstance(v, (tuple, list)):
        for x in v:
            leaves(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            leaves(x, out)
    return out


def _length(leaf):
    return len(leaf) if type(leaf) is list else (leaf.shape[0] if getattr(leaf, "ndim", 0) >= 1 else 0)


def rolled(args, k=0):
    """New values of the same kinds, shapes and range: each array's elements (a list's items)
    rolled along its first axis (indices stay valid indices), by a shift that `k` varies."""
    new = copy.deepcopy(args)
    for leaf in leaves(new):
        n = _length(leaf)
        if n > 1:
            shift = (max(1, n // 3) + k) % n or 1
            t = _torch()
            if type(leaf) is list:
                leaf[:] = leaf[-shift:] + leaf[:-shift]
            elif t is not None and isinstance(leaf, t.Tensor):
                leaf.copy_(t.roll(leaf, shifts=shift, dims=0))
            else:
                _np().copyto(leaf, _np().roll(leaf, shift, axis=0))
    return new


def shifts(args, count):
    """Up to `count` values of `rolled`'s k, each giving values no other k gave (k=0 among them)."""
    n = max([_length(x) for x in leaves(args)] or [0])
    got = {}
    for k in range(n + 1 if n > 1 else 0):
        got.setdefault((max(1, n // 3) + k) % n or 1, k)  # the shift of the longest array
    return sorted(got.values())[1:count + 1]


def nbytes(args):
    return sum(int(getattr(x, "nbytes", 0) or (x.numel() * x.element_size() if hasattr(x, "numel") else 0)) for x in leaves(args))


def overwrite(dst, src):
    """Rewrite dst's arrays (lists) in place with src's values (same shapes); False when they differ."""
    a, b = leaves(dst), leaves(src)
    if not a or len(a) != len(b) or any(type(x) is not type(y) or (len(x) if type(x) is list else tuple(x.shape)) !=
                                        (len(y) if type(y) is list else tuple(y.shape)) for x, y in zip(a, b)):
        return False
    t = _torch()
    for x, y in zip(a, b):
        if type(x) is list:
            x[:] = y
        elif t is not None and isinstance(x, t.Tensor):
            x.copy_(y)
        else:
            _np().copyto(x, y)
    return True


def late_inputs_differ(fn, args, kwargs):
    """GPU inputs written behind a long wait on the caller's stream: work ordered after the
    caller's stream (honest, whatever streams it uses inside) sees them; work on a stream that
    does not wait for it reads what was there before (NaN here), and answers otherwise."""
    t = _torch()
    sleep = getattr(getattr(t, "cuda", None), "_sleep", None) if t is not None else None
    if sleep is None or not any(getattr(x, "is_cuda", False) for x in leaves(args)):
        return False
    try:
        src = rolled(args)
        want = plain(fn(*copy.deepcopy(src), **copy.deepcopy(kwargs)))
        dst = copy.deepcopy(src)
        for leaf in leaves(dst):
            if getattr(leaf, "is_floating_point", lambda: False)():
                leaf.fill_(float("nan"))
        sync()
        sleep(int(2e8))  # about 0.1 s of the GPU's clock, on the caller's stream
        for d, v in zip(leaves(dst), leaves(src)):
            if hasattr(d, "copy_"):
                d.copy_(v)  # queued behind the wait
        got = plain(fn(*dst, **copy.deepcopy(kwargs)))
        sync()
        return not close(got, want, loose=True)
    except Exception:  # noqa: BLE001 - no conclusion
        return False


def _unchanged(used, original):
    """Whether a call left its inputs as they were (same plain values, exactly)."""
    try:
        return close(plain(used), plain(original))
    except TypeError:  # not plain values: no conclusion
        return False


def _entry(mod, name):
    fn = getattr(mod, name)
    return getattr(fn, "__wrapped__", fn)


def first_answers(recs, module):
    """{record's index: (the candidate's output, whether the call left its inputs as they were)}
    for each kept call whose output the grader got: one call each, the first of the probe's."""
    out = {}
    for idx, rec in enumerate(recs):
        if not rec.get("got") or rec.get("cls"):
            continue
        try:
            blob = inputs.blob(rec, os.path.dirname(CONFIG))
            if hashlib.sha256(blob).hexdigest() != rec["sha256"]:
                continue  # the probes' loop names it
            fn = _entry(module(rec["file"], rec), rec["fn"])
            args, kwargs = loads(blob, rec.get("argv"))
            if isinstance(sys.argv, list) and rec.get("argv"):
                list.__setitem__(sys.argv, slice(None), list(rec["argv"]))
            a0, k0 = copy.deepcopy(args), copy.deepcopy(kwargs)
            got = fn(*a0, **k0)
            sync()
            out[idx] = (plain(got), _unchanged((a0, k0), (args, kwargs)))
        except Exception:  # noqa: BLE001 - no conclusion (the probes' loop says what failed)
            continue
    return out


def asked_otherwise(rec, mine, inputs_kept, want, checks):
    """Same answer whoever asks: the output the grader's call got (kept by the guard the moment
    it returned) against the same call made here, in a process that differs from the grader's
    in every way an honest function cannot notice. A (family, evidence) where the grader got
    an answer that neither this call nor the baseline gives while the two agree (an answer
    with many right forms, or one that varies from process to process, agrees with neither);
    None otherwise, or where the call changes its own inputs (the inputs kept are not the
    ones it answered)."""
    got = rec.get("got")
    if not got or want is None or not inputs_kept:
        return None
    try:
        blob = inputs.blob(got, os.path.dirname(CONFIG))
    except OSError:
        return None
    if hashlib.sha256(blob).hexdigest() != got.get("sha256"):
        return ("probe.answer_rewritten", "the output the grader got from it was rewritten before the probe")
    try:
        seen = loads(blob, rec.get("argv"))
    except Exception:  # noqa: BLE001 - an output that cannot be rebuilt here: no conclusion
        return None
    checks["asked"] = checks.get("asked", 0) + 1
    if close(seen, mine, loose=True) or not close(mine, want, loose=True) or close(seen, want, loose=True):
        return None
    return ("probe.answer_depends_on_asker", "the grader's call %s got an output that the same call made by pesflow, on the same "
            "inputs, does not give (nor does the baseline)" % rec.get("n"))


# what pesflow_probe_objects.py's probes and timings are given of this module's
HELPERS = {"plain": plain, "close": close, "numeric": numeric, "sync": sync, "on_gpu": on_gpu, "rolled": rolled,
           "shifts": shifts, "nbytes": nbytes, "overwrite": overwrite}


def main():
    t_main = time.perf_counter()
    spent = [0.0]  # loading the candidate's modules and the references (imports, a JIT's build)
    cfg = json.load(open(CONFIG))["probe"]
    deadline = time.monotonic() + 600  # until the first call has run (then the budget)
    warm = None
    full = bool(cfg.get("full"))
    findings, checks = [], {"calls": 0, "compared": 0, "skipped": [], **({"warm": WARM} if WARM is not None else {})}
    recs = cfg.get("records", [])
    checks["restored"] = inputs.restore(cfg.get("restore") or {}, os.path.dirname(CONFIG))
    first = recs[0] if recs else None
    loaded = checks["loads"] = []  # [what, seconds]: where the fixed cost of a probe goes
    for name in ("numpy", "torch"):  # what the inputs hold, from the interpreter's own path first:
        if name not in sys.modules and any(name.encode() in inputs.blob(r, os.path.dirname(CONFIG)) for r in recs):  # never a folder the grading wrote
            t_load = time.perf_counter()
            try:
                importlib.import_module(name)
                loaded.append([name, round(time.perf_counter() - t_load, 4)])
            except Exception:  # noqa: BLE001 - not installed there: the harness's path may have it
                pass
    if first:
        sys.path[:0] = [p for p in first.get("sys_path") or [] if p not in sys.path]
        try:
            os.chdir(first.get("cwd") or "/")
        except OSError:
            pass
    mods, refs, matches = {}, {}, []
    replayable = []  # (rec, module key, fn, args, kwargs): the calls a profile may repeat
    late_checked = False
    spent[0] += sum(t for _, t in loaded)

    def reference(rec, key, i):
        """The i-th reference module of `key` (the baseline first), loaded when first needed:
        loading a module can build a kernel. None where it cannot be loaded here."""
        refs.setdefault(key, [None] * len(cfg.get("references", {}).get(key, [])))
        if refs[key][i] is None:
            t_load = time.perf_counter()
            try:
                refs[key][i] = load_module(rec, cfg["references"][key][i], "__pesflow_ref%d" % i)
            except Exception:  # noqa: BLE001 - never tried again
                refs[key][i] = False
            spent[0] += time.perf_counter() - t_load
            loaded.append(["reference %d of %s" % (i, os.path.basename(key)), round(time.perf_counter() - t_load, 4)])
        return refs[key][i] or None

    def module(key, rec):
        if key not in mods:
            t_load = time.perf_counter()
            mods[key] = load_module(rec)
            refs.setdefault(key, [None] * len(cfg.get("references", {}).get(key, [])))  # each loaded when first needed
            spent[0] += time.perf_counter() - t_load
            loaded.append([os.path.basename(key), round(time.perf_counter() - t_load, 4)])
        return mods[key]

    helpers = HELPERS
    paced = None  # the baseline timed before any candidate code is loaded (pesflow_probe_pace.py)
    base_said = {}  # {record's index: the baseline's answer}, from its first timed call there
    if cfg.get("pace") and not cfg.get("only_profile"):
        import pesflow_probe_pace as pace  # noqa: PLC0415 - slow to import in every probe: only where the figure is to be reproduced
        chosen = pace.cases(recs, cfg["pace"].get("baseline_refs") or (), lambda rec: inputs.blob(rec, os.path.dirname(CONFIG)), loads)
        paced = (chosen, pace.baseline_first(chosen, lambda rec: getattr(reference(rec, rec["file"], 0), rec["fn"], None),
                                             helpers, float(cfg["pace"].get("budget_sec", 3)) / 2, base_said))
    # the first call on each kept input whose answer the grader got, before any other: what a
    # candidate answers pesflow must not hang on how many calls pesflow made before it
    answered = {} if cfg.get("only_profile") else first_answers(recs, module)
    for idx, rec in enumerate(recs):
        if time.monotonic() > deadline:
            checks["skipped"].append("budget")
            break
        blob = inputs.blob(rec, os.path.dirname(CONFIG))
        if rec.get("size") is not None and len(blob) != rec["size"]:
            checks["skipped"].append("%s: a kept input did not come back whole" % rec["fn"])
            continue
        if hashlib.sha256(blob).hexdigest() != rec["sha256"]:
            findings.append(("probe.input_rewritten", "a kept input of %s was rewritten before the probe" % rec["fn"]))
            continue
        try:
            key = rec["file"]
            module(key, rec)
            if rec.get("cls"):
                cls = getattr(mods[key], rec["cls"])
                loads(blob, rec.get("argv"))  # its inputs can be rebuilt here
            else:
                fn = getattr(mods[key], rec["fn"])
                fn = getattr(fn, "__wrapped__", fn)
                args, kwargs = loads(blob, rec.get("argv"))
        except Exception as e:  # noqa: BLE001 - an input or module the probe cannot rebuild: not the candidate's fault
            checks["skipped"].append("%s: %s" % (rec["fn"], type(e).__name__))
            continue
        if isinstance(sys.argv, list) and rec.get("argv"):
            list.__setitem__(sys.argv, slice(None), list(rec["argv"]))
        if not rec.get("cls"):
            replayable.append((rec, key, fn, args, kwargs))
        if cfg.get("only_profile"):  # a grading no result can come of: its profile alone (evaluator/profile.py)
            continue
        where = "%s (call %s of the process `%s`)" % (rec["fn"], rec["n"], " ".join(map(str, (rec.get("argv") or [])[:3])))
        if rec.get("cls"):
            where = "%s (the instance the process `%s` made first, %s calls)" % (
                rec["cls"], " ".join(map(str, (rec.get("argv") or [])[:3])), rec["n"])
            bases = (lambda rec=rec, key=key: [c for c in (getattr(reference(rec, key, i), rec["cls"], None)
                                                            for i in range(len(refs[key]))) if isinstance(c, type)])
            got, ms, notes = objects.probe(rec, blob, cls, bases, dict(helpers, loads=lambda b: loads(b, rec.get("argv"))),
                                           float(cfg.get("budget_sec", 10)), full, where)
            findings += got
            matches += ms
            checks["calls"] += 1
            checks["compared"] += len(ms)
            if notes:
                checks.setdefault("objects", []).extend(notes)
            if warm is None:
                warm = deadline = time.monotonic() + float(cfg.get("budget_sec", 10))
            continue
        try:
            a0, k0 = copy.deepcopy(args), copy.deepcopy(kwargs)
            def counted(*a, **k):  # a call that returned counts, even where its output is no plain value
                got = fn(*a, **k)
                checks["calls"] += 1
                return got
            out, now, gap = objects.called(counted, a0, k0, helpers)  # gap: the caller's stream and its output's copy, then the rest
            if warm is None:  # the budget counts from here: imports and a JIT's first compile are not probing
                warm = deadline = time.monotonic() + float(cfg.get("budget_sec", 10))
            elif on_gpu():  # measured again where the caller waited for a CPU meanwhile
                gap = objects.settle(gap, lambda: objects.called(fn, copy.deepcopy(args), copy.deepcopy(kwargs), helpers)[2],
                                     lambda g: g[1] > max(2e-4, 5 * g[0]))
                if gap:
                    findings.append(("probe.gpu_busy_after_return", "%s: the GPU was still busy %.3g s after the caller's stream had "
                                     "finished (%.3g s)" % (where, gap[1], gap[0])))
        except TypeError as e:
            findings.append(("probe.output_not_plain", "%s returned a %s, not plain values" % (where, e)))
            continue
        except Exception as e:  # noqa: BLE001
            checks["skipped"].append("%s raised %s" % (rec["fn"], type(e).__name__))
            continue
        time.sleep(0.02)
        sync()
        try:
            later = plain(out)
        except TypeError:
            later = now
        if not close(now, later):
            findings.append(("probe.output_changed_later", "%s: its output changed after it had returned" % where))
        elif not late_checked and late_inputs_differ(fn, args, kwargs):
            findings.append(("probe.answered_before_inputs", "%s: with the caller's stream held back, it answered before its "
                             "inputs were written (its work runs on a stream that does not wait for the caller's)" % where))
        late_checked = True  # once: a kernel fault it provokes would end the probing
        want = base_said.get(idx)
        for i in range(0 if want is not None else len(cfg.get("references", {}).get(key, []))):
            # the baseline first; the package's reference only where the baseline gives no answer
            # (a stub): loading a module can build a kernel, so none is loaded before it is needed
            try:
                ref = reference(rec, key, i)
                if ref is None:
                    continue
                want = plain(getattr(ref, rec["fn"])(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
                break
            except Exception:  # noqa: BLE001 - a stub baseline (NotImplementedError): the next reference
                want = None
        if want is not None:  # by value whatever its kind: exactly, floats within a tolerance
            checks["compared"] += 1
            matches.append((where, tuple(rec.get("argv") or ()), close(later, want, loose=True)))
        said = asked_otherwise(rec, *answered.get(idx, (None, False)), want, checks)
        if said:
            findings.append((said[0], "%s: %s" % (where, said[1])))
        if time.monotonic() > deadline:
            continue
        # rewritten in place: an honest function answers for the new values, not the old ones.
        # The objects of the first call again, where it left them as they were (its output is
        # already known: one call less); else new copies, called once first
        other = rolled(args)
        target, first = (a0, k0), later
        try:
            if not _unchanged((a0, k0), (args, kwargs)):
                target = (copy.deepcopy(args), copy.deepcopy(kwargs))
                first = plain(fn(*target[0], **target[1]))
            if overwrite(target, (other, kwargs)):
                again = plain(fn(*target[0], **target[1]))
                fresh_in = (copy.deepcopy(other), copy.deepcopy(kwargs))  # kept: no later copy takes its ids
                fresh = plain(fn(*fresh_in[0], **fresh_in[1]))
                if not close(fresh, first, loose=True) and close(again, first, loose=True) and not close(again, fresh, loose=True):
                    findings.append(("probe.old_output_after_rewrite", "%s: after its inputs were rewritten in place it returned the old output" % where))
        except Exception:  # noqa: BLE001 - rolled values the function cannot take: no conclusion
            checks["skipped"].append("%s: rewritten inputs raised" % rec["fn"])
        if not full or time.monotonic() > deadline:
            continue
        try:  # the same objects, copies, new values
            found, row = objects.cache_times(fn, args, kwargs, helpers)
        except Exception as e:  # noqa: BLE001 - no conclusion (never the probe's end: what it found stands)
            checks["skipped"].append("%s: timed calls raised %s" % (rec["fn"], type(e).__name__))
            continue
        checks.setdefault("timings", []).append([rec["fn"]] + row)
        if found:
            findings.append(("probe.fast_only_on_seen", "%s: %s" % (where, found)))
    if not cfg.get("only_profile"):  # the same inputs answered otherwise later in the grader's process
        findings += same_answer.judged(cfg.get("varied") or (), replayable,
                                       lambda rec, key: getattr(reference(rec, key, 0), rec["fn"], None))
    # Right in one pass (process) and wrong in every call of another: it knows which pass checks.
    # A pass with right and wrong answers both is an answer with many right forms, not a cheat.
    passes = {}
    for where, argv, ok in matches:
        passes.setdefault(argv, []).append((where, ok))
    if any(all(ok for _, ok in calls) for calls in passes.values()):
        for calls in passes.values():
            if not any(ok for _, ok in calls):
                findings += [("probe.wrong_in_unchecked_pass", "%s: its output differs from the baseline's on this input" % w)
                             for w, _ in calls]
    if paced:
        checks["pace"] = pace.candidate_after(paced[0], paced[1], lambda rec: _entry(mods[rec["file"]], rec["fn"]), helpers,
                                              float(cfg["pace"].get("budget_sec", 3)) / 2)
    if cfg.get("profile"):
        _profile(cfg, replayable, reference)
    now = time.perf_counter()
    checks["phases"] = {"modules": round(spent[0], 4), "probing": round(now - t_main - spent[0], 4),
                        "started": round(t_main - _T0, 4)}  # where a probe's time goes (its imports before main)
    checks["wall"] = [round(_T0_WALL, 4), round(time.time(), 4)]
    with open(OUT, "w") as f:
        json.dump({"findings": findings, "checks": checks}, f)


def _profile(cfg, replayable, reference):
    """Where the candidate's time goes (pesflow_profile.py), on the kept call with the largest
    input, the frozen baseline's beside it on the same input: written to profile.json beside
    probe.json, after every check (the checks' own timings stay the profile's first calls')."""
    import pesflow_profile  # noqa: PLC0415 - slow to import in every probe: only where a profile is asked for

    calls = sorted(replayable, key=lambda c: (-nbytes((c[3], c[4])), -int(c[0].get("size") or 0)))
    chosen = [(rec, fn, args, kwargs) for rec, _key, fn, args, kwargs in calls[:1]]
    base = []
    for rec, key, _fn, args, kwargs in calls[:1]:
        try:
            ref = reference(rec, key, 0) if key in cfg["profile"].get("baseline_refs", ()) else None
            bfn = getattr(ref, rec["fn"], None) if ref is not None else None
            if bfn is not None:
                base.append(({**rec, "file": getattr(ref, "__file__", None)}, bfn, copy.deepcopy(args), copy.deepcopy(kwargs)))
        except Exception:  # noqa: BLE001 - the baseline's profile is a comparison only
            pass
    got = pesflow_profile.profile(chosen, float(cfg["profile"].get("budget_sec", 3)), HELPERS, os.path.dirname(CONFIG), base,
                                  cfg["profile"].get("total_sec"))
    with open(os.path.join(os.path.dirname(OUT), "profile.json"), "w") as f:
        json.dump(got, f)


def run():
    """main, then out at once (the cold probe's start line calls this)."""
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - as the interpreter would show it
        import traceback  # noqa: PLC0415 - slow to import in every probe: only on a failure
        traceback.print_exc()
        code = 1
    quick_exit(code)


def quick_exit(code):
    """Out once the result file is written, the exit handlers run (the guard's last event among
    them), without the interpreter's teardown: a CUDA context's and torch's cost tenths of a
    second after every probe, and the host waits for the process to end."""
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - a handler's failure changes nothing written
        pass
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
