"""pesflow's warm probe: started by the grading's init just before the grader, in the same
sandbox and with the same interpreter and capabilities, it imports what the probes will need
(the installed packages the baseline's scope files import: torch takes seconds, and the probe's
own modules) while the grader runs, then waits. Once the grader and everything it started are
dead, the host says go and it runs the probes (pesflow_probe.py) as a fresh process would,
without paying for those imports after the grader. Nothing of the candidate runs here before go.
Where the imports cost less than they would slow the grader, the init starts it once the
grader's processes are dead instead: its start and imports then overlap the host's reading of
the grading (the same steps, nobody left to shield it from).

Out of the grader's reach meanwhile: it makes itself non-dumpable before the grader starts (the
init starts the grader only once it says so, so its imports before that meet nothing hostile; the
grader, without CAP_SYS_PTRACE, can then neither trace it nor read or write its memory or its
descriptors), ignores the signals a grader might send, imports only packages installed outside
the source tree (its path's writable folders left out meanwhile), and takes its go from a file
only the host can write (CONFIG_DIR is read-only in the sandbox). What it says goes to descriptor
3, a host file the chrooted grader cannot reach, closed before the candidate's code runs here:
shielded, ready, then run (or cold WHY: the host then starts the probe cold; also when its
limits, priority or CPUs were changed meanwhile). The pesflow_guard of site's .pth waits until
go, so the guard reads the probe's config, as in a cold probe. Standard library; Python 3.8+.
"""

import ctypes
import importlib
import importlib.machinery
import importlib.util
import json
import os
import signal
import site
import sys
import time
import types

CONFIG_DIR = "/.pesflow-trust"
GO = CONFIG_DIR + "/warm-go"
OVER = CONFIG_DIR + "/grader-over"  # the init's word that every process of the grading is gone
_IGNORED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPIPE", "SIGTSTP", "SIGTTIN",
            "SIGTTOU")


def _shield():
    """Non-dumpable: ptrace, /proc/PID/mem and /proc/PID/fd need CAP_SYS_PTRACE from now on."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise OSError(ctypes.get_errno(), "prctl")


def _installed(name, roots):
    """Whether the top-level module `name` would load from the image's installed packages (not
    the source tree, not a folder the grading may write): found without running anything."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None) or next(iter(getattr(spec, "submodule_search_locations", None) or []), None)
    if not origin or origin in ("built-in", "frozen"):
        return False
    real = os.path.realpath(origin)
    return ("/site-packages/" in real or "/dist-packages/" in real) and not real.startswith(roots)


def _preload(names, roots, out):
    """Imported here, on the main thread at the grader's priority (a lowered priority could not be
    raised again without CAP_SYS_NICE, and threads an import starts, a BLAS pool, would keep it),
    with the path's folders the grading could write left out meanwhile (root's write test fails
    only on a read-only mount): an optional import of a package finds nothing the grader planted."""
    kept = list(sys.path)
    sys.path[:] = [p for p in kept if p and not os.access(p, os.W_OK)]
    try:
        for name in names:
            top = name.split(".")[0]
            if top in sys.modules and name in sys.modules:
                continue
            if top not in out["checked"]:
                out["checked"][top] = _installed(top, roots)
            if not out["checked"][top]:
                continue
            t0 = time.perf_counter()
            try:
                importlib.import_module(name)
                out["loaded"].append([name, round(time.perf_counter() - t0, 4)])
            except BaseException as e:  # noqa: BLE001 - the probe imports it itself, or meets the same error
                out["failed"].append([name, type(e).__name__])
    finally:
        sys.path[:] = kept


def _conditions():
    """What a process of the same user may change on another without ptrace (prlimit, priority,
    CPU affinity): a grader that starved this one would starve the probes it runs."""
    import resource  # noqa: PLC0415 - optional: the probe runs cold where it is missing
    limits = tuple(resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_"))
    return limits, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), tuple(sorted(os.sched_getaffinity(0)))


def _same_origins(loaded, sys_path):
    """A top-level module preloaded here is the one the harness's path finds first; else the
    module the probe calls into could differ from the graded process's. The first that differs."""
    for top in sorted({n.split(".")[0] for n, _ in loaded}):
        have = getattr(getattr(sys.modules.get(top), "__spec__", None), "origin", None)
        try:
            spec = importlib.machinery.PathFinder.find_spec(top, [p for p in sys_path if isinstance(p, str)] + sys.path)
        except (ImportError, ValueError):
            spec = None
        if spec is None or os.path.realpath(spec.origin or "") != os.path.realpath(have or ""):
            return top
    return None


def _gpu_context(say):
    """The GPU's context the probes will need (and the BLAS handle a reference's matmul takes),
    made once the grader's processes are gone, while the host reads what the grading left: made
    while the grader ran, it would have taken the grader's GPU memory, or its GPU in exclusive mode."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    t0 = time.perf_counter()
    try:
        if torch.cuda.is_available():
            torch.empty(1, device="cuda")
            torch.cuda.current_blas_handle()
            torch.cuda.synchronize()
            say.write("gpu %.3f\n" % (time.perf_counter() - t0))
    except Exception as e:  # noqa: BLE001 - the probe makes it itself, or meets the same error
        say.write("gpu failed %s\n" % type(e).__name__)


def main():
    say = os.fdopen(3, "w", buffering=1)
    try:
        _shield()
    except Exception as e:  # noqa: BLE001 - not out of reach: never used
        say.write("unshielded %s\n" % type(e).__name__)
        return 1
    for s in _IGNORED:
        if hasattr(signal, s):
            signal.signal(getattr(signal, s), signal.SIG_IGN)
    try:
        cfg = json.load(open(CONFIG_DIR + "/config.json"))
    except (OSError, ValueError):
        cfg = {}
    # site as the interpreter would run it, its .pth files included, but the guard waits for go;
    # before the grader starts (the init waits for `shielded`), so no .pth meets its files
    sys.modules["pesflow_guard"] = types.ModuleType("pesflow_guard")
    site.main()
    try:
        before = _conditions()
    except (ImportError, OSError, AttributeError):
        before = None
    say.write("shielded\n")
    roots = (str(cfg.get("source_root") or "/app/repo").rstrip("/") + "/",)
    out = {"checked": {}, "loaded": [], "failed": []}
    t0 = time.perf_counter()
    _preload(list(cfg.get("warm_modules") or []), roots, out)
    # from CONFIG_DIR (first on the path), read-only
    for own in ("pesflow_probe_values", "pesflow_probe_inputs", "pesflow_probe_objects", "pesflow_same_answer"):
        try:
            importlib.import_module(own)
        except Exception:  # noqa: BLE001 - the probe imports it itself, or meets the same error
            pass
    say.write("ready %d %.3f\n" % (len(out["loaded"]), time.perf_counter() - t0))
    gpu = False
    while not os.path.exists(GO):
        if not gpu and os.path.exists(OVER):
            gpu = True
            _gpu_context(say)
        time.sleep(0.01)
    try:
        probe_cfg = json.load(open(CONFIG_DIR + "/config.json")).get("probe") or {}
    except (OSError, ValueError):
        probe_cfg = {}
    exe, records = probe_cfg.get("exe"), probe_cfg.get("records") or []
    # the same interpreter in the same folder (so the same venv): `python` and `python3` both are
    if not exe or os.path.realpath(exe) != os.path.realpath(sys.executable) or \
            os.path.dirname(os.path.abspath(exe)) != os.path.dirname(os.path.abspath(sys.executable)):
        say.write("cold the harness ran %s, this is %s\n" % (exe, sys.executable))
        return 0
    try:
        changed = before is None or _conditions() != before
    except (ImportError, OSError, AttributeError):
        changed = True
    if changed:
        say.write("cold its limits, priority or CPUs changed while the grader ran\n")
        return 0
    other = _same_origins(out["loaded"], (records[0].get("sys_path") or []) if records else [])
    if other:
        say.write("cold %s would load from elsewhere on the harness's path\n" % other)
        return 0
    for s in _IGNORED:
        if hasattr(signal, s):
            signal.signal(getattr(signal, s), signal.SIG_DFL if s != "SIGPIPE" else signal.SIG_IGN)
    os.dup2(4, 1)
    os.dup2(4, 2)
    os.close(4)
    del sys.modules["pesflow_guard"]
    import pesflow_guard  # noqa: F401, PLC0415 - optional until go: the guard, now, on the probe's config
    say.write("run\n")
    say.close()  # nothing the candidate's code runs here can write to the host's file
    sys.argv[:] = ["-c"]
    import pesflow_probe  # noqa: PLC0415 - optional until go: its clock starts at its import
    pesflow_probe.WARM = {"preloaded": out["loaded"], "failed": out["failed"],
                          "seconds": round(time.perf_counter() - t0, 3)}
    pesflow_probe.run()  # as a cold probe runs: its exit status, and out without the interpreter's teardown


if __name__ == "__main__":
    sys.exit(main())
