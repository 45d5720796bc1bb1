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
from pesflow_probe_values import (_torch, close, far_shifts, leaves, left_changed, nbytes, numeric, on_gpu, overwrite,
                                  plain, rolled, shifts, sync)

_T0 = time.perf_counter()
_T0_WALL = time.time()  # the host's clock too: what the handing over costs (screen.py)
WARM = None  # what the warm probe (pesflow_probe_warm.py) imported before the grader ended, when it runs this

CONFIG = "/.pesflow-trust/config.json"
if not os.path.exists(CONFIG):  # pesflow's own tests (the guard's rule: a grading's config always wins)
    CONFIG = os.environ.get("PESFLOW_TRUST_TEST_CONFIG") or CONFIG
OUT = "/.pesflow-trust-out/probe.json"
if not os.path.exists(os.path.dirname(OUT)):
    OUT = os.environ.get("PESFLOW_TRUST_TEST_OUT") or OUT


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


def _plain_inputs(args, kwargs):
    """Whether inputs are plain values (else whether a call changed them is not known)."""
    try:
        plain((args, kwargs))
        return True
    except TypeError:
        return False


def _same_in_place(used, base_left):
    """Whether a call left its inputs as the baseline's call left them (loosely, floats)."""
    try:
        return bool(close(plain(used), base_left, loose=True))
    except TypeError:  # not plain values: no conclusion
        return True


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
    return ("probe.answer_depends_on_asker",
            "the grader's call %s got an output that the same call made by pesflow, on the same inputs, does not give "
            "(nor does the baseline)" % rec.get("n"))


# what pesflow_probe_objects.py's probes and timings are given of this module's
HELPERS = {"plain": plain, "close": close, "numeric": numeric, "sync": sync, "on_gpu": on_gpu, "rolled": rolled,
           "shifts": shifts, "far_shifts": far_shifts, "left_changed": left_changed, "nbytes": nbytes,
           "overwrite": overwrite}


class Probing:
    """One run of the probes: the config, the modules loaded (and what loading them cost), and
    what the probes found, in the order the kept calls come."""

    def __init__(self):
        self.t_main = time.perf_counter()
        self.spent = 0.0  # loading the candidate's modules and the references (imports, a JIT's build)
        self.cfg = cfg = json.load(open(CONFIG))["probe"]
        self.deadline = time.monotonic() + 600  # until the first call has run (then the budget)
        self.budget_started = False
        self.full = bool(cfg.get("full"))
        self.findings, self.checks = ([], {"calls": 0, "compared": 0, "skipped": [],
                                           **({"warm": WARM} if WARM is not None else {})})
        self.recs = cfg.get("records", [])
        self.checks["restored"] = inputs.restore(cfg.get("restore") or {}, os.path.dirname(CONFIG))
        self.loaded = self.checks["loads"] = []  # [what, seconds]: where the fixed cost of a probe goes
        self.mods, self.refs, self.matches = {}, {}, []
        self.replayable = []  # (rec, module key, fn, args, kwargs): the calls a profile may repeat
        self.late_checked = False
        self.helpers = HELPERS
        self.paced = None  # (pesflow_probe_pace, its cases, the baseline timed before any candidate code is loaded)
        self.base_said = {}  # {record's index: the baseline's answer}, from its first timed call there
        self.base_left = {}  # {record's index: what that call changed of its inputs (None: nothing)}
        self.answered = {}  # {record's index: (the candidate's first answer, whether it left its inputs as they were)}

    def enter_process(self):
        """The process as the harness's was: numpy and torch where the inputs hold them, then its
        path and working folder."""
        for name in ("numpy", "torch"):  # what the inputs hold, from the interpreter's own path first:
            # never a folder the grading wrote
            if (name not in sys.modules and any(name.encode() in inputs.blob(r, os.path.dirname(CONFIG))
                                                for r in self.recs)):
                t_load = time.perf_counter()
                try:
                    importlib.import_module(name)
                    self.loaded.append([name, round(time.perf_counter() - t_load, 4)])
                except Exception:  # noqa: BLE001 - not installed there: the harness's path may have it
                    pass
        if self.recs:
            first = self.recs[0]
            sys.path[:0] = [p for p in first.get("sys_path") or [] if p not in sys.path]
            try:
                os.chdir(first.get("cwd") or "/")
            except OSError:
                pass
        self.spent += sum(t for _, t in self.loaded)

    def reference(self, rec, key, i):
        """The i-th reference module of `key` (the baseline first), loaded when first needed:
        loading a module can build a kernel. None where it cannot be loaded here."""
        refs = self.refs.setdefault(key, [None] * len(self.cfg.get("references", {}).get(key, [])))
        if refs[i] is None:
            t_load = time.perf_counter()
            try:
                refs[i] = load_module(rec, self.cfg["references"][key][i], "__pesflow_ref%d" % i)
            except Exception:  # noqa: BLE001 - never tried again
                refs[i] = False
            self.spent += time.perf_counter() - t_load
            self.loaded.append(["reference %d of %s" % (i, os.path.basename(key)),
                                round(time.perf_counter() - t_load, 4)])
        return refs[i] or None

    def module(self, key, rec):
        if key not in self.mods:
            t_load = time.perf_counter()
            self.mods[key] = load_module(rec)
            # each loaded when first needed
            self.refs.setdefault(key, [None] * len(self.cfg.get("references", {}).get(key, [])))
            self.spent += time.perf_counter() - t_load
            self.loaded.append([os.path.basename(key), round(time.perf_counter() - t_load, 4)])
        return self.mods[key]

    def time_baseline(self):
        """The baseline timed before any candidate code is loaded (pesflow_probe_pace.py)."""
        cfg = self.cfg
        if not cfg.get("pace") or cfg.get("only_profile"):
            return
        # slow to import in every probe: only where the figure is to be reproduced
        import pesflow_probe_pace as pace  # noqa: PLC0415 - slow to import
        chosen = pace.cases(self.recs, cfg["pace"].get("baseline_refs") or (),
                            lambda rec: inputs.blob(rec, os.path.dirname(CONFIG)), loads)
        self.paced = (pace, chosen,
                      pace.baseline_first(chosen, self.stand_ins, self.helpers,
                                          float(cfg["pace"].get("budget_sec", 3)) / 2, self.base_said, self.base_left))

    def stand_ins(self, rec):
        """[(whose, function)] the figure's other end may be timed with: the frozen baseline's,
        then the package's references' (each module loaded only when asked for)."""
        key = rec["file"]
        for i in range(max(1, len(self.cfg.get("references", {}).get(key, [])))):
            fn = getattr(self.reference(rec, key, i), rec["fn"], None)
            if fn is not None:
                yield ("baseline" if i == 0 else "reference"), fn

    def probe_calls(self):
        """Every kept call's probes, within the budget (a profile's grading: each call rebuilt only)."""
        # the first call on each kept input whose answer the grader got, before any other: what a
        # candidate answers pesflow must not hang on how many calls pesflow made before it
        self.answered = {} if self.cfg.get("only_profile") else first_answers(self.recs, self.module)
        for idx, rec in enumerate(self.recs):
            if time.monotonic() > self.deadline:
                self.checks["skipped"].append("budget")
                break
            call = self.rebuilt(rec)
            # a grading no result can come of: its profile alone (evaluator/profile.py)
            if call is None or self.cfg.get("only_profile"):
                continue
            key, blob, entry, args, kwargs = call
            if rec.get("cls"):
                self.probe_instance(rec, key, blob, entry)
            else:
                self.probe_function(idx, rec, key, entry, args, kwargs)

    def rebuilt(self, rec):
        """(module key, kept input, the class or the function, args, kwargs) of a kept call, with
        the process's argv as it was; None where it cannot be rebuilt here (noted)."""
        blob = inputs.blob(rec, os.path.dirname(CONFIG))
        if rec.get("size") is not None and len(blob) != rec["size"]:
            self.checks["skipped"].append("%s: a kept input did not come back whole" % rec["fn"])
            return None
        if hashlib.sha256(blob).hexdigest() != rec["sha256"]:
            self.findings.append(("probe.input_rewritten",
                                  "a kept input of %s was rewritten before the probe" % rec["fn"]))
            return None
        args = kwargs = None  # an instance's calls are rebuilt by its probe
        try:
            key = rec["file"]
            self.module(key, rec)
            if rec.get("cls"):
                entry = getattr(self.mods[key], rec["cls"])
                loads(blob, rec.get("argv"))  # its inputs can be rebuilt here
            else:
                entry = _entry(self.mods[key], rec["fn"])
                args, kwargs = loads(blob, rec.get("argv"))
        except Exception as e:  # noqa: BLE001 - an input or module the probe cannot rebuild: not the candidate's fault
            self.checks["skipped"].append("%s: %s" % (rec["fn"], type(e).__name__))
            return None
        if isinstance(sys.argv, list) and rec.get("argv"):
            list.__setitem__(sys.argv, slice(None), list(rec["argv"]))
        if not rec.get("cls"):
            self.replayable.append((rec, key, entry, args, kwargs))
        return key, blob, entry, args, kwargs

    def start_budget(self):
        """The budget counts from the first call that ran: imports and a JIT's first compile are not probing."""
        self.budget_started = True
        self.deadline = time.monotonic() + float(self.cfg.get("budget_sec", 10))

    def probe_instance(self, rec, key, blob, cls):
        """The calls kept on an instance, made again on a new one (pesflow_probe_objects.py)."""
        where = "%s (the instance the process `%s` made first, %s calls)" % (
            rec["cls"], " ".join(map(str, (rec.get("argv") or [])[:3])), rec["n"])
        bases = (lambda: [c for c in (getattr(self.reference(rec, key, i), rec["cls"], None)
                                      for i in range(len(self.refs[key]))) if isinstance(c, type)])
        got, ms, notes = objects.probe(rec, blob, cls, bases,
                                       dict(self.helpers, loads=lambda b: loads(b, rec.get("argv"))),
                                       float(self.cfg.get("budget_sec", 10)), self.full, where)
        self.findings += got
        self.matches += ms
        self.checks["calls"] += 1
        self.checks["compared"] += len(ms)
        if notes:
            self.checks.setdefault("objects", []).extend(notes)
        if not self.budget_started:
            self.start_budget()

    def probe_function(self, idx, rec, key, fn, args, kwargs):
        """A kept call made again: its output, against the baseline's and the grader's, then on
        inputs rewritten in place, then timed (the budget left allowing)."""
        where = ("%s (call %s of the process `%s`)"
                 % (rec["fn"], rec["n"], " ".join(map(str, (rec.get("argv") or [])[:3]))))
        first = self.first_call(rec, fn, args, kwargs, where)
        if first is None:
            return
        first_in, later = first
        asked, want, base_left = self.baseline_answer(idx, rec, key, args, kwargs)
        if asked:  # by value whatever its kind: exactly, floats within a tolerance
            self.checks["compared"] += 1
            # an answer in place: its return compared only where the baseline returns one too
            same = close(later, want, loose=True) if want is not None or base_left is None else True
            if base_left is not None:  # the baseline answers in place too: what each changed is compared
                self.checks["compared_in_place"] = self.checks.get("compared_in_place", 0) + 1
                same = same and _same_in_place(first_in, base_left)
            elif _plain_inputs(args, kwargs) and not _same_in_place(first_in, plain((args, kwargs))):
                self.findings.append(("probe.caller_inputs_changed",
                                      "%s: it changed its caller's inputs, which the baseline leaves as they were"
                                      % where))
            self.matches.append((where, tuple(rec.get("argv") or ()), same))
        said = asked_otherwise(rec, *self.answered.get(idx, (None, False)), want, self.checks)
        if said:
            self.findings.append((said[0], "%s: %s" % (where, said[1])))
        if time.monotonic() > self.deadline:
            return
        self.rewrite_in_place(rec, fn, args, kwargs, first_in, later, where)
        if self.full and time.monotonic() <= self.deadline:
            self.time_on_seen(rec, fn, args, kwargs, where)

    def first_call(self, rec, fn, args, kwargs, where):
        """A call on copies of the kept inputs: ((args, kwargs) as it left them, its output after a
        pause), with what its return shows (work still running after it, inputs read before they
        were written); None where it raised."""
        checks = self.checks
        try:
            a0, k0 = copy.deepcopy(args), copy.deepcopy(kwargs)
            def counted(*a, **k):  # a call that returned counts, even where its output is no plain value
                got = fn(*a, **k)
                checks["calls"] += 1
                return got
            # gap: the caller's stream and its output's copy, then the rest
            out, now, gap = objects.called(counted, a0, k0, self.helpers)
            if not self.budget_started:
                self.start_budget()
            elif on_gpu():  # measured again where the caller waited for a CPU meanwhile
                gap = objects.settle(gap,
                                     lambda: objects.called(fn, copy.deepcopy(args), copy.deepcopy(kwargs),
                                                            self.helpers)[2], lambda g: g[1] > max(2e-4, 5 * g[0]))
                if gap:
                    self.findings.append(("probe.gpu_busy_after_return",
                                          "%s: the GPU was still busy %.3g s after the caller's stream had finished "
                                          "(%.3g s)" % (where, gap[1], gap[0])))
        except TypeError as e:
            self.findings.append(("probe.output_not_plain", "%s returned a %s, not plain values" % (where, e)))
            return None
        except Exception as e:  # noqa: BLE001
            checks["skipped"].append("%s raised %s" % (rec["fn"], type(e).__name__))
            return None
        time.sleep(0.02)
        sync()
        try:
            later = plain(out)
        except TypeError:
            later = now
        if not close(now, later):
            self.findings.append(("probe.output_changed_later", "%s: its output changed after it had returned" % where))
        elif not self.late_checked and late_inputs_differ(fn, args, kwargs):
            self.findings.append(("probe.answered_before_inputs",
                                  "%s: with the caller's stream held back, it answered before its inputs were written "
                                  "(its work runs on a stream that does not wait for the caller's)" % where))
        self.late_checked = True  # once: a kernel fault it provokes would end the probing
        return (a0, k0), later

    def baseline_answer(self, idx, rec, key, args, kwargs):
        """(whether a baseline answered, its output on these inputs, what it changed of them: None
        where nothing): its answer when paced, else a call now; the package's reference's only
        where the baseline gives none (a stub). An answer in place returns None, and is one."""
        asked = idx in self.base_said
        want, left = self.base_said.get(idx), self.base_left.get(idx)
        for i in range(0 if asked else len(self.cfg.get("references", {}).get(key, []))):
            # loading a module can build a kernel, so none is loaded before it is needed
            try:
                ref = self.reference(rec, key, i)
                if ref is None:
                    continue
                used = (copy.deepcopy(args), copy.deepcopy(kwargs))
                want = plain(getattr(ref, rec["fn"])(*used[0], **used[1]))
                left, asked = left_changed(used, (args, kwargs)), True
                break
            except Exception:  # noqa: BLE001 - a stub baseline (NotImplementedError): the next reference
                want = None
        return asked, want, left

    def rewrite_in_place(self, rec, fn, args, kwargs, first_in, first_out, where):
        """Rewritten in place: an honest function answers for the new values, not the old ones.
        The objects of the first call again, where it left them as they were (its output is
        already known: one call less); else new copies, called once first."""
        other = rolled(args)
        target, first = first_in, first_out
        try:
            if not _unchanged(first_in, (args, kwargs)):
                target = (copy.deepcopy(args), copy.deepcopy(kwargs))
                first = plain(fn(*target[0], **target[1]))
            if overwrite(target, (other, kwargs)):
                again = plain(fn(*target[0], **target[1]))
                fresh_in = (copy.deepcopy(other), copy.deepcopy(kwargs))  # kept: no later copy takes its ids
                fresh = plain(fn(*fresh_in[0], **fresh_in[1]))
                if (not close(fresh, first, loose=True) and close(again, first, loose=True)
                    and not close(again, fresh, loose=True)):
                    self.findings.append(("probe.old_output_after_rewrite",
                                          "%s: after its inputs were rewritten in place it returned the old output"
                                              % where))
        except Exception:  # noqa: BLE001 - rolled values the function cannot take: no conclusion
            self.checks["skipped"].append("%s: rewritten inputs raised" % rec["fn"])

    def time_on_seen(self, rec, fn, args, kwargs, where):
        """The same objects, copies, new values, timed (pesflow_probe_objects.py's cache_times)."""
        try:
            found, row = objects.cache_times(fn, args, kwargs, self.helpers)
        except Exception as e:  # noqa: BLE001 - no conclusion (never the probe's end: what it found stands)
            self.checks["skipped"].append("%s: timed calls raised %s" % (rec["fn"], type(e).__name__))
            return
        self.checks.setdefault("timings", []).append([rec["fn"]] + row)
        if found:
            self.findings.append(("probe.fast_only_on_seen", "%s: %s" % (where, found)))

    def conclude(self):
        """What the calls show together, the candidate's pace and profile where asked for, and
        where the probe's time went: written to OUT."""
        cfg, findings, checks = self.cfg, self.findings, self.checks
        if not cfg.get("only_profile"):  # the same inputs answered otherwise later in the grader's process
            findings += same_answer.judged(cfg.get("varied") or (), self.replayable,
                                           lambda rec, key: getattr(self.reference(rec, key, 0), rec["fn"], None))
        # Right in one pass (process) and wrong in every call of another: it knows which pass checks.
        # A pass with right and wrong answers both is an answer with many right forms, not a cheat.
        passes = {}
        for where, argv, ok in self.matches:
            passes.setdefault(argv, []).append((where, ok))
        if any(all(ok for _, ok in calls) for calls in passes.values()):
            for calls in passes.values():
                if not any(ok for _, ok in calls):
                    findings += [("probe.wrong_in_unchecked_pass",
                                  "%s: its output differs from the baseline's on this input" % w)
                                 for w, _ in calls]
        if self.paced:
            pace, chosen, base_first = self.paced
            checks["pace"] = pace.candidate_after(chosen, base_first,
                                                  lambda rec: _entry(self.mods[rec["file"]], rec["fn"]), self.helpers,
                                                  float(cfg["pace"].get("budget_sec", 3)) / 2)
        if cfg.get("profile"):
            _profile(cfg, self.replayable, self.reference)
        now = time.perf_counter()
        checks["phases"] = {"modules": round(self.spent, 4), "probing": round(now - self.t_main - self.spent, 4),
                            # where a probe's time goes (its imports before main)
                            "started": round(self.t_main - _T0, 4)}
        checks["wall"] = [round(_T0_WALL, 4), round(time.time(), 4)]
        with open(OUT, "w") as f:
            json.dump({"findings": findings, "checks": checks}, f)


def main():
    probing = Probing()
    probing.enter_process()
    probing.time_baseline()
    probing.probe_calls()
    probing.conclude()


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
                base.append(({**rec, "file": getattr(ref, "__file__", None)}, bfn, copy.deepcopy(args),
                             copy.deepcopy(kwargs)))
        except Exception:  # noqa: BLE001 - the baseline's profile is a comparison only
            pass
    got = pesflow_profile.profile(chosen, float(cfg["profile"].get("budget_sec", 3)), HELPERS, os.path.dirname(CONFIG),
                                  base, cfg["profile"].get("total_sec"))
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
