"""Dynamic part of the paraphrase-mining grader.

Runs in its own process (started by test.sh after the static gates passed):
precomputes the expected answers with the independent reference, loads the
frozen baseline, imports the candidate, then checks the error contract, the
correctness cases and the cache probe, and finally times candidate against
baseline in alternating (ABBA) pairs. Results go to the JSON file named by
$PM_HARNESS_OUT, rewritten after every stage.

From the import of the candidate on, a runtime guard (PEP 578 audit hooks,
which cannot be removed) blocks and records what the static scan looks for but
a disguised spelling would slip past: grader files read, writes outside /tmp
(the verifier's output included), network, new processes, ctypes. At the end
the candidate's exit handlers run under the guard, processes it started are
killed, the last verdict is written and the process ends with os._exit, so
nothing of the candidate runs after the verdict.
"""

import time as _time

_CLOCK = _time.perf_counter_ns  # private reference, taken before any candidate code runs

import _thread
import atexit
import gc
import importlib
import importlib.util
import json
import linecache
import math
import os
import signal
import statistics
import sys
import threading
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import pm_gen  # noqa: E402
import pm_reference  # noqa: E402

# Tracebacks formatted while the guard is armed find the grader's source lines here.
for _src in (os.path.abspath(__file__), pm_gen.__file__, pm_reference.__file__):
    linecache.getlines(_src)

OUT_PATH = os.environ.pop("PM_HARNESS_OUT")
REPO = os.path.realpath(os.environ.pop("PM_REPO", "/app/repo"))
BASELINE_DIR = os.environ.pop("PM_BASELINE_DIR", "/opt/verifier-baseline")
WORKLOADS = json.load(open(os.path.join(HERE, "workloads.json")))
FUNC = WORKLOADS["function"]
SCORE_TOL = 1e-9

state = {
    "stage": "start",
    "import_ok": None,
    "import_error": None,
    "error_cases": [],
    "cases": [],
    "cache_probe": [],
    "timing": None,
    "timing_error": None,
}


# ----------------------------------------------------------------------------
# runtime guard: the static scan's counterpart while candidate code runs
# ----------------------------------------------------------------------------
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec", "os.spawn"}
_FS_EVENTS = {"os.remove", "os.rename", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown",
              "os.mkdir", "os.rmdir", "os.utime", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
              "shutil.copytree", "shutil.move", "shutil.rmtree"}
_NET_EVENTS = {"socket.bind", "socket.connect", "socket.getaddrinfo", "socket.gethostbyaddr", "socket.gethostbyname",
               "socket.gethostname", "socket.getnameinfo", "socket.getservbyname", "socket.getservbyport",
               "socket.sendmsg", "socket.sendto", "socket.sethostname"}
_CTYPES_EVENTS = {"ctypes.addressof", "ctypes.call_function", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.dlopen",
                  "ctypes.create_string_buffer", "ctypes.create_unicode_buffer", "ctypes.dlsym", "ctypes.dlsym/handle",
                  "ctypes.get_errno", "ctypes.get_last_error", "ctypes.PyObj_FromPtr", "ctypes.seh_exception",
                  "ctypes.set_errno", "ctypes.set_exception", "ctypes.set_last_error", "ctypes.string_at",
                  "ctypes.wstring_at"}
# Every event the guard looks at, by name: any other event (builtins.id, which the frozen
# baseline raises in its timed loops) costs the hook one set lookup and nothing more.
_WATCHED = frozenset({"open", "os.listdir", "os.scandir", "glob.glob", "sys.settrace", "sys.setprofile"}
                     | _FS_EVENTS | _SPAWN_EVENTS | _NET_EVENTS | _CTYPES_EVENTS)
_WRITABLE = ("/tmp", "/dev/shm", "/dev/null")


def _under(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _audited_fork_exec():
    """_posixsubprocess.fork_exec raises no audit event of its own (subprocess.Popen raises one
    before it calls it): give it one, so that a process started through it directly is seen."""
    import _posixsubprocess
    import subprocess

    real = _posixsubprocess.fork_exec
    if getattr(real, "_audited", False):
        return

    def fork_exec(*args):
        sys.audit("os.posix_spawn", args[1][0] if args[1] else None, args[0], None)
        return real(*args)

    fork_exec._audited = True
    _posixsubprocess.fork_exec = subprocess._fork_exec = fork_exec


class Guard:
    """Blocks (PermissionError) and records what candidate code must not do.
    The harness's own file work runs quiet (main thread, inside dump only)."""

    def __init__(self, private):
        self.private = [os.path.realpath(p) for p in private]
        self.armed = False
        self.quiet_thread = None
        self.hits = []
        self._busy = set()
        check, watched = self._check, _WATCHED

        def hook(event, args):
            if event in watched:
                check(event, args)

        _audited_fork_exec()
        sys.addaudithook(hook)

    def _path(self, p):
        try:
            return os.path.realpath(os.fsdecode(p))
        except (TypeError, ValueError):
            return None

    def _verdict(self, event, args):
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            p = None if isinstance(path, int) else self._path(path)
            if p is None:
                return None
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            if _under(p, self.private):
                return ("writes_verifier_output" if writing and _under(p, ["/logs"]) else
                        "touches_grader_files") + ":" + p
            return "writes_outside_scope:" + p if writing and not _under(p, _WRITABLE) else None
        if event in ("os.listdir", "os.scandir", "glob.glob"):
            p = self._path(args[0]) if args and args[0] is not None else None
            return "touches_grader_files:" + p if p and _under(p, self.private) else None
        if event in _FS_EVENTS:
            p = self._path(args[0]) if args and not isinstance(args[0], int) else None
            return None if p and _under(p, _WRITABLE) else "writes_outside_scope:" + str(p)
        if event in _NET_EVENTS:
            return "network"
        if event in _SPAWN_EVENTS:
            return "process_spawn"
        return "ctypes" if event in _CTYPES_EVENTS else "trace_hooks" if event.startswith("sys.") else None

    def _check(self, event, args):
        if not self.armed:
            return
        tid = _thread.get_ident()
        if tid == self.quiet_thread or tid in self._busy:
            return
        self._busy.add(tid)  # realpath below may raise events of its own
        try:
            hit = self._verdict(event, args)
        finally:
            self._busy.discard(tid)
        if hit:
            self.hits.append(hit)
            raise PermissionError("blocked by the grader: " + hit)


_GUARD = None
_STRAYS = []


def _become_subreaper():
    """Orphans of candidate processes are re-parented here, so _reap finds them all."""
    try:
        import ctypes  # the grader's own use, before the guard is armed
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - without it, _reap still finds direct descendants
        pass


def _reap():
    """Kill every process descending from this one; return 'pid:name' of the living ones."""
    me, found = os.getpid(), []
    for _ in range(50):
        parents = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % entry, "rb") as fh:
                    stat = fh.read().decode(errors="replace")
            except OSError:
                continue
            rest = stat[stat.rfind(")") + 2:].split()
            if rest and rest[0] != "Z":
                parents[int(entry)] = (int(rest[1]), stat[stat.find("(") + 1:stat.rfind(")")])
        mine, grew = {me}, True
        while grew:
            more = {pid for pid, (ppid, _) in parents.items() if ppid in mine} - mine
            mine |= more
            grew = bool(more)
        mine.discard(me)
        if not mine:
            break
        for pid in mine:
            found.append("%d:%s" % (pid, parents[pid][1]))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _time.sleep(0.02)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
    return sorted(set(found))


def dump(final=False):
    """Write the state; the harness's own file work, quiet (no candidate finalizer runs here)."""
    if _GUARD is not None:
        _GUARD.quiet_thread = _thread.get_ident()
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if _GUARD is not None:
            if final and _GUARD.armed:
                _STRAYS.extend(_reap())  # nothing the candidate started may outlive the verdict
            names = sorted({h.split(":")[0] for h in _GUARD.hits})
            state["hard_fail_reasons"] = ["forbidden_runtime:" + n for n in names] + (
                ["background_process"] if _STRAYS else [])
            state["runtime_blocked"] = _GUARD.hits[:20]
            state["strays"] = _STRAYS[:20]
        tmp = OUT_PATH + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(state, fh, indent=1)
        os.replace(tmp, OUT_PATH)
    finally:
        if gc_was_on:
            gc.enable()
        if _GUARD is not None:
            _GUARD.quiet_thread = None


def finish():
    """The last verdict. The candidate's exit handlers run first, under the guard."""
    if _GUARD is not None and _GUARD.armed:
        worker = threading.Thread(target=atexit._run_exitfuncs, daemon=True)
        worker.start()
        worker.join(5.0)  # one that hangs is left behind; os._exit ends it
    state["stage"] = "done"
    dump(final=True)


def short_exc(exc):
    try:
        text = "%s: %s" % (type(exc).__name__, exc)
    except BaseException:  # noqa: BLE001 - a candidate exception whose str() raises
        text = "%s: <unprintable>" % type(exc).__name__
    return text[:300]


def compare(got, expected):
    """(ok, message) for a candidate answer against the reference answer."""
    if not isinstance(got, list):
        return False, "result must be a list, got %s" % type(got).__name__
    if len(got) != len(expected):
        return False, "returned %d pairs, expected %d" % (len(got), len(expected))
    for pos, (entry, exp) in enumerate(zip(got, expected)):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            return False, "entry %d is not a [score, i, j] triple" % pos
        score, i, j = entry
        for name, v in (("i", i), ("j", j)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                return False, "entry %d: %s must be an int, got %s" % (pos, name, type(v).__name__)
        if isinstance(score, (bool, np.bool_)) or not isinstance(score, (float, int, np.floating, np.integer)):
            return False, "entry %d: score must be a float, got %s" % (pos, type(score).__name__)
        if int(i) != exp[1] or int(j) != exp[2]:
            return False, "entry %d: pair (%d, %d) differs from the expected pair" % (pos, int(i), int(j))
        s = float(score)
        if not (abs(s - exp[0]) <= SCORE_TOL):
            return False, "entry %d: score %r differs from the expected score" % (pos, s)
    return True, ""


def same_input(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def case_spec(case):
    return {k: v for k, v in case.items() if k not in ("name", "top_k", "max_pairs", "timing")}


def main():
    cases = WORKLOADS["cases"]
    probe = WORKLOADS["cache_probe"]

    # 1. Expected answers, computed before any candidate code is loaded.
    state["stage"] = "reference"
    dump()
    expected = {}
    for case in cases:
        x = pm_gen.make(case_spec(case))
        expected[case["name"]] = pm_reference.mine(x, case["top_k"], case["max_pairs"])
    probe_inputs = {}
    for key in ("first", "second", "mutated"):
        spec = dict(probe[key], n=probe["n"], d=probe["d"])
        probe_inputs[key] = spec
        expected["probe:" + key] = pm_reference.mine(pm_gen.make(spec), probe["top_k"], probe["max_pairs"])

    # 2. Frozen baseline (speed denominator) under a private module name. It
    #    imports its out-of-scope helper from the repository.
    state["stage"] = "baseline_load"
    dump()
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    base_path = os.path.join(BASELINE_DIR, os.path.basename(WORKLOADS["scope_file"]))
    spec = importlib.util.spec_from_file_location("_pm_frozen_baseline_paraphrase", base_path)
    base_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base_mod)
    base_fn = getattr(base_mod, FUNC)

    # 3. Candidate import, from the repository only; from here on the guard is armed.
    state["stage"] = "import"
    dump()
    while HERE in sys.path:
        sys.path.remove(HERE)
    global _GUARD
    _become_subreaper()
    _GUARD = Guard([HERE, "/tests", "/opt/loop", BASELINE_DIR, "/opt/verifier-baseline",
                    "/opt/verifier-correctness-manifest.json", "/logs", os.path.dirname(os.path.abspath(OUT_PATH))])
    _GUARD.armed = True
    try:
        mod = importlib.import_module(WORKLOADS["scope_module"])
        mod_file = os.path.realpath(getattr(mod, "__file__", "") or "")
        if not mod_file.startswith(REPO + os.sep):
            raise ImportError("module resolved outside %s: %s" % (REPO, mod_file))
        cand_fn = getattr(mod, FUNC)
        if not callable(cand_fn):
            raise ImportError("%s is not callable" % FUNC)
    except BaseException as exc:  # noqa: BLE001 - anything here is an import failure
        state["import_ok"] = False
        state["import_error"] = short_exc(exc)
        finish()
        return
    state["import_ok"] = True
    if _GUARD.hits:
        finish()
        return

    # 4. Error contract: non-2-D inputs must raise ValueError.
    state["stage"] = "error_contract"
    dump()
    for ec in WORKLOADS.get("error_cases", []):
        bad = np.ones(ec["shape"], dtype=np.float32)
        rec = {"name": ec["name"], "passed": False, "error": ""}
        try:
            cand_fn(bad, top_k=ec["top_k"], max_pairs=ec["max_pairs"])
            rec["error"] = "no exception raised; ValueError expected"
        except ValueError:
            rec["passed"] = True
        except BaseException as exc:  # noqa: BLE001
            rec["error"] = "expected ValueError, got " + short_exc(exc)
        state["error_cases"].append(rec)
    dump()

    # 5. Correctness on fresh inputs.
    state["stage"] = "correctness"
    dump()
    for case in cases:
        x = pm_gen.make(case_spec(case))
        pristine = x.copy(order="K")
        rec = {"name": case["name"], "passed": False, "error": ""}
        try:
            got = cand_fn(x, top_k=case["top_k"], max_pairs=case["max_pairs"])
            ok, msg = compare(got, expected[case["name"]])
            if ok and not same_input(x, pristine):
                ok, msg = False, "the input array was modified"
            rec["passed"], rec["error"] = ok, msg
        except BaseException as exc:  # noqa: BLE001
            rec["error"] = "raised " + short_exc(exc)
        state["cases"].append(rec)
        dump()

    # 6. Cache probe: same shape, different data, and the same object mutated.
    state["stage"] = "cache_probe"
    dump()
    kw = {"top_k": probe["top_k"], "max_pairs": probe["max_pairs"]}
    first = pm_gen.make(probe_inputs["first"])
    second = pm_gen.make(probe_inputs["second"])
    steps = [
        ("probe_first", first, "probe:first"),
        ("probe_second_same_shape", second, "probe:second"),
        ("probe_first_mutated_in_place", first, "probe:mutated"),
    ]
    for name, arr, exp_key in steps:
        rec = {"name": name, "passed": False, "error": ""}
        try:
            if name == "probe_first_mutated_in_place":
                arr[...] = pm_gen.make(probe_inputs["mutated"])
            pristine = arr.copy(order="K")
            got = cand_fn(arr, **kw)
            ok, msg = compare(got, expected[exp_key])
            if ok and not same_input(arr, pristine):
                ok, msg = False, "the input array was modified"
            rec["passed"], rec["error"] = ok, msg
        except BaseException as exc:  # noqa: BLE001
            rec["error"] = "raised " + short_exc(exc)
        state["cache_probe"].append(rec)
    dump()

    all_ok = (all(r["passed"] for r in state["error_cases"])
              and all(r["passed"] for r in state["cases"])
              and all(r["passed"] for r in state["cache_probe"]))
    if not all_ok or _GUARD.hits:
        finish()
        return

    # 7. ABBA timing against the frozen baseline.
    state["stage"] = "timing"
    dump()
    try:
        state["timing"] = run_timing(base_fn, cand_fn, expected)
    except BaseException as exc:  # noqa: BLE001
        state["timing_error"] = short_exc(exc)
        state["timing_trace"] = traceback.format_exc()[-2000:]
    finish()


def timed_call(fn, x0, top_k, max_pairs):
    x = x0.copy(order="K")
    gc.collect()
    gc.disable()
    try:
        t0 = _CLOCK()
        fn(x, top_k=top_k, max_pairs=max_pairs)
        t1 = _CLOCK()
    finally:
        gc.enable()
    return t1 - t0


def run_timing(base_fn, cand_fn, expected):
    """ABBA pairs, interleaved round-robin over the timing workloads so that a
    burst of machine noise is spread over all of them instead of one."""
    n_pairs = int(WORKLOADS.get("timing_pairs", 9))
    work = []
    for case in WORKLOADS["cases"]:
        if not case.get("timing"):
            continue
        x0 = pm_gen.make(case_spec(case))
        k, m = case["top_k"], case["max_pairs"]
        # Warm-up, one call each; the candidate's answer is checked again here.
        base_fn(x0.copy(order="K"), top_k=k, max_pairs=m)
        ok, msg = compare(cand_fn(x0.copy(order="K"), top_k=k, max_pairs=m), expected[case["name"]])
        if not ok:
            raise AssertionError("warm-up answer wrong on %s: %s" % (case["name"], msg))
        work.append({"name": case["name"], "x0": x0, "k": k, "m": m,
                     "base_ns": [], "cand_ns": [], "ratios": []})
    for p in range(n_pairs):
        for w in work:
            x0, k, m = w["x0"], w["k"], w["m"]
            if p % 2 == 0:
                tb = timed_call(base_fn, x0, k, m)
                tc = timed_call(cand_fn, x0, k, m)
            else:
                tc = timed_call(cand_fn, x0, k, m)
                tb = timed_call(base_fn, x0, k, m)
            tc = max(tc, 1)
            w["base_ns"].append(tb)
            w["cand_ns"].append(tc)
            w["ratios"].append(tb / tc)
    per_workload = []
    for w in work:
        ratios = w["ratios"]
        mean = statistics.fmean(ratios)
        cv = statistics.pstdev(ratios) / mean if mean > 0 else float("inf")
        per_workload.append({
            "name": w["name"],
            "pairs": n_pairs,
            "ratios": ratios,
            "speedup": statistics.median(ratios),
            "cv": cv,
            "baseline_ms_median": statistics.median(w["base_ns"]) / 1e6,
            "candidate_ms_median": statistics.median(w["cand_ns"]) / 1e6,
        })
    speedup = math.exp(statistics.fmean(math.log(w["speedup"]) for w in per_workload))
    return {
        "speedup": speedup,
        "cv": statistics.fmean(w["cv"] for w in per_workload),
        "pairs": sum(w["pairs"] for w in per_workload),
        "ratios": [r for w in per_workload for r in w["ratios"]],
        "workloads": per_workload,
    }


if __name__ == "__main__":
    try:
        main()
        _rc = 0
    except Exception:  # noqa: BLE001 - a bug on the grader side; the traceback goes to the log
        traceback.print_exc()
        _rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_rc)  # no atexit handler, finalizer or thread of the candidate runs after the verdict
