"""Correctness harness of the native-histogram merge grader (hidden and dev lanes share it).

Runs, cheapest first: the anti-cheat scan of the scope file, the import gate,
the correctness cases against the independent reference (hand-made edge
cases, random merges, slices of the benchmark workloads, a cache probe, a
check that the inputs were left as they were), and the error contract. Speed
is not measured here: test.sh counts instructions with callgrind afterwards
(cpu_bench.py), only when everything here passed. Writes one JSON document
(--out) that bench_report.py and compute_reward.py complete.

From the import of the candidate on, a runtime guard (PEP 578 audit hooks,
which cannot be removed) blocks and records what the scan looks for but a
disguised spelling would slip past: grader files read, writes outside /tmp,
network, new processes, ctypes. Processes the candidate started anyway are
killed before the last verdict is written, and the process ends with
os._exit, so no atexit handler, finalizer or thread of the candidate runs
after the verdict.
"""

import argparse
import gc
import importlib
import importlib.util
import io
import json
import os
import re
import signal
import sys
import tokenize
import traceback
import _thread
import time as _time_module

HERE = os.path.dirname(os.path.abspath(__file__))
# Candidate code must not be able to import grader modules by name.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]


def _load_private(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cases = _load_private("_nhm_grader_cases", os.path.join(HERE, "cases.py"))
edge = _load_private("_nhm_grader_edge_cases", os.path.join(HERE, "edge_cases.py"))
reference = _load_private("_nhm_grader_reference", os.path.join(HERE, "reference.py"))

SCOPE = ["native_histogram_merge.py"]
CANDIDATE_MODULE = "native_histogram_merge"
ENTRY = "merge_histograms"
BASELINE_MODULE_NAME = "_nhm_frozen_baseline"
FIELDS = ("scale", "zero_count", "count", "sum", "buckets")

FORBIDDEN = [
    ("reads_grader_files", r"/tests\b"),
    ("reads_verifier_output", r"/logs\b"),
    ("reads_frozen_baseline", r"verifier-baseline|verifier_baseline"),
    ("reads_loop_harness", r"/opt/loop|dev_tests"),
    ("imports_frozen_baseline", r"frozen_baseline"),
    ("reads_benchmark", r"cpu_bench|callgrind|valgrind"),
    ("argv_or_environment", r"\bargv\b|\benviron\b|\bgetenv\b"),
    ("subprocess", r"\bsubprocess\b"),
    ("os_process_control", r"\bos\s*\.\s*(system|popen|exec\w*|spawn\w*|fork\w*|_exit|kill\w*|abort)\b"),
    ("socket", r"\bsocket\b"),
    ("ctypes", r"\bctypes\b"),
    ("cffi", r"\bcffi\b"),
    ("mmap", r"\bmmap\b"),
    ("timer_access", r"perf_counter|process_time|\bmonotonic\b"),
    ("time_monkeypatch", r"\btime\s*\.\s*\w+\s*=(?!=)"),
    ("threading", r"\b(threading|_thread)\b"),
    ("multiprocessing", r"\bmultiprocessing\b"),
    ("concurrent_futures", r"\bconcurrent\b"),
    ("atexit", r"\batexit\b"),
    ("signal", r"\bsignal\b"),
    ("sys_modules", r"\bsys\s*\.\s*modules\b"),
    ("frame_introspection", r"\b_getframe\b|\binspect\b|\bf_back\b|\bf_globals\b|\bgc\s*\.\s*get_(objects|referrers|referents)\b"),
    ("dynamic_import", r"\bimportlib\b|__import__"),
    ("dynamic_exec", r"\b(exec|eval|compile)\s*\("),
    ("builtins_patch", r"\bbuiltins\b|__builtins__"),
    ("setattr_on_module", r"\bsetattr\s*\(\s*(time|sys|os|gc|zlib|random)\b"),
    ("trace_hooks", r"\bset(trace|profile)\b|\baddaudithook\b|\baudit\b"),
    ("harness_access", r"\b__main__\b"),
]


class _Timeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Timeout("call exceeded its time limit")


signal.signal(signal.SIGALRM, _on_alarm)


def _short(text, limit=300):
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------
# anti-cheat scan
# ----------------------------------------------------------------------------
def _without_comments(src):
    lines = src.splitlines(keepends=True)
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return src
    for tok in toks:
        if tok.type != tokenize.COMMENT:
            continue
        (row, col), (_, ecol) = tok.start, tok.end
        line = lines[row - 1]
        lines[row - 1] = line[:col] + " " * (ecol - col) + line[ecol:]
    return "".join(lines)


def scan_scope(repo):
    hits = []
    for rel in SCOPE:
        path = os.path.join(repo, rel)
        if not os.path.isfile(path):
            continue
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            text = _without_comments(fh.read())
        for name, pattern in FORBIDDEN:
            if re.search(pattern, text):
                hits.append(name)
    return sorted(set(hits))


# ----------------------------------------------------------------------------
# calling candidate code
# ----------------------------------------------------------------------------
_TIMED_OUT = []  # set once a candidate call hits its limit; later calls are skipped
CALL_LIMIT_S = 20.0


def _call(fn, args, limit_s=CALL_LIMIT_S):
    """Run fn(*args) with a time limit; return (output, error_text)."""
    if _TIMED_OUT:
        return None, "skipped: an earlier call exceeded its time limit"
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        return fn(*args), None
    except _Timeout as exc:
        _TIMED_OUT.append(True)
        return None, f"timeout: {exc} ({limit_s:.0f} s)"
    except BaseException as exc:  # noqa: BLE001 - candidate code may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None, _short(f"{type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _fmt(value, limit=120):
    return _short(repr(value), limit)


def _check_result(out, hists, max_buckets):
    """Compare a candidate result with the reference; return None or a message."""
    want = reference.reference_merge(hists, max_buckets)
    if type(out) is not dict:
        return f"expected a dict, got {type(out).__name__}"
    if set(out) != set(FIELDS):
        return f"expected the keys {sorted(FIELDS)}, got {sorted(map(str, out))}"
    for key in FIELDS[:4]:
        got = out[key]
        if type(got) is not int:
            return f"{key} is {type(got).__name__}, expected int"
        if got != want[key]:
            return f"{key} is {_fmt(got)}, expected {_fmt(want[key])}"
    got = out["buckets"]
    if type(got) is not list:
        return f"buckets is {type(got).__name__}, expected a list of (index, count) tuples"
    for pos, item in enumerate(got):
        if type(item) is not tuple or len(item) != 2 or type(item[0]) is not int or type(item[1]) is not int:
            return f"buckets[{pos}] is {_fmt(item)}, expected an (int index, int count) tuple"
    exp = want["buckets"]
    for pos, (g, w) in enumerate(zip(got, exp)):
        if g != w:
            return f"buckets differ first at position {pos}: got {g}, expected {w} (scale {want['scale']})"
    if len(got) != len(exp):
        return f"{len(got)} buckets, expected {len(exp)}"
    return None


def _snapshot_inputs(hists):
    """What the inputs are, deeply: the list's own objects and each dict's items in order."""
    return (type(hists), [id(h) for h in hists],
            [(list(h.items()) if isinstance(h, dict) else h,
              list(h["buckets"].items()) if isinstance(h, dict) and isinstance(h.get("buckets"), dict) else None)
             for h in hists])


def run_case(fn, name, kind, hists, max_buckets, limit_s=CALL_LIMIT_S):
    pristine = [cases.copy_hist(h) for h in hists]
    given = type(hists)(cases.copy_hist(h) for h in hists)
    before = _snapshot_inputs(given)
    out, err = _call(fn, (given, max_buckets), limit_s)
    if err is None:
        err = _check_result(out, pristine, max_buckets)
    if err is None and _snapshot_inputs(given) != before:
        err = "the inputs were modified in place"
    return {"name": name, "kind": kind, "passed": err is None, "message": err}


def run_cache_probe(fn, spec):
    """Same shapes, different contents; then the same objects rewritten in place."""
    results = []
    a = cases.pool(spec, spec["seed"])
    b = cases.pool(spec, spec["seed_b"])
    c = cases.pool(spec, spec["seed_c"])
    mb = spec["max_buckets"]
    results.append(run_case(fn, spec["name"] + ":first", "cache_probe", a, mb))
    results.append(run_case(fn, spec["name"] + ":same_shape_other_values", "cache_probe", b, mb))
    held = cases.copy_all(b)
    out1, err = _call(fn, (held, mb))
    msg = err or _check_result(out1, b, mb)
    if msg is None:
        for h, src in zip(held, c):
            h["buckets"].clear()
            h["buckets"].update(src["buckets"])
            for key in FIELDS[:4]:
                h[key] = src[key]
        out2, err = _call(fn, (held, mb))
        msg = err or _check_result(out2, c, mb)
    results.append({"name": spec["name"] + ":mutated_same_objects", "kind": "cache_probe",
                    "passed": msg is None, "message": msg})
    results.append(run_case(fn, spec["name"] + ":first_again", "cache_probe", a, mb))
    return results


# ----------------------------------------------------------------------------
# runtime integrity: candidate code must not rebind what the baseline uses
# ----------------------------------------------------------------------------
def _snapshot(modules):
    return {name: {k: id(v) for k, v in vars(mod).items()} for name, mod in modules.items()}


def _tampered(modules, before):
    changed = []
    for name, mod in modules.items():
        now = vars(mod)
        for key, ident in before[name].items():
            if key not in now or id(now[key]) != ident:
                changed.append(f"{name}.{key}")
    return changed


# ----------------------------------------------------------------------------
# runtime guard: the scan's counterpart while candidate code runs
# ----------------------------------------------------------------------------
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec", "os.spawn"}
_FS_EVENTS = {"os.remove", "os.rename", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown",
              "os.mkdir", "os.rmdir", "os.utime", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
              "shutil.copytree", "shutil.move", "shutil.rmtree"}
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
        _audited_fork_exec()
        sys.addaudithook(self._hook)

    def _path(self, p):
        try:
            return os.path.realpath(os.fsdecode(p))
        except (TypeError, ValueError):
            return None

    def _verdict(self, event, args):
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(path, int):
                return None
            p = self._path(path)
            if p is None:
                return None
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            if _under(p, self.private):
                return ("writes_verifier_output" if writing and _under(p, ["/logs"]) else
                        "touches_grader_files") + ":" + p
            if writing and not _under(p, _WRITABLE):
                return "writes_outside_scope:" + p
            return None
        if event in ("os.listdir", "os.scandir", "glob.glob"):
            p = self._path(args[0]) if args and args[0] is not None else None
            return "touches_grader_files:" + p if p and _under(p, self.private) else None
        if event in _FS_EVENTS:
            p = self._path(args[0]) if args and not isinstance(args[0], int) else None
            return None if p and _under(p, _WRITABLE) else "writes_outside_scope:" + str(p)
        if event.startswith("socket.") and event != "socket.__new__":
            return "network"
        if event in _SPAWN_EVENTS:
            return "process_spawn"
        if event.startswith("ctypes."):
            return "ctypes"
        if event in ("sys.settrace", "sys.setprofile"):
            return "trace_hooks"
        return None

    def _hook(self, event, args):
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

    def names(self):
        return sorted({h.split(":")[0] for h in self.hits})


_GUARD = None


def _become_subreaper():
    """Orphans of candidate processes are re-parented here, not to the init, so
    _reap can find every one (double forks and new sessions included)."""
    try:
        import ctypes  # the grader's own use, before the guard is armed
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - without it, _reap still finds direct descendants
        pass


def _reap():
    """Kill every process descending from this one; return 'pid:name' of the living ones."""
    me = os.getpid()
    found = []
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
            name, rest = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:].split()
            if rest and rest[0] != "Z":
                parents[int(entry)] = (int(rest[1]), name)
        mine, grew = {me}, True
        while grew:
            grew = False
            for pid, (ppid, _) in parents.items():
                if ppid in mine and pid not in mine:
                    mine.add(pid)
                    grew = True
        mine.discard(me)
        if not mine:
            break
        for pid in mine:
            found.append("%d:%s" % (pid, parents[pid][1]))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _time_module.sleep(0.02)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
    return sorted(set(found))


def _runtime_findings():
    """Named hard fails from the guard and from processes left behind (each once)."""
    out = []
    if _GUARD is not None:
        out += ["forbidden_runtime:" + n for n in _GUARD.names()]
        RAW["runtime_blocked"] = _GUARD.hits[:20]
    return out


RAW = {"lane": None, "stage": "setup", "hard_fail_reasons": [], "gates": {},
       "correctness": [], "timing": {"ran": False}, "grader_error": None}
_OUT = None


def dump(stage=None):
    if _GUARD is not None:
        _GUARD.quiet_thread = _thread.get_ident()
    gc_was_on = gc.isenabled()
    gc.disable()  # no candidate finalizer may run on this thread while it is quiet
    try:
        if stage == "done" and _GUARD is not None and _GUARD.armed:
            # Nothing the candidate started may outlive the harness, or touch this file after it.
            strays = _reap()
            if strays:
                RAW["strays"] = strays[:20]
                if "background_process" not in RAW["hard_fail_reasons"]:
                    RAW["hard_fail_reasons"].append("background_process")
            for name in _runtime_findings():
                if name not in RAW["hard_fail_reasons"]:
                    RAW["hard_fail_reasons"].append(name)
                    RAW["gates"]["forbidden_pattern"] = False
        if stage is not None:
            RAW["stage"] = stage
        tmp = _OUT + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(RAW, fh, indent=1, default=str)
        os.replace(tmp, _OUT)
    finally:
        if gc_was_on:
            gc.enable()
        if _GUARD is not None:
            _GUARD.quiet_thread = None


def main(a):
    raw = RAW
    with open(a.workloads, "r", encoding="utf-8") as fh:
        wl = json.load(fh)
    raw["lane"] = wl.get("lane")
    fails = raw["hard_fail_reasons"]
    gates = raw["gates"]

    # From here on a dead process (no "done" stage) means candidate code killed it.
    dump("scan")

    # 1. textual scan (no candidate code has run yet)
    hits = scan_scope(a.repo)
    gates["forbidden_pattern"] = not hits
    fails.extend("forbidden_pattern:" + h for h in hits)
    if hits:
        dump("done")
        return 0
    dump("import")

    # 2. the frozen baseline must load (the grader's own check), then the candidate
    base_path = os.path.join(a.baseline_dir, "native_histogram_merge.py")
    try:
        base_mod = _load_private(BASELINE_MODULE_NAME, base_path)
        getattr(base_mod, ENTRY)
    except Exception:  # noqa: BLE001 - the grader itself is broken
        raw["grader_error"] = "cannot load the frozen baseline: " + _short(traceback.format_exc(), 800)
        dump("done")
        return 2

    watched = {"time": _time_module, "gc": gc, BASELINE_MODULE_NAME: base_mod,
               "_nhm_grader_cases": cases, "_nhm_grader_edge_cases": edge,
               "_nhm_grader_reference": reference}
    before = _snapshot(watched)

    def integrity_ok():
        bad = _tampered(watched, before)
        if bad:
            raw["tampered"] = bad[:20]
            gates["forbidden_pattern"] = False
            if "forbidden_pattern:runtime_tampering" not in fails:
                fails.append("forbidden_pattern:runtime_tampering")
        blocked = [n for n in _runtime_findings() if n not in fails]
        if blocked:
            gates["forbidden_pattern"] = False
            fails.extend(blocked)
        return not bad and not _GUARD.hits

    global _GUARD
    _become_subreaper()
    private = [HERE, "/tests", "/opt/loop", "/opt/verifier-baseline", "/opt/verifier-correctness-manifest.json",
               "/logs", os.path.dirname(os.path.abspath(_OUT))]
    _GUARD = Guard(private)
    _GUARD.armed = True

    cand_fn = None
    import_msg = None
    signal.setitimer(signal.ITIMER_REAL, 60.0)
    try:
        mod = importlib.import_module(CANDIDATE_MODULE)
        origin = os.path.realpath(getattr(mod, "__file__", "") or "")
        repo_root = os.path.realpath(a.repo) + os.sep
        if not origin.startswith(repo_root):
            import_msg = f"{CANDIDATE_MODULE} resolved to {origin}, outside {a.repo}"
        else:
            cand_fn = getattr(mod, ENTRY, None)
            if not callable(cand_fn):
                import_msg = f"{CANDIDATE_MODULE}.{ENTRY} is missing or not callable"
                cand_fn = None
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        import_msg = _short(f"{type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    gates["import_failed"] = cand_fn is not None
    raw["import_message"] = import_msg
    if cand_fn is None:
        fails.append("import_failed")
        dump("done")
        return 0
    if not integrity_ok():
        dump("done")
        return 0
    dump("correctness")

    # 3. correctness on fresh inputs, the cache probe, the mutation check
    results = raw["correctness"]
    for name, hists, max_buckets in edge.fixed_cases():
        results.append(run_case(cand_fn, name, "case", hists, max_buckets))
    rc = wl["random_cases"]
    for name, hists, max_buckets in cases.random_cases(rc["seed"], rc["count"]):
        results.append(run_case(cand_fn, name, "random", hists, max_buckets))
    for spec in wl["bench"]:
        for k, (hists, max_buckets) in enumerate(cases.merges(spec)[: wl.get("bench_rounds_checked", 2)]):
            results.append(run_case(cand_fn, "workload:%s:%d" % (spec["name"], k), "workload", hists, max_buckets))
    results.extend(run_cache_probe(cand_fn, wl["cache_probe"]))
    correct_ok = all(r["passed"] for r in results)
    gates["correctness_failed"] = correct_ok
    if not correct_ok:
        fails.append("correctness_failed")

    # 4. error contract
    err_results = []
    for name, args in edge.error_cases():
        if _TIMED_OUT:
            err_results.append({"name": "error:" + name, "kind": "error_contract", "passed": False,
                                "message": "skipped: an earlier call exceeded its time limit"})
            continue
        signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT_S)
        msg = None
        try:
            cand_fn(*args)
            msg = "expected ValueError, the call returned normally"
        except ValueError:
            msg = None
        except _Timeout:
            _TIMED_OUT.append(True)
            msg = "expected ValueError, the call timed out"
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            msg = _short(f"expected ValueError, got {type(exc).__name__}: {exc}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        err_results.append({"name": "error:" + name, "kind": "error_contract",
                            "passed": msg is None, "message": msg})
    results.extend(err_results)
    err_ok = all(r["passed"] for r in err_results)
    gates["error_contract_failed"] = err_ok
    if not err_ok:
        fails.append("error_contract_failed")
    integrity_ok()
    dump("done")
    return 0


def _entry():
    global _OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default="/app/repo")
    ap.add_argument("--baseline-dir", default="/opt/verifier-baseline")
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    _OUT = a.out
    try:
        return main(a)
    except Exception:  # noqa: BLE001 - a bug or a broken install on the grader side
        if _GUARD is not None:
            _GUARD.armed = False  # formatting the traceback reads this file
        RAW["grader_error"] = _short(traceback.format_exc(), 1500)
        dump("done")
        return 2


if __name__ == "__main__":
    _rc = _entry()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_rc)  # no atexit handler, finalizer or thread of the candidate runs after the verdict
