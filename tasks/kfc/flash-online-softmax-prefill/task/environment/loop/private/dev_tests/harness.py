"""Grader harness (hidden and dev lanes share it): gates, correctness, then GPU timing.

Order, cheapest first: the textual scan of the scope; the GPU check; the runtime stubs of
the banned library calls and a snapshot of the clocks; the frozen baseline and then the
candidate imported; timer and baseline-import checks; correctness on fresh inputs against
an independent reference (with input-mutation checks), the metamorphic cases, the cache
probe and the error contract; finally (KERNELBENCH_DEVICE=cuda only) ABBA-paired GPU
timing against the frozen baseline. The task-specific parts live in cases.py.
Writes one JSON document (--out) that compute_reward.py turns into the verdict files.
"""

import os

DEVICE_MODE = os.environ.get("KERNELBENCH_DEVICE", "cuda").strip().lower() or "cuda"
if DEVICE_MODE == "cpu":
    # Triton kernels run in its interpreter on CPU tensors; must be set before triton loads.
    os.environ["TRITON_INTERPRET"] = "1"

# The clocks are bound before any candidate code can be imported.
import time as _time_module

_PERF_NS = _time_module.perf_counter_ns
_PERF = _time_module.perf_counter

import argparse
import gc
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import linecache
import re
import signal
import sys
import tokenize
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
# Candidate code must not be able to import grader modules by name.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]


def _load_private(name, path):
    # Not registered in sys.modules: candidate code cannot find these by name.
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cases = _load_private("_grader_cases", os.path.join(HERE, "cases.py"))
reference = _load_private(cases.REFERENCE_NAME, os.path.join(HERE, "reference.py"))

import torch

_SAVED_TIMERS = {
    "torch.cuda.Event": torch.cuda.Event,
    "torch.cuda.synchronize": torch.cuda.synchronize,
    "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
    "torch.cuda.Event.record": torch.cuda.Event.record,
    "time.perf_counter": _PERF,
    "time.perf_counter_ns": _PERF_NS,
}


def _current_timers():
    return {
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "time.perf_counter": _time_module.perf_counter,
        "time.perf_counter_ns": _time_module.perf_counter_ns,
    }


# Identity alone misses a timer whose function object stays but whose code, defaults or
# closure were swapped. Fingerprint: every callable the timing path goes through, and for a
# Python function also its __code__, __defaults__, __kwdefaults__, the contents of its
# closure cells and the globals/builtins its code names (one level); for the Event and
# Stream classes (and their bases) every entry of the class __dict__. Taken once at harness
# start, before any candidate code is imported; any difference later: timer_patched.
_TIMER_ROOTS = {"torch": torch, "time": _time_module}
_TIMER_NAMES = (
    "time.perf_counter", "time.perf_counter_ns",
    "torch.cuda.Event", "torch.cuda.Stream", "torch.cuda.synchronize", "torch.cuda.current_stream",
    "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time", "torch.cuda.Event.synchronize",
    "torch.cuda.Event.query", "torch.cuda.Event.wait",
    "torch.cuda.Stream.synchronize", "torch.cuda.Stream.wait_stream", "torch.cuda.Stream.record_event",
    "torch.cuda.Stream.wait_event", "torch.cuda.Stream.query",
    "torch._C._cuda_synchronize", "torch._C._cuda_getCurrentStream",
)
_TIMER_CLASSES = ("torch.cuda.Event", "torch.cuda.Stream")
_ABSENT = object()
# Entries Python itself may add to a class later (annotations read, an instance copied).
_LAZY_CLASS_KEYS = ("__annotations__", "__slotnames__")


def _resolve(dotted):
    parts = dotted.split(".")
    obj = _TIMER_ROOTS.get(parts[0], _ABSENT)
    for p in parts[1:]:
        if obj is _ABSENT:
            break
        obj = getattr(obj, p, _ABSENT)
    return obj


def _function_parts(label, fn, out):
    """label-keyed parts of a Python function; values compared by identity."""
    code = fn.__code__
    out[label + ".__code__"] = code
    out[label + ".__defaults__"] = fn.__defaults__
    out[label + ".__kwdefaults__"] = fn.__kwdefaults__
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            out[f"{label}.__closure__[{i}]"] = cell.cell_contents
        except ValueError:  # an empty cell
            out[f"{label}.__closure__[{i}]"] = _ABSENT
    glb = fn.__globals__
    blt = getattr(fn, "__builtins__", None) or {}
    if isinstance(blt, types.ModuleType):
        blt = vars(blt)
    for name in code.co_names:
        val = glb.get(name, _ABSENT)
        if val is _ABSENT:
            val = blt.get(name, _ABSENT)
        # Callables and modules only: plain values (flags such as _initialized) change legitimately.
        if val is not _ABSENT and (callable(val) or isinstance(val, types.ModuleType)):
            out[f"{label}->{name}"] = val


def _timer_fingerprint():
    """{part: object}; compared by identity (class __dict__ key sets by equality)."""
    out = {}
    for name in _TIMER_NAMES:
        obj = _resolve(name)
        out[name] = obj
        if isinstance(obj, types.FunctionType):
            _function_parts(name, obj, out)
    for name in _TIMER_CLASSES:
        cls = _resolve(name)
        if not isinstance(cls, type):
            continue
        for klass in cls.__mro__:
            if klass is object:
                continue
            label = f"{name}[{klass.__qualname__}]"
            ns = {k: v for k, v in vars(klass).items() if k not in _LAZY_CLASS_KEYS}
            out[label + ".__dict__"] = tuple(sorted(ns))
            for key, val in ns.items():
                out[f"{label}.{key}"] = val
                if isinstance(val, (staticmethod, classmethod)):
                    val = val.__func__
                if isinstance(val, types.FunctionType):
                    _function_parts(f"{label}.{key}", val, out)
    return out


def _fingerprint_changes(saved, now):
    bad = []
    for key, val in saved.items():
        cur = now.get(key, _ABSENT)
        same = (cur == val) if key.endswith(".__dict__") else (cur is val)
        if not same:
            bad.append(key)
    return bad


_TIMER_PRINT = _timer_fingerprint()


# Textual scan of the scope. Each entry: (gate, what, pattern).
_BASE_FORBIDDEN = [
    ("baseline_called", "grader_files", r"/tests\b"),
    ("baseline_called", "frozen_baseline", r"verifier-baseline|verifier_baseline|frozen_baseline"),
    ("baseline_called", "reference_module", re.escape(cases.REFERENCE_NAME)),
    ("forbidden_pattern", "reads_verifier_output", r"/logs\b"),
    ("forbidden_pattern", "reads_loop_harness", r"/opt/loop|dev_tests"),
    ("forbidden_pattern", "subprocess", r"\bsubprocess\b"),
    ("forbidden_pattern", "os_process_control", r"\bos\s*\.\s*(system|popen|exec\w*|spawn\w*|fork\w*|_exit|kill\w*|abort)\b"),
    ("forbidden_pattern", "socket", r"\bsocket\b"),
    ("forbidden_pattern", "ctypes", r"\bctypes\b"),
    ("forbidden_pattern", "cffi", r"\bcffi\b"),
    ("forbidden_pattern", "timer_access", r"perf_counter|process_time|\bmonotonic\b|elapsed_time"),
    ("forbidden_pattern", "time_monkeypatch", r"\btime\s*\.\s*\w+\s*=(?!=)"),
    # Assigning to torch's globals (flags, functions) would change the baseline's run too.
    ("forbidden_pattern", "torch_global_state", r"(?m)^\s*torch\s*\.\s*[A-Za-z_][\w.]*\s*(\[[^\]]*\])?\s*=(?!=)"),
    ("forbidden_pattern", "threading", r"\b(threading|_thread)\b"),
    ("forbidden_pattern", "multiprocessing", r"\bmultiprocessing\b"),
    ("forbidden_pattern", "concurrent_futures", r"\bconcurrent\b"),
    ("forbidden_pattern", "atexit", r"\batexit\b"),
    ("forbidden_pattern", "signal", r"\bsignal\b"),
    ("forbidden_pattern", "sys_modules", r"\bsys\s*\.\s*modules\b"),
    ("forbidden_pattern", "frame_introspection",
     r"\b_getframe\b|\binspect\b|\bf_back\b|\bf_globals\b|\bgc\s*\.\s*get_(objects|referrers|referents)\b"),
    ("forbidden_pattern", "dynamic_import", r"\bimportlib\b|__import__"),
    ("forbidden_pattern", "dynamic_exec", r"\b(exec|eval)\s*\("),
    ("forbidden_pattern", "builtins_patch", r"\bbuiltins\b|__builtins__"),
    ("forbidden_pattern", "setattr_on_module", r"\bsetattr\s*\(\s*(np|numpy|time|sys|os|gc|torch|triton|tl)\b"),
    ("forbidden_pattern", "trace_hooks", r"\bset(trace|profile)\b"),
    # The harness runs as __main__: importing it would reach its saved clocks and records.
    ("forbidden_pattern", "harness_access", r"\b__main__\b"),
]
FORBIDDEN = _BASE_FORBIDDEN + [("forbidden_pattern", what, pat) for what, pat in cases.FORBIDDEN_CALLS]


class _Timeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Timeout("call exceeded its time limit")


signal.signal(signal.SIGALRM, _on_alarm)


def _short(text, limit=300):
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------- textual scan
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
    hits = set()
    for rel in cases.SCOPE:
        path = os.path.join(repo, rel)
        if not os.path.isfile(path):
            continue
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            text = _without_comments(fh.read())
        for gate, what, pattern in FORBIDDEN:
            if re.search(pattern, text):
                hits.add(gate if gate == "baseline_called" else f"{gate}:{what}")
    return sorted(hits)


# ----------------------------------------------------------------------------- runtime stubs
STUB_HITS = []


class ForbiddenCallError(RuntimeError):
    pass


def _raiser(label):
    def stub(*args, **kwargs):
        STUB_HITS.append(label)
        raise ForbiddenCallError(f"{label} is not allowed in this task")

    stub.__name__ = label.rsplit(".", 1)[-1]
    stub._kb_stub = True
    return stub


class _StubModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        STUB_HITS.append(f"{self.__name__}.{attr}")
        raise ForbiddenCallError(f"{self.__name__}.{attr} is not allowed in this task")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any import of a banned package (or its submodules) yields a module that raises on use."""

    def __init__(self, roots):
        self.roots = tuple(roots)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _StubModule(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        return None


def install_stubs():
    installed = []
    for name in list(sys.modules):
        if name.split(".")[0] in cases.STUB_MODULES:
            del sys.modules[name]
    sys.meta_path.insert(0, _StubFinder(cases.STUB_MODULES))
    for dotted in cases.STUB_ATTRS:
        owner_name, _, attr = dotted.rpartition(".")
        owner = None
        try:
            owner = importlib.import_module(owner_name)
        except Exception:  # noqa: BLE001 - not a module path: walk attributes instead
            parts = owner_name.split(".")
            try:
                owner = importlib.import_module(parts[0])
                for p in parts[1:]:
                    owner = getattr(owner, p)
            except Exception:  # noqa: BLE001
                owner = None
        if owner is None:
            continue
        current = getattr(owner, attr, None)
        if current is None or isinstance(current, types.ModuleType):
            continue
        try:
            setattr(owner, attr, _raiser(dotted))
            installed.append(dotted)
        except (AttributeError, TypeError):
            pass
    return installed


# ----------------------------------------------------------------------------- calling candidate code
_TIMED_OUT = []
CALL_LIMIT_S = 120.0


def _sync():
    if DEVICE_MODE == "cuda":
        _SAVED_TIMERS["torch.cuda.synchronize"]()


def call(fn, case, limit_s=CALL_LIMIT_S):
    """Run fn on a case with a time limit; return (output, error_text)."""
    if _TIMED_OUT:
        return None, "skipped: an earlier call exceeded its time limit"
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        out = fn(*case["args"], **case["kwargs"])
        _sync()
        return out, None
    except _Timeout as exc:
        _TIMED_OUT.append(True)
        return None, f"timeout: {exc} ({limit_s:.0f} s)"
    except BaseException as exc:  # noqa: BLE001 - candidate code may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None, _short(f"{type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _unchanged(before, after_case):
    for i, (a, b) in enumerate(zip(before, cases.tensors_of(after_case))):
        if a.shape != b.shape or a.dtype != b.dtype or not torch.equal(a, b):
            return f"input #{i} was modified in place"
    return None


def run_case(fn, name, case, kind="case"):
    given = cases.clone_case(case)
    before = [t.clone() for t in cases.tensors_of(given)]
    out, err = call(fn, given)
    mutated = None
    if err is None:
        err = cases.check_output(out, case, reference)
        mutated = _unchanged(before, given)
    return {"name": name, "kind": kind, "passed": err is None and mutated is None,
            "message": err or mutated, "mutated": mutated is not None}


def run_cache_probe(fn, spec, device):
    """Same shapes, other values; then the same objects rewritten in place; then the first again."""
    results = []
    a = cases.build(spec, device, spec["seed"])
    b = cases.build(spec, device, spec["seed_b"])
    c = cases.build(spec, device, spec["seed_c"])
    results.append(run_case(fn, spec["name"] + ":first", a, "cache_probe"))
    results.append(run_case(fn, spec["name"] + ":same_shape_other_values", b, "cache_probe"))
    held = cases.clone_case(b)
    out1, err = call(fn, held)
    msg = err or cases.check_output(out1, b, reference)
    if msg is None:
        for dst, src in zip(cases.tensors_of(held), cases.tensors_of(c)):
            dst.copy_(src)
        out2, err = call(fn, held)
        msg = err or cases.check_output(out2, c, reference)
    results.append({"name": spec["name"] + ":mutated_same_objects", "kind": "cache_probe",
                    "passed": msg is None, "message": msg, "mutated": False})
    results.append(run_case(fn, spec["name"] + ":first_again", a, "cache_probe"))
    return results


def run_error_case(fn, name, args, expected):
    if _TIMED_OUT:
        return {"name": "error:" + name, "kind": "error_contract", "passed": False,
                "message": "skipped: an earlier call exceeded its time limit"}
    signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT_S)
    msg = None
    try:
        fn(*args)
        msg = f"expected {expected.__name__}, the call returned normally"
    except expected:
        msg = None
    except _Timeout:
        _TIMED_OUT.append(True)
        msg = f"expected {expected.__name__}, the call timed out"
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        msg = _short(f"expected {expected.__name__}, got {type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"name": "error:" + name, "kind": "error_contract", "passed": msg is None, "message": msg}


# ----------------------------------------------------------------------------- integrity
def timers_patched():
    now = _current_timers()
    bad = {k for k, v in _SAVED_TIMERS.items() if now[k] is not v}
    bad.update(_fingerprint_changes(_TIMER_PRINT, _timer_fingerprint()))
    return sorted(bad)


def _grader_paths(baseline_dir):
    return [os.path.realpath(baseline_dir) + os.sep, os.path.realpath(HERE) + os.sep]


# Where code or data the candidate must not use lives: the frozen baseline, the grader's own
# folder (this file, cases.py, the reference, gpu_timing.py, the workloads) and /tests.
# Set by protect() before the candidate is imported.
_PROTECTED = {"roots": (), "owned": {}, "inside": {}}
_gc_get_objects = gc.get_objects
_realpath = os.path.realpath


def _inside(path):
    """Whether a file name resolves into one of the protected folders (cached per name)."""
    cache = _PROTECTED["inside"]
    hit = cache.get(path)
    if hit is None:
        try:
            real = _realpath(path) + os.sep
        except (OSError, ValueError, TypeError):
            real = str(path) + os.sep
        hit = any(real.startswith(root) for root in _PROTECTED["roots"])
        if len(cache) > 20000:
            cache.clear()
        cache[path] = hit
    return hit


def _protected_functions():
    for obj in _gc_get_objects():
        if type(obj) is types.FunctionType and _inside(obj.__code__.co_filename):
            yield obj


def _add_code_tree(code, owned):
    stack = [code]
    while stack:
        c = stack.pop()
        if id(c) in owned:
            continue
        owned[id(c)] = c  # the reference keeps the id from being reused
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


# Layer (b): an audit hook, added just before the candidate import, notes every open of a
# file, every compile with a file name and every exec of a code object that resolves into a
# protected folder. The harness opens nothing there after that point (its modules are loaded
# and their sources put in linecache first); where it might (formatting its own tracebacks)
# it holds _AUDIT["own"].
_AUDIT = {"armed": False, "own": 0, "busy": False, "hits": []}
_AUDIT_EVENTS = frozenset(("open", "compile", "exec"))


def _audit_hook(event, args):
    if event not in _AUDIT_EVENTS:
        return
    st = _AUDIT
    if not st["armed"] or st["own"] or st["busy"]:
        return
    st["busy"] = True
    try:
        if event == "open":
            target = args[0] if args else None
        elif event == "compile":
            target = args[1] if len(args) > 1 else None
        else:
            target = getattr(args[0], "co_filename", None) if args else None
        if isinstance(target, os.PathLike):
            target = os.fspath(target)
        if isinstance(target, bytes):
            target = os.fsdecode(target)
        if isinstance(target, str) and target and _inside(target) and len(st["hits"]) < 20:
            st["hits"].append(f"{event} {target}")
    except Exception:  # noqa: BLE001 - the hook must never break the audited call
        pass
    finally:
        st["busy"] = False


class _HarnessOwn:
    """Marks the harness's own reads of protected files (its tracebacks) for the audit hook."""

    def __enter__(self):
        _AUDIT["own"] += 1

    def __exit__(self, *exc):
        _AUDIT["own"] -= 1
        return False


def protect(baseline_dir, source_files):
    """Called once, after the frozen baseline (and every grader module) is loaded and just
    before the candidate is imported: records the code the harness owns, puts the protected
    sources in linecache (so warnings and tracebacks that show their lines open nothing),
    then arms the audit hook."""
    roots = {os.path.realpath(p) + os.sep
             for p in (baseline_dir, HERE, os.path.dirname(os.path.abspath(reference.__file__)), "/tests")}
    _PROTECTED["roots"] = tuple(sorted(roots))
    _PROTECTED["inside"].clear()
    for path in source_files:
        try:
            linecache.getlines(path)
        except Exception:  # noqa: BLE001
            pass
    owned = {}
    for fn in _protected_functions():
        _add_code_tree(fn.__code__, owned)
    _PROTECTED["owned"] = owned
    sys.addaudithook(_audit_hook)
    _AUDIT["armed"] = True


def baseline_held():
    """Layer (a): live functions whose code comes from a protected file but that the harness
    did not own before the candidate was imported (a frozen-baseline function loaded by the
    candidate, wherever it keeps it: a dict, a partial, a closure)."""
    owned = _PROTECTED["owned"]
    found = []
    for fn in _protected_functions():
        code = fn.__code__
        if owned.get(id(code)) is not code:
            found.append(f"gc:{getattr(fn, '__qualname__', '?')} from {code.co_filename}")
            if len(found) >= 5:
                break
    return found


def baseline_imported(baseline_dir, cand_mod):
    """Names of modules/functions from the frozen baseline or the grader that the candidate holds."""
    roots = _grader_paths(baseline_dir)

    def inside(path):
        return bool(path) and any(os.path.realpath(path).startswith(r) for r in roots)

    found = []
    main_mod = sys.modules.get("__main__")
    for name, mod in list(sys.modules.items()):
        # The harness itself runs as __main__ (multiprocessing aliases it as __mp_main__).
        if mod is None or mod is main_mod or name in ("__main__", "__mp_main__"):
            continue
        if inside(getattr(mod, "__file__", None) or ""):
            found.append("sys.modules:" + name)
    for key, val in list(vars(cand_mod).items()) if cand_mod is not None else []:
        if getattr(val, "_kb_stub", False) or isinstance(val, _StubModule):
            continue  # a banned call the candidate holds: the stub reports it when called
        path = getattr(val, "__file__", None)
        code = getattr(val, "__code__", None)
        if inside(path or "") or (code is not None and inside(code.co_filename)):
            found.append("global:" + key)
    if _PROTECTED["roots"]:
        found.extend(baseline_held())
        found.extend("audit:" + h for h in _AUDIT["hits"])
    return found


# ----------------------------------------------------------------------------- main
RAW = {"lane": None, "device": DEVICE_MODE, "hardware": None, "stage": "setup", "hard_fail_reasons": [],
       "gates": {}, "correctness": [], "timing": {"ran": False}, "grader_error": None}
_OUT = None


def dump(stage=None):
    if stage is not None:
        RAW["stage"] = stage
    tmp = _OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(RAW, fh, indent=1, default=str)
    os.replace(tmp, _OUT)


def _fail(name):
    if name not in RAW["hard_fail_reasons"]:
        RAW["hard_fail_reasons"].append(name)


def main(a):
    raw = RAW
    gates = raw["gates"]
    with open(a.workloads, "r", encoding="utf-8") as fh:
        wl = json.load(fh)
    with open(a.prefail, "r", encoding="utf-8") as fh:
        prefail = [ln.strip() for ln in fh if ln.strip()]
    raw["lane"] = wl.get("lane")
    if DEVICE_MODE not in ("cuda", "cpu"):
        raw["grader_error"] = f"KERNELBENCH_DEVICE={DEVICE_MODE!r}: use cuda or cpu"
        dump("done")
        return 2
    plan = wl[DEVICE_MODE]
    device = DEVICE_MODE
    dump("scan")

    # 1. textual scan (no candidate code has run yet)
    hits = scan_scope(a.repo)
    gates["forbidden_pattern"] = not any(h.startswith("forbidden_pattern") for h in hits)
    gates["baseline_called"] = "baseline_called" not in hits
    for h in hits:
        _fail(h)
    if hits:
        dump("done")
        return 0

    # 2. a GPU is needed for the full grade
    if device == "cuda":
        if not torch.cuda.is_available():
            gates["no_gpu"] = False
            _fail("no_gpu")
            raw["notes"] = "KERNELBENCH_DEVICE=cuda but torch sees no CUDA device"
            dump("done")
            return 0
        gates["no_gpu"] = True
        raw["hardware"] = torch.cuda.get_device_name()
    else:
        raw["hardware"] = "cpu"
    dump("import")

    # 3. stubs, then the frozen baseline, then the candidate
    raw["stubs_installed"] = install_stubs()
    try:
        base_mod = _load_private("_frozen_baseline_scope", os.path.join(a.baseline_dir, cases.BASELINE_FILE))
        base_fn = getattr(base_mod, cases.ENTRY)
    except Exception:  # noqa: BLE001 - the grader's own side is broken
        raw["grader_error"] = "cannot load the frozen baseline: " + _short(traceback.format_exc(), 800)
        dump("done")
        return 2
    # Loaded now, before the audit hook is armed: no grader file is opened after that point.
    gpu_timing = _load_private("_grader_gpu_timing", os.path.join(HERE, "gpu_timing.py"))
    protect(a.baseline_dir, [globals().get("__file__") or "", os.path.abspath(globals().get("__file__") or "")]
            + [os.path.join(HERE, f) for f in ("cases.py", "reference.py", "gpu_timing.py")]
            + [os.path.join(a.baseline_dir, cases.BASELINE_FILE)])

    cand_mod, cand_fn, import_msg = None, None, None
    signal.setitimer(signal.ITIMER_REAL, 120.0)
    try:
        cand_mod = importlib.import_module(cases.CANDIDATE_MODULE)
        origin = os.path.realpath(getattr(cand_mod, "__file__", "") or "")
        if not origin.startswith(os.path.realpath(a.repo) + os.sep):
            import_msg = f"{cases.CANDIDATE_MODULE} resolved to {origin}, outside {a.repo}"
        else:
            cand_fn = getattr(cand_mod, cases.ENTRY, None)
            if not callable(cand_fn):
                import_msg = f"{cases.CANDIDATE_MODULE}.{cases.ENTRY} is missing or not callable"
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
        _fail("import_failed")
        dump("done")
        return 0

    def integrity(where):
        ok = True
        patched = timers_patched()
        if patched:
            raw.setdefault("timer_patched", []).append({"where": where, "names": patched})
            gates["timer_patched"] = False
            _fail("timer_patched")
            raw["correctness"].append({"name": "integrity:timer_patched", "kind": "integrity", "passed": False,
                                       "message": _short(f"{where}: changed: {', '.join(patched[:6])}")})
            ok = False
        else:
            gates.setdefault("timer_patched", True)
        held = baseline_imported(a.baseline_dir, cand_mod)
        if held:
            raw.setdefault("baseline_called", []).append({"where": where, "names": held[:10]})
            gates["baseline_called"] = False
            _fail("baseline_called")
            layers = sorted({h.split(":", 1)[0] for h in held})
            raw["correctness"].append({
                "name": "integrity:baseline_called", "kind": "integrity", "passed": False,
                "message": _short(f"{where}: the candidate holds or read frozen-baseline/grader code "
                                  f"(found by {'/'.join(layers)}): {'; '.join(held[:3])}")})
            ok = False
        else:
            gates.setdefault("baseline_called", True)
        if STUB_HITS:
            raw["stub_hits"] = sorted(set(STUB_HITS))
            gates["forbidden_pattern"] = False
            for h in sorted(set(STUB_HITS)):
                _fail("forbidden_pattern:runtime:" + h)
            ok = False
        return ok

    if not integrity("after import"):
        dump("done")
        return 0
    dump("correctness")

    # 4. correctness: plain cases, metamorphic cases, the cache probe, the error contract
    results = raw["correctness"]
    for spec in plan["cases"]:
        if "special" in spec:
            msg = cases.run_special(spec, cand_fn, call, device, reference)
            results.append({"name": spec["name"], "kind": "metamorphic", "passed": msg is None, "message": msg})
        else:
            results.append(run_case(cand_fn, spec["name"], cases.build(spec, device)))
        dump()
    probe = run_cache_probe(cand_fn, plan["cache_probe"], device)
    results.extend(probe)
    err_results = [run_error_case(cand_fn, name, args, exc) for name, args, exc in cases.error_cases(device)]
    results.extend(err_results)

    mutated = [r for r in results if r.get("mutated")]
    gates["inputs_mutated"] = not mutated
    if mutated:
        _fail("inputs_mutated")
    # Right on two fresh input sets but wrong once the same objects were rewritten or a
    # set came back: an answer served from a cache. Wrong on fresh inputs: plain wrong.
    fresh_ok = all(r["passed"] for r in probe[:2])
    cached = [r for r in probe[2:] if not r["passed"]] if fresh_ok else []
    gates["output_cached"] = not cached
    plain_bad = [r for r in results if not r["passed"] and not r.get("mutated")
                 and (r["kind"] in ("case", "metamorphic") or (r["kind"] == "cache_probe" and not fresh_ok))]
    gates["correctness_failed"] = not plain_bad
    if plain_bad:
        _fail("correctness_failed")
    if cached:
        _fail("output_cached")
    err_ok = all(r["passed"] for r in err_results)
    gates["error_contract_failed"] = err_ok
    if not err_ok:
        _fail("error_contract_failed")
    integrity("after correctness")
    dump("timing")

    # 5. timing: GPU only, and only when every gate so far passed
    if device == "cpu":
        raw["timing"] = {"ran": False, "skipped_because": "KERNELBENCH_DEVICE=cpu: correctness only"}
        dump("done")
        return 0
    if prefail or raw["hard_fail_reasons"]:
        raw["timing"] = {"ran": False, "skipped_because": sorted(set(prefail + raw["hard_fail_reasons"]))}
        dump("done")
        return 0
    try:
        report, timing_fails, timing_results = gpu_timing.run(
            cases, reference, base_fn, cand_fn, plan, device, _SAVED_TIMERS)
        raw["timing"] = report
        results.extend(timing_results)
        gates["timing_failed"] = True
        for gate in ("output_cached", "inputs_mutated", "side_stream_escape", "beyond_roofline"):
            bad = [f for f in timing_fails if f == gate]
            gates[gate] = gates.get(gate, True) and not bad
            if bad:
                _fail(gate)
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        error = _short(f"{type(exc).__name__}: {exc}", 600)
        with _HarnessOwn():  # its own traceback: the lines come from linecache
            trace = _short(traceback.format_exc(), 1500)
        raw["timing"] = {"ran": False, "error": error, "trace": trace}
        gates["timing_failed"] = False
        _fail("timing_failed")
    integrity("after timing")
    dump("done")
    return 0


def _entry():
    global _OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default="/app/repo")
    ap.add_argument("--baseline-dir", default="/opt/verifier-baseline")
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--prefail", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    _OUT = a.out
    try:
        return main(a)
    except Exception:  # noqa: BLE001 - a bug or a broken install on the grader side
        with _HarnessOwn():
            RAW["grader_error"] = _short(traceback.format_exc(), 1500)
        dump("done")
        return 2


if __name__ == "__main__":
    sys.exit(_entry())
