#!/usr/bin/env python3
"""Grader harness of vllm_priority_request_queue (hidden grader and dev engine).

Phases, cheapest first; a failing phase stops the run:
  static       head_moved, out_of_scope_edit:<path>, forbidden_pattern:<what>
  import       import_failed (the scope module must import from /app/repo)
  correctness  correctness_failed / error_contract_failed, against the
               independent reference model (prq_reference), on fresh inputs,
               plus cache probes, input-mutation and monkeypatch checks
  timing       timing_failed; ABBA pairs against the frozen baseline

Raw results are written (atomically, after every phase) to --out;
compute_reward.py turns them into reward.json.

From the import of the candidate on, a runtime guard (PEP 578 audit hooks,
which cannot be removed) blocks and records what the scan looks for but a
disguised spelling would slip past: grader files read, writes outside /tmp
(the verifier's output included), network, new processes, ctypes ->
forbidden_runtime:<what>. At the end the candidate's exit handlers run under
the guard, processes it started are killed, the last result is written and
the process ends with os._exit, so nothing of the candidate runs after it.
"""

# The clock is bound here, before any candidate code is imported.
from time import perf_counter_ns as _clock

import _thread
import argparse
import ast
import atexit
import gc
import importlib
import importlib.util
import json
import linecache
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import prq_reference as ref  # noqa: E402
import prq_workloads as W  # noqa: E402

# Tracebacks formatted while the guard is armed find the grader's source lines here.
for _src in (os.path.abspath(__file__), ref.__file__, W.__file__):
    linecache.getlines(_src)

REPO = "/app/repo"
SCOPE = ["vllm/v1/core/sched/wro_priority_request_queue.py"]
MODULE = "vllm.v1.core.sched.wro_priority_request_queue"
CLASS = "PriorityRequestQueue"
BASELINE_FILE = "/opt/verifier-baseline/wro_priority_request_queue.py"
BASELINE_COMMIT_FILE = "/opt/verifier-baseline/BASELINE_COMMIT"

# ---------------------------------------------------------------------------
# anti-cheat scan of the scope file(s)
# ---------------------------------------------------------------------------
FORBIDDEN_TEXT = [
    ("tests_dir", r"/tests\b"),
    ("logs_dir", r"/logs\b"),
    ("verifier_baseline", r"verifier[-_]baseline|_prq_frozen"),
    ("timer", r"perf_counter|process_time|monotonic|time_ns|thread_time|\btime\.time\b"),
    ("subprocess", r"\bsubprocess\b|\bos\.(system|popen|exec\w*|spawn\w*|fork)\b"),
    ("socket", r"\bsocket\b"),
    ("ctypes", r"\bctypes\b|\bcffi\b"),
    ("threading", r"\bthreading\b|\b_thread\b|\bmultiprocessing\b|concurrent\.futures"),
    ("atexit", r"\batexit\b"),
    ("tracing", r"\bsettrace\b|\bsetprofile\b|_getframe|\bf_back\b|\bf_globals\b"),
    ("gc", r"\bgc\s*\.|\bimport\s+gc\b"),
    ("dynamic_import", r"__import__|\bimportlib\b"),
    ("builtins", r"\bbuiltins\b|__builtins__"),
    ("sys_modules", r"\bsys\s*\.\s*modules\b"),
    ("eval_exec", r"\beval\s*\(|\bexec\s*\(|\bcompile\s*\("),
    ("file_io", r"\bopen\s*\(|\bpathlib\b|\bshutil\b"),
    ("environ", r"\bos\.environ\b|\bgetenv\b"),
    ("pickle", r"\bpickle\b|\bmarshal\b"),
]
ALLOWED_IMPORTS = {
    "__future__", "abc", "array", "bisect", "collections", "collections.abc",
    "copy", "dataclasses", "enum", "functools", "heapq", "itertools", "math",
    "numbers", "operator", "types", "typing", "typing_extensions", "weakref",
    "numpy",
}


def scan_scope(path: str) -> list:
    reasons = []
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return []  # a deleted scope file fails at import
    except Exception as exc:  # noqa: BLE001
        return [f"forbidden_pattern:unreadable:{type(exc).__name__}"]
    for what, pattern in FORBIDDEN_TEXT:
        if re.search(pattern, text):
            reasons.append(f"forbidden_pattern:{what}")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return reasons  # reported by the import phase
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                continue  # relative import inside the repo
            names = [node.module or ""]
        for name in names:
            if name == "vllm" or name.startswith("vllm."):
                continue
            if name in ALLOWED_IMPORTS or name.split(".")[0] in ("collections", "numpy"):
                continue
            reasons.append(f"forbidden_pattern:import:{name}")
    return sorted(set(reasons))


# ---------------------------------------------------------------------------
# static gates
# ---------------------------------------------------------------------------
def _git(*args) -> str:
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", REPO, *args], check=True,
                          capture_output=True, text=True).stdout


def static_gates(res: dict) -> None:
    reasons = []
    gates = res["gates"]
    try:
        count = _git("rev-list", "--count", "HEAD").strip()
        head = _git("rev-parse", "HEAD").strip()
    except Exception as exc:  # noqa: BLE001
        count, head = "?", "?"
        res["notes"].append(f"git failed: {exc}")
    moved = count != "1"
    if os.path.isfile(BASELINE_COMMIT_FILE):
        want = open(BASELINE_COMMIT_FILE).read().strip()
        if want and head != want:
            moved = True
    gates["head_ok"] = not moved
    if moved:
        reasons.append("head_moved")

    bad_paths = []
    try:
        raw = _git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching")
        fields = raw.split("\0")
        i = 0
        while i < len(fields):
            entry = fields[i]
            i += 1
            if len(entry) < 4:
                continue
            status, path = entry[:2], entry[3:]
            paths = [path]
            if "R" in status or "C" in status:
                paths.append(fields[i])  # rename source
                i += 1
            for p in paths:
                # byte-code caches are neutralised (PYTHONPYCACHEPREFIX), so they
                # are ignored; any other ignored file (a stray sourceless .pyc, a
                # build/ folder, ...) counts as an edit outside the scope
                if "__pycache__/" in p or p.startswith(".pytest_cache/"):
                    continue
                if p.rstrip("/") not in SCOPE:
                    bad_paths.append(p)
    except Exception as exc:  # noqa: BLE001
        bad_paths.append("<git status failed>")
        res["notes"].append(f"git status failed: {exc}")
    gates["scope_ok"] = not bad_paths
    reasons += [f"out_of_scope_edit:{p}" for p in sorted(set(bad_paths))]

    pattern_hits = []
    for rel in SCOPE:
        pattern_hits += scan_scope(os.path.join(REPO, rel))
    gates["forbidden_pattern_ok"] = not pattern_hits
    reasons += pattern_hits
    res["hard_fail_reasons"] += reasons


# ---------------------------------------------------------------------------
# import
# ---------------------------------------------------------------------------
def _under_repo(path) -> bool:
    if not path:
        return False
    real = os.path.realpath(path)
    return real.startswith(os.path.realpath(REPO) + os.sep)


def _class_snapshot(cls) -> dict:
    return {k: id(v) for k, v in vars(cls).items()}


def load_modules(res: dict, need_baseline: bool):
    """Import helpers, the frozen baseline, then the candidate."""
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    import vllm.v1.request as request_mod
    import vllm.v1.core.sched.request_queue as rq_mod
    for mod in (request_mod, rq_mod):
        if not _under_repo(mod.__file__):
            raise _GraderError(f"{mod.__name__} not imported from {REPO}")
    base_cls = None
    if need_baseline:
        try:
            spec = importlib.util.spec_from_file_location("_prq_frozen_reference_timing", BASELINE_FILE)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            base_cls = getattr(mod, CLASS)
        except Exception as exc:  # noqa: BLE001
            raise _GraderError(f"cannot load the frozen baseline {BASELINE_FILE}: {exc!r}")
    watched = {"Request": request_mod.Request, "RequestQueue": rq_mod.RequestQueue}
    if base_cls is not None:
        watched["frozen_baseline"] = base_cls
    snapshot = {name: _class_snapshot(c) for name, c in watched.items()}
    snapshot["heapq"] = {k: id(v) for k, v in vars(importlib.import_module("heapq")).items()}

    global _GUARD, _TRACKED
    _TRACKED = _tracked_files()
    while HERE in sys.path:  # candidate code must not import grader modules by name
        sys.path.remove(HERE)
    _become_subreaper()
    _GUARD = Guard([HERE, "/tests", "/opt/loop", "/opt/verifier-baseline",
                    "/opt/verifier-correctness-manifest.json", "/logs", os.path.dirname(os.path.abspath(_OUT))])
    _GUARD.armed = True
    cand_cls = None
    try:
        cand_mod = importlib.import_module(MODULE)
        if not _under_repo(getattr(cand_mod, "__file__", None)):
            raise ImportError(f"{MODULE} was not imported from {REPO} "
                              f"(got {getattr(cand_mod, '__file__', None)!r})")
        cand_cls = getattr(cand_mod, CLASS)
        if not isinstance(cand_cls, type):
            raise ImportError(f"{CLASS} is not a class")
        probe = cand_cls()
        del probe
    except BaseException as exc:  # noqa: BLE001
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        res["gates"]["import_ok"] = False
        res["hard_fail_reasons"].append("import_failed")
        res["errors"].append(f"import_failed: {tb[:300]}")
        return None
    res["gates"]["import_ok"] = True
    return {"Request": request_mod.Request, "cand": cand_cls, "base": base_cls,
            "watched": watched, "snapshot": snapshot}


def _tracked_files() -> set:
    try:
        return set(_git("ls-files", "-z").split("\0"))
    except Exception:  # noqa: BLE001
        return set()


_TRACKED = None  # listed once, before the guard is armed (it blocks new processes)


def module_provenance_check() -> list:
    """Every loaded vllm.* module must be a tracked .py source file of the repo."""
    tracked = _TRACKED if _TRACKED is not None else _tracked_files()
    root = os.path.realpath(REPO) + os.sep
    hits = []
    for name, mod in list(sys.modules.items()):
        if not (name == "vllm" or name.startswith("vllm.")) or mod is None:
            continue
        path = os.path.realpath(getattr(mod, "__file__", "") or "")
        rel = path[len(root):] if path.startswith(root) else None
        if rel is None or not rel.endswith(".py") or rel not in tracked:
            hits.append(f"forbidden_pattern:untracked_module:{name}")
    return hits


def monkeypatch_check(env: dict) -> list:
    hits = module_provenance_check()
    for name, cls in env["watched"].items():
        if _class_snapshot(cls) != env["snapshot"][name]:
            hits.append(f"forbidden_pattern:monkeypatch:{name}")
    heap_now = {k: id(v) for k, v in vars(importlib.import_module("heapq")).items()}
    if heap_now != env["snapshot"]["heapq"]:
        hits.append("forbidden_pattern:monkeypatch:heapq")
    import time as _time_mod
    if _time_mod.perf_counter_ns is not _clock:
        hits.append("forbidden_pattern:monkeypatch:time")
    return hits


# ---------------------------------------------------------------------------
# correctness
# ---------------------------------------------------------------------------
def _state_of(reqs) -> list:
    return [(type(r), dict(vars(r))) for r in reqs]


def _check_single(env, name, kind, specs, ops, reqs=None) -> dict:
    Request, cls = env["Request"], env["cand"]
    want = ref.expected_trace(W.keys_of(specs), ops)
    if reqs is None:
        reqs = W.build_requests(Request, specs)
    before = _state_of(reqs)
    try:
        raw = W.run_stream(cls, reqs, ops)
        got = W.canonical(raw, reqs, Request)
        detail = W.first_mismatch(got, want, ops, specs)
    except BaseException as exc:  # noqa: BLE001
        detail = "crashed: " + traceback.format_exception_only(type(exc), exc)[-1].strip()[:200]
    if detail is None and _state_of(reqs) != before:
        detail = "the queue modified the Request objects it was given (fields or attributes)"
    return {"name": name, "kind": kind, "passed": detail is None, "detail": detail,
            "ops": len(ops)}


def _check_multi(env, name, specs, tagged, n_queues) -> dict:
    Request, cls = env["Request"], env["cand"]
    want = ref.expected_trace_multi(W.keys_of(specs), tagged, n_queues)
    reqs = W.build_requests(Request, specs)
    before = _state_of(reqs)
    try:
        raw = W.run_multi(cls, reqs, tagged, n_queues)
        got = W.canonical(raw, reqs, Request)
        detail = W.first_mismatch(got, want, tagged, specs, tagged=True)
    except BaseException as exc:  # noqa: BLE001
        detail = "crashed: " + traceback.format_exception_only(type(exc), exc)[-1].strip()[:200]
    if detail is None and _state_of(reqs) != before:
        detail = "the queue modified the Request objects it was given"
    return {"name": name, "kind": "correctness", "passed": detail is None,
            "detail": detail, "ops": len(tagged)}


def run_probes(env, probes: dict) -> list:
    out = []
    Request = env["Request"]
    if "same_shape" in probes:
        spec = probes["same_shape"]
        specs_a, ops = W.generate(spec)
        # same op skeleton, other keys: a cache keyed on shape/op sequence fails
        keys_b = W.rekey(spec, len(specs_a), int(spec["seed"]) * 31 + 5)
        specs_b = [(rid, p, a) for (rid, _, _), (p, a) in zip(specs_a, keys_b)]
        out.append(_check_single(env, "probe_same_shape_a", "correctness", specs_a, ops))
        out.append(_check_single(env, "probe_same_shape_b", "correctness", specs_b, ops))
        # the SAME Request objects, keys mutated in place between two runs
        reqs = W.build_requests(Request, specs_a)
        out.append(_check_single(env, "probe_mutated_objects_1", "correctness", specs_a, ops, reqs))
        for r, (p, a) in zip(reqs, keys_b):
            r.priority, r.arrival_time = p, a
        out.append(_check_single(env, "probe_mutated_objects_2", "correctness", specs_b, ops, reqs))
    if "multi_queue" in probes:
        spec = probes["multi_queue"]
        n_queues = int(spec.get("queues", 3))
        import random as _random
        rng = _random.Random(int(spec["seed"]))
        all_specs, streams = [], []
        for qno in range(n_queues):
            sub = dict(spec["stream"], seed=int(spec["seed"]) + 101 * (qno + 1))
            specs, ops = W.generate(sub)
            offset = len(all_specs)
            all_specs += specs
            shifted = []
            for op in ops:
                if op[0] in (ref.ADD, ref.PREPEND, ref.REMOVE):
                    shifted.append((op[0], op[1] + offset))
                elif op[0] == ref.REMOVE_MANY:
                    shifted.append((op[0], (tuple(i + offset for i in op[1][0]), op[1][1])))
                else:
                    shifted.append(op)
            streams.append(shifted)
        pos = [0] * n_queues
        tagged = []
        while True:
            alive = [q for q in range(n_queues) if pos[q] < len(streams[q])]
            if not alive:
                break
            q = alive[rng.randrange(len(alive))]
            tagged.append((q, streams[q][pos[q]]))
            pos[q] += 1
        out.append(_check_multi(env, "probe_multi_queue", all_specs, tagged, n_queues))
    return out


def correctness(env, wl: dict, res: dict) -> None:
    cases = []
    for spec in wl["cases"]:
        specs, ops = W.generate(spec)
        cases.append(_check_single(env, spec["name"], spec.get("kind", "correctness"), specs, ops))
    cases += run_probes(env, wl.get("probes", {}))
    for spec in wl["timing"]:
        specs, ops = W.generate(spec)
        cases.append(_check_single(env, "timing:" + spec["name"], "correctness", specs, ops))
    res["cases"] = cases
    bad_c = [c for c in cases if not c["passed"] and c["kind"] != "error_contract"]
    bad_e = [c for c in cases if not c["passed"] and c["kind"] == "error_contract"]
    res["gates"]["correctness_ok"] = not bad_c
    res["gates"]["error_contract_ok"] = not bad_e
    if bad_c:
        res["hard_fail_reasons"].append("correctness_failed")
    if bad_e:
        res["hard_fail_reasons"].append("error_contract_failed")
    for c in (bad_c + bad_e)[:5]:
        res["errors"].append(f"{c['name']}: {c['detail']}")


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------
def _timed(cls, Request, specs, ops):
    reqs = W.build_requests(Request, specs)
    gc.collect()
    t0 = _clock()
    raw = W.run_stream(cls, reqs, ops)
    t1 = _clock()
    return t1 - t0, raw, reqs


def timing(env, wl: dict, res: dict) -> None:
    Request, base, cand = env["Request"], env["base"], env["cand"]
    pairs = max(7, int(wl.get("pairs", 7)))
    rows = []
    for spec in wl["timing"]:
        specs, ops = W.generate(spec)
        want = ref.expected_trace(W.keys_of(specs), ops)
        # warm-up, once per side; the frozen baseline must agree with the model
        _, raw, reqs = _timed(base, Request, specs, ops)
        if W.canonical(raw, reqs, Request) != want:
            raise _GraderError(f"frozen baseline disagrees with the reference on {spec['name']}")
        _timed(cand, Request, specs, ops)
        t_base, t_cand, ratios = [], [], []
        for i in range(pairs):
            order = ("b", "c") if i % 2 == 0 else ("c", "b")
            got = {}
            for side in order:
                cls = base if side == "b" else cand
                dt, raw, reqs = _timed(cls, Request, specs, ops)
                got[side] = dt
                if side == "c" and W.canonical(raw, reqs, Request) != want:
                    raise _Mismatch(f"timing:{spec['name']}: candidate output changed between runs")
            t_base.append(got["b"])
            t_cand.append(got["c"])
            ratios.append(got["b"] / max(got["c"], 1))
        mean = statistics.fmean(ratios)
        rows.append({
            "name": spec["name"],
            "ratios": [round(r, 4) for r in ratios],
            "speedup": round(statistics.median(ratios), 4),
            "baseline_ms": round(statistics.median(t_base) / 1e6, 4),
            "candidate_ms": round(statistics.median(t_cand) / 1e6, 4),
            "cv": round(statistics.stdev(ratios) / mean, 4) if mean > 0 else None,
        })
    speed = math.exp(statistics.fmean(math.log(max(r["speedup"], 1e-9)) for r in rows))
    res["timing"] = {"pairs": pairs, "workloads": rows}
    res["speedup"] = round(speed, 4)
    res["gates"]["timing_ok"] = True


class _Mismatch(Exception):
    pass


class _GraderError(Exception):
    """The grader itself is broken (not the candidate's fault)."""


# ---------------------------------------------------------------------------
# runtime guard: the scan's counterpart while candidate code runs
# ---------------------------------------------------------------------------
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


def _under(path, roots) -> bool:
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
    The harness's own file work runs quiet (main thread, inside _write only)."""

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
_OUT = None
_RES = None  # the result being built, for the grader-error path
_STRAYS = []


def _become_subreaper():
    """Orphans of candidate processes are re-parented here, so _reap finds them all."""
    try:
        import ctypes  # the grader's own use, before the guard is armed
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - without it, _reap still finds direct descendants
        pass


def _reap() -> list:
    """Kill every process descending from this one; return 'pid:name' of the living ones."""
    me, found = os.getpid(), []
    for _ in range(50):
        parents = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
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
            found.append(f"{pid}:{parents[pid][1]}")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
    return sorted(set(found))


def _runtime_findings(res: dict) -> bool:
    """Merge the guard's hits (forbidden_runtime:<what>) into res; True if there are any."""
    if _GUARD is None:
        return False
    found = ["forbidden_runtime:" + n for n in sorted({h.split(":")[0] for h in _GUARD.hits})]
    found += ["background_process"] if _STRAYS else []
    for reason in found:
        if reason not in res["hard_fail_reasons"]:
            res["hard_fail_reasons"].append(reason)
            res["gates"]["forbidden_pattern_ok"] = False
    if _GUARD.hits:
        res["runtime_blocked"] = _GUARD.hits[:20]
    if _STRAYS:
        res["strays"] = _STRAYS[:20]
    return bool(found)


def _write(path: str, res: dict, final: bool = False) -> None:
    """The harness's own file work, quiet (no candidate finalizer runs on this thread here)."""
    if _GUARD is not None:
        _GUARD.quiet_thread = _thread.get_ident()
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if final and _GUARD is not None and _GUARD.armed:
            _STRAYS.extend(_reap())  # nothing the candidate started may outlive the result
        _runtime_findings(res)
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(res, fh, indent=1, default=str)
        os.replace(tmp, path)
    finally:
        if gc_was_on:
            gc.enable()
        if _GUARD is not None:
            _GUARD.quiet_thread = None


def _finish(path: str, res: dict) -> None:
    """The last result. The candidate's exit handlers run first, under the guard."""
    if _GUARD is not None and _GUARD.armed:
        worker = threading.Thread(target=atexit._run_exitfuncs, daemon=True)
        worker.start()
        worker.join(5.0)  # one that hangs is left behind; os._exit ends it
    res["completed"] = True
    _write(path, res, final=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", default="candidate")
    ap.add_argument("--bench-only", action="store_true",
                    help="quick dev timing: correctness of the timing workloads only")
    args = ap.parse_args()
    global _OUT, _RES
    _OUT = args.out
    wl = json.load(open(args.workloads))
    res = _RES = {"schema": "prq_harness_v1", "profile": wl.get("profile"), "mode": args.mode,
                  "phase": "static", "completed": False, "gates": {}, "hard_fail_reasons": [],
                  "errors": [], "notes": [], "cases": [], "timing": None, "speedup": None}
    _write(args.out, res)

    if not args.bench_only:
        static_gates(res)
        if res["hard_fail_reasons"]:
            res["completed"] = True
            _write(args.out, res)
            return 0

    res["phase"] = "import"
    _write(args.out, res)
    env = load_modules(res, need_baseline=True)
    if env is None or _runtime_findings(res):
        _finish(args.out, res)
        return 0

    res["phase"] = "correctness"
    _write(args.out, res)
    if args.bench_only:
        wl = dict(wl, cases=[], probes={})
    correctness(env, wl, res)
    hits = monkeypatch_check(env)
    if hits:
        res["gates"]["forbidden_pattern_ok"] = False
        res["hard_fail_reasons"] += hits
    _runtime_findings(res)
    if res["hard_fail_reasons"]:
        _finish(args.out, res)
        return 0

    res["phase"] = "timing"
    _write(args.out, res)
    try:
        timing(env, wl, res)
    except _Mismatch as exc:
        res["gates"]["correctness_ok"] = False
        res["hard_fail_reasons"].append("correctness_failed")
        res["errors"].append(str(exc))
    except _GraderError:
        raise
    except Exception as exc:  # noqa: BLE001
        res["gates"]["timing_ok"] = False
        res["hard_fail_reasons"].append("timing_failed")
        res["errors"].append("timing_failed: " + traceback.format_exception_only(type(exc), exc)[-1].strip()[:300])
    hits = monkeypatch_check(env)
    if hits:
        res["gates"]["forbidden_pattern_ok"] = False
        res["hard_fail_reasons"] += hits
    res["phase"] = "done"
    _finish(args.out, res)
    return 0


def _main_guarded() -> int:
    try:
        return main()
    except _GraderError as exc:
        out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
        if out:
            res = _RES if _RES is not None else {"hard_fail_reasons": [], "gates": {}}
            res["grader_error"] = str(exc)[:500]
            _write(out, res)
        print(f"grader error: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    try:
        _rc = _main_guarded()
    except Exception:  # noqa: BLE001 - a bug on the grader side; the traceback goes to the log
        traceback.print_exc()
        _rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_rc)  # no atexit handler, finalizer or thread of the candidate runs after the result
