"""pesflow's runtime guard, loaded into every Python process of a grading (pesflow_guard.pth).

It changes nothing the grader measures: it only watches, and reports each thing it sees the
moment it sees it, on a datagram socket whose reader is outside the sandbox (what is sent
cannot be taken back) and in a per-process file. It is active only where pesflow put its
config (/.pesflow-trust/config.json, read-only); elsewhere importing it does nothing.

This file is the part every interpreter pays for, so it is small and imports nothing new: it
reads the config and waits for the candidate's code (or the frozen baseline's) to be run, by
import, runpy, exec or as the main script. Just before that code's first line it turns the
guard proper on (pesflow_guard_active.py). Everything the guard names is done by the
candidate's code, so a process that never runs it (a grader's `python3 -c "print(...)"`
arithmetic, its launchers) has nothing to watch. Standard library only; Python 3.8+.
"""

import sys

_CONFIG = "/.pesflow-trust/config.json"
# Only where no grading's config exists (pesflow's own tests): a candidate cannot point a
# grading's processes elsewhere with it, since the grading's config always wins.
_TEST_CONFIG = "PESFLOW_TRUST_TEST_CONFIG"
# Audit events that run code from a file: the candidate's code may start through any of them.
_RUNS_CODE = frozenset({"exec", "cpython.run_file"})


def _read_config(os):
    path = _CONFIG if os.path.exists(_CONFIG) else os.environ.get(_TEST_CONFIG) or _CONFIG
    try:  # the marshal copy first: json and re are slow to import in every interpreter
        import marshal  # noqa: PLC0415 - built in: never slow to import, here beside its one use
        with open(path[:-5] + ".marshal" if path.endswith(".json") else path, "rb") as f:
            cfg = marshal.load(f)
        if isinstance(cfg, dict):
            return cfg
    except (OSError, ValueError, EOFError, TypeError):
        pass
    try:
        with open(path) as f:
            import json  # noqa: PLC0415 - slow to import in every interpreter: only where the marshal copy is missing
            cfg = json.load(f)
    except (OSError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) else None


def _roles(os, cfg):
    """(cand_paths, real_of, role) over the config's files. Called once, by _start: what it makes
    is held by the guard's closures, never looked up here again."""
    cand_paths = {p: rel for rel, p in cfg.get("candidate_paths", {}).items()}
    cand_hashes = dict(cfg.get("candidate_hashes", {}))  # sha256 -> rel
    base_hashes = dict(cfg.get("baseline_hashes", {}))  # sha256 -> rel (the frozen baseline's copies)
    cand_names = {os.path.basename(r) for r in list(cand_paths.values()) + list(cand_hashes.values())}
    role_of = {}  # filename -> "candidate" | "baseline" | None
    dir_real = {}  # folder -> its real path: one realpath a folder, not one a file

    def real_of(filename):
        """os.path.realpath(filename), with the folders' resolved once each."""
        if os.path.islink(filename):
            return os.path.realpath(filename)
        folder, name = os.path.split(filename)
        r = dir_real.get(folder)
        if r is None:
            r = dir_real[folder] = os.path.realpath(folder)
        return os.path.join(r, name) if name not in ("", ".", "..") else os.path.realpath(filename)

    def role(filename):
        """The candidate's code, the frozen baseline's, or neither: by path, else by content."""
        r = role_of.get(filename, 0)
        if r != 0:
            return r
        r = None
        # a file of another name is neither unless it is a link to one (its real name decides)
        if filename and not filename.startswith("<") and (
                os.path.basename(filename) in cand_names or os.path.islink(filename)):
            real = real_of(filename)
            if real in cand_paths:
                r = "candidate"
            elif os.path.basename(real) in cand_names:
                try:
                    # slow to import in every interpreter: only for a file named as the candidate's
                    import hashlib  # noqa: PLC0415 - slow to import
                    with open(real, "rb") as f:
                        h = hashlib.sha256(f.read()).hexdigest()
                    r = "candidate" if h in cand_hashes else ("baseline" if h in base_hashes else None)
                except OSError:
                    r = None
        role_of[filename] = r
        return r
    return cand_paths, real_of, role


def _planted_check(os, cfg, role):
    """planted (below), over the grading's start and the image's folders. Called once, by _start,
    as _roles is."""
    started = float(cfg.get("started") or 0)
    image_roots = tuple({os.path.realpath(p) + "/" for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
                        | {"/usr/lib/python3", "/tests/", "/opt/loop/", "/.pesflow-trust/"})
    # where a grading can write (its source tree, HOME with the user's site folder, the scratch
    # folders): never passed over as the image's, whatever site folder or prefix lies there
    writable = tuple(w.rstrip("/") + "/" for w in (cfg.get("source_root") or "", os.environ.get("HOME") or "",
                                                   "/tmp", "/var/tmp", "/dev/shm", "/logs") if w.strip("/"))

    def planted(name, fn, cached):
        """A module file outside the interpreter's own folders written since the grading began,
        or its bytecode cache: pesflow_guard_planted looks closer (a stat or two a module here)."""
        if not started or not isinstance(fn, str) or (
                (fn.startswith(image_roots) or "-packages/" in fn) and not fn.startswith(writable)):
            return
        try:
            if role(fn) is not None:
                return
            if os.stat(fn).st_ctime > started:
                # slow to import in every interpreter: only where the grading wrote a module
                import pesflow_guard_planted  # noqa: PLC0415 - slow to import
                pesflow_guard_planted.shadow(cfg, name, fn, role)
            elif isinstance(cached, str) and cached != fn and os.stat(cached).st_ctime > started:
                # slow to import in every interpreter: only where the grading wrote a module's cache
                import pesflow_guard_planted  # noqa: PLC0415 - slow to import
                pesflow_guard_planted.cache(cfg, name, fn, cached)
        except Exception:  # noqa: BLE001 - the guard never breaks an import
            pass
    return planted


def _start():  # one closure so that no module global can switch it off (its helpers only make its parts)
    import os  # noqa: PLC0415 - loaded by site already, never slow to import here
    cfg = _read_config(os)
    if cfg is None:
        return None
    cand_paths, real_of, role = _roles(os, cfg)
    guard = [None]  # None: waiting; False: coming on; then what pesflow_guard_active.install returned

    def turn_on():
        if guard[0] is None:
            guard[0] = False
            try:
                # slow to import in every interpreter: only where the candidate runs
                import pesflow_guard_active  # noqa: PLC0415 - slow to import
                guard[0] = pesflow_guard_active.install(
                    {"os": os, "sys": sys, "cfg": cfg, "role": role, "real_of": real_of, "cand_paths": cand_paths})
            except Exception:  # noqa: BLE001 - the guard never breaks the grader's interpreter
                guard[0] = False
        return guard[0]

    def hook(event, args):
        on = guard[0]
        if on:
            return on["hook"](event, args)
        if on is None and event in _RUNS_CODE and args:
            what = args[0]
            filename = getattr(what, "co_filename", what)
            if isinstance(filename, bytes):
                filename = filename.decode(errors="replace")
            if isinstance(filename, str) and role(filename) is not None:
                turn_on()
    sys.addaudithook(hook)

    planted = _planted_check(os, cfg, role)
    be = sys.modules.get("_frozen_importlib_external")
    if be is not None:  # the import system, wrapped once: the guard's steps around each module's code
        inner = be._LoaderBasics.exec_module
        inner_ext = be.ExtensionFileLoader.create_module

        def create_module(self, spec):  # an extension's code runs as it is created
            planted(getattr(spec, "name", None), getattr(spec, "origin", None), None)
            return inner_ext(self, spec)
        be.ExtensionFileLoader.create_module = create_module

        def exec_module(self, module):
            spec = getattr(module, "__spec__", None)
            planted(getattr(module, "__name__", None), getattr(module, "__file__", None), getattr(spec, "cached", None))
            on = guard[0]
            if on is None:
                fn = getattr(module, "__file__", None)
                if isinstance(fn, str) and role(fn) is not None:
                    on = turn_on()
            inner(self, module)
            if on:
                try:
                    on["after_exec"](module)
                except Exception:  # noqa: BLE001 - the guard never breaks an import
                    pass
        be._LoaderBasics.exec_module = exec_module
    return guard


try:
    _guard = _start()
except Exception:  # noqa: BLE001 - the guard never breaks the grader's interpreter
    _guard = None
