"""The runtime guard proper (pesflow_guard.py turns it on): loaded only into a process that
runs the candidate's code or the frozen baseline's, just before that code's first line, so the
many small interpreters of a grader that never touch the candidate pay nothing for it.

What it watches, attributed to the candidate's code (the scope files, by path or content):
audit events (frames read, gc walked, grader files or /proc/*/cmdline opened, the guard itself
imported), writes to watched modules (clocks, builtins, the harness's own modules) and to
classes it did not define, reads of sys.argv and of the grader's mode variables; and, at the
harness's calls into the candidate's functions (1st, 2nd, 4th, 8th, ... only, so timing is
untouched), the kinds of values returned, with the inputs kept for the probes after the
grader. Standard library only; Python 3.8+.
"""

_STDLIB_HOPS = ("/inspect.py", "/traceback.py", "/os.py", "/_collections_abc.py", "/pathlib.py", "/io.py",
                "/codecs.py", "/genericpath.py", "/posixpath.py", "/functools.py", "/shutil.py")
_SPAWN_HOPS = ("/subprocess.py",)  # a process subprocess starts for the candidate: its own start


def install(s):  # noqa: C901 - one closure so that no module global can switch it off
    """`s`: the shell's os, sys, cfg, role, cand_paths. Returns the audit hook and the import
    system's after-exec step, which the shell calls from now on."""
    os, sys, cfg, role, real_of, cand_paths = s["os"], s["sys"], s["cfg"], s["role"], s["real_of"], s["cand_paths"]
    clock = __import__("time")
    perf = clock.perf_counter  # taken now: a clock the candidate replaces later never runs inside the guard
    began = perf()  # what coming on costs (the guard's own figure)
    import hashlib  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    import json  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    import re  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    import _socket as socket  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    import threading  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    import types  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    import pesflow_rules  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs

    local = threading.local()
    pid = [os.getpid()]
    seq = [0]
    out_dir = cfg.get("out_dir") or "/.pesflow-trust-out"
    mode_vars = set(cfg.get("mode_vars", ()))
    mode_re = re.compile(pesflow_rules.GRADER_VAR_READ)
    sniff_re = re.compile(pesflow_rules.GRADER_PATH_OPENED)
    record = bool(cfg.get("record", True))
    system_roots = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
                         | {"/usr/lib/python3"})
    sock = [None]
    fh = [None]
    rec_fh = [None]

    def _open_channels():
        if cfg.get("socket"):
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                s.connect(cfg["socket"])
                sock[0] = s
            except OSError:
                sock[0] = None
        try:
            os.makedirs(out_dir, exist_ok=True)
            nonce = os.urandom(4).hex()
            fh[0] = open(os.path.join(out_dir, "events-%d-%s.jsonl" % (pid[0], nonce)), "a", buffering=1)
            rec_fh[0] = open(os.path.join(out_dir, "inputs-%d-%s.bin" % (pid[0], nonce)), "ab") if record else None
        except OSError:
            fh[0] = None

    def emit(kind, **fields):
        seq[0] += 1
        fields.update(kind=kind, pid=pid[0], seq=seq[0])
        try:
            line = json.dumps(fields, default=repr)[:60000]
        except Exception:  # noqa: BLE001 - a value that cannot be shown must not break the grading
            line = json.dumps({"kind": kind, "pid": pid[0], "seq": seq[0], "unshowable": True})
        if sock[0] is not None:
            try:
                sock[0].send(line.encode())
            except OSError:
                pass
        if fh[0] is not None:
            try:
                fh[0].write(line + "\n")
            except (OSError, ValueError):
                pass

    def where(frame):
        fn = frame.f_code.co_filename
        rel = cand_paths.get(real_of(fn)) if fn else None
        return "%s:%d" % (rel or fn, frame.f_lineno)

    stdlib = os.path.dirname(os.__file__) + os.sep

    def culprit(depth, hops=False, limit=8):
        """The candidate's frame that caused this, if the nearest frame (past stdlib helpers
        when `hops`, and subprocess's when it is "spawn"; past any frame of the standard library
        when hops is "stdlib") is the
        candidate's; else None."""
        try:
            f = sys._getframe(depth)
        except ValueError:
            return None
        n = 0
        while f is not None and n < limit:
            fn = f.f_code.co_filename
            if role(fn) == "candidate":
                return f
            through = hops == "stdlib" and fn.startswith(stdlib) and "-packages" not in fn
            if not (through or (hops and fn.endswith(_STDLIB_HOPS)) or (hops == "spawn" and fn.endswith(_SPAWN_HOPS))) \
                    and not fn.startswith("<frozen"):
                return None
            f, n = f.f_back, n + 1
        return None

    sent = set()

    def finding(rule, evidence, frame=None):
        """A rule of pesflow_rules.RULES saw `evidence` (at `frame`, the candidate's)."""
        text = evidence + (" by " + where(frame) if frame is not None else "")
        if (rule, text) not in sent and len(sent) < 500:  # each once: a read in a loop is one finding
            sent.add((rule, text))
            emit("finding", rule=rule, family=pesflow_rules.family(rule), evidence=text)

    g = dict(os=os, sys=sys, types=types, threading=threading, hashlib=hashlib, local=local, role=role, real_of=real_of,
             perf=perf, culprit=culprit, finding=finding, emit=emit, system_roots=system_roots, mode_vars=mode_vars,
             mode_re=mode_re, cfg=cfg, record=record, rec_fh=rec_fh, pid=pid)
    import pesflow_guard_watch  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    g.update(pesflow_guard_watch.install(g))
    import pesflow_guard_calls  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    g.update(pesflow_guard_calls.install(g))
    defined_by_candidate, harness_module, rule_for = g["defined_by_candidate"], g["harness_module"], g["rule_for"]
    watch, Argv, OrigArgv, env_class, _TIMER_NAMES = (g["watch"], g["Argv"], g["OrigArgv"], g["env_class"],
                                                      g["TIMER_NAMES"])
    at_exit, records, kind, after_exec = g["at_exit"], g["records"], g["kind"], g["after_exec"]

    # ------------------------------------------------------------ audit events
    interesting = frozenset({"open", "sys._getframe", "sys._current_frames", "sys._getframemodulename",
                             "gc.get_objects", "gc.get_referrers", "gc.get_referents", "object.__setattr__",
                             "object.__delattr__", "import", "os.exec", "os.posix_spawn", "subprocess.Popen",
                             "os.spawn", "os.rename", "os.link", "os.symlink", "os.mkdir", "os.chmod", "os.utime",
                             "os.chown"})

    # only where the candidate runs:
    from pesflow_guard_startup import startup_file  # noqa: PLC0415 - slow to import in every interpreter

    started = float(cfg.get("started") or 0)

    def image_module(path):
        """A Python file that was there before the grading began, not the candidate's: a harness's
        or the repository's module, which the guard watches because its change time is old."""
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path.endswith(".py") or role(path) is not None:
            return False
        try:
            return bool(started) and os.stat(path).st_ctime <= started
        except OSError:
            return False

    def blame(rule, evidence, hops=False, limit=8):
        """The finding, at the frame that raised this event if that frame is the candidate's
        (called from hook: the event's frame is 4 up, past hook and the shell's hook)."""
        local.busy = True
        try:
            f = culprit(4, hops=hops, limit=limit)
            if f is not None:
                finding(rule, evidence, f)
        finally:
            local.busy = False

    def hook(event, args):  # called by the shell's hook: one frame deeper than the event
        if event not in interesting or getattr(local, "busy", False):
            return
        if event == "open":
            path = args[0]
            mode, flags = (args[1], args[2]) if len(args) > 2 else (None, 0)
            text_mode, int_flags = isinstance(mode, str), mode is None and isinstance(flags, int)
            writing = ((text_mode and ("w" in mode or "a" in mode or "+" in mode))
                       or (int_flags and flags & (os.O_WRONLY | os.O_RDWR)))
            if (writing or (text_mode and "x" in mode) or (int_flags and flags & os.O_CREAT)) and startup_file(path):
                blame("guard.startup_file_written", "wrote %s, a file interpreters run at start" % os.fsdecode(path),
                      hops=True, limit=12)
                return
            if writing and image_module(path):
                blame("guard.image_module_rewritten",
                      "rewrote %s, a module the grading did not write" % os.fsdecode(path), hops=True, limit=12)
                return
            if isinstance(path, bytes):
                path = path.decode(errors="replace")
            if (isinstance(path, str)
                and (path.startswith(("/proc/", "/tests", "/logs/verifier", "/opt/loop", "/.pesflow-trust"))
                     or not path.startswith("/"))):
                try:
                    full = os.path.normpath(os.path.join(os.getcwd(), path)) if not path.startswith("/") else path
                except OSError:
                    return
                if sniff_re.search(full):
                    blame("guard.guard_file_opened" if full.startswith("/.pesflow-trust")
                              else "guard.grader_file_opened", "opened " + full, hops=True)
            return
        if event in ("sys._getframe", "sys._current_frames", "sys._getframemodulename"):
            local.busy = True
            try:
                f = culprit(3, hops=True)
                if f is not None:
                    got = args[0] if args and hasattr(args[0], "f_code") else None
                    own = got is not None and role(got.f_code.co_filename) == "candidate"
                    via = sys._getframe(2).f_code.co_filename.endswith(_STDLIB_HOPS)
                    if event != "sys._getframe" or not own or via:
                        finding("guard.frame_read", event, f)
            finally:
                local.busy = False
            return
        if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            # past the standard library: a walk made through functools, a collector callback's caller
            blame("guard.gc_walked", event, hops="stdlib", limit=16)
            return
        if event in ("object.__setattr__", "object.__delattr__"):
            obj, name = args[0], args[1]
            local.busy = True
            try:
                f = culprit(3)
                if f is None:
                    return
                if isinstance(obj, type):
                    if defined_by_candidate(obj):
                        return
                    modname = getattr(obj, "__module__", "") or ""
                    if modname.startswith("pesflow_"):
                        finding("guard.guard_replaced", "%s.%s.%s replaced" % (modname, obj.__qualname__, name), f)
                        return
                    mod = sys.modules.get(modname)
                    timer = (name in _TIMER_NAMES
                             and (modname.startswith(("torch", "triton", "time")) or "Event" in obj.__name__))
                    if (timer or modname == "builtins" or (mod is not None and harness_module(mod))
                        or modname.endswith("testing")):
                        finding("guard.timer_replaced" if timer else "guard.harness_patched",
                                "%s.%s.%s %s" % (modname, obj.__qualname__, name,
                                                 "replaced" if event.endswith("setattr__") else "deleted"), f)
                elif name == "__code__" and not defined_by_candidate(obj):
                    finding(rule_for(getattr(obj, "__module__", "") or "", getattr(obj, "__name__", "")),
                            "%s.%s.__code__ replaced" % (getattr(obj, "__module__", "?"),
                                                         getattr(obj, "__qualname__", "?")), f)
            finally:
                local.busy = False
            return
        if event in ("os.chmod", "os.utime", "os.chown"):
            # its change time made new, a module would read as one the grading wrote: unwatched
            if args and isinstance(args[0], (str, bytes)) and image_module(args[0]):
                blame("guard.image_module_moved", "changed the inode of %s, a module the grading did not write (%s)"
                      % (os.fsdecode(args[0]), event), hops=True, limit=12)
            return
        if event in ("os.rename", "os.link", "os.symlink", "os.mkdir"):  # a file put in place, a package made
            dst = args[0] if event == "os.mkdir" else (args[1] if len(args) > 1 else None)
            if isinstance(dst, (str, bytes)) and startup_file(dst):
                blame("guard.startup_file_written", "wrote %s, a file interpreters run at start" % os.fsdecode(dst),
                      hops=True, limit=12)
            return
        if event == "import" and args and str(args[0]).startswith("pesflow_"):
            blame("guard.pesflow_imported", "imported " + args[0], hops=True, limit=12)
            return
        if event in ("os.exec", "os.posix_spawn", "subprocess.Popen", "os.spawn"):
            argv = args[1] if len(args) > 1 else ()
            try:
                words = [str(a) for a in (argv if isinstance(argv, (list, tuple)) else [argv])]
            except Exception:  # noqa: BLE001
                return
            if any(pesflow_rules.skips_site(w) for w in words[1:3]):
                blame("guard.python_without_site", "started %s without site hooks" % " ".join(words[:3]), hops="spawn",
                      limit=12)

    def after_fork():
        pid[0] = os.getpid()
        del records[:]
        _open_channels()
        emit("start", ppid=os.getppid(), forked=True)

    _open_channels()
    # the process as the harness made it, before the candidate's first line: what the probes
    # take (an exit handler of the candidate's could change argv, the path or the folder by then)
    emit("start", ppid=os.getppid(), exe=sys.executable, argv=list(sys.argv), cwd=os.getcwd(),
         version=sys.version.split()[0], sys_path=[p for p in sys.path if isinstance(p, str)])
    if isinstance(sys.argv, list):
        sys.argv = Argv(sys.argv)
    if isinstance(getattr(sys, "orig_argv", None), list):
        sys.orig_argv = OrigArgv(sys.orig_argv)
    for env in (os.environ, getattr(os, "environb", None)):
        if env is not None:
            try:
                env.__class__ = env_class(type(env))
            except TypeError:
                pass
    import atexit  # noqa: PLC0415 - slow to import in every interpreter: only where the candidate runs
    atexit.register(at_exit)
    real_exit = os._exit

    def _exit(code):  # harnesses that end with os._exit (no atexit) still hand over what was kept
        try:
            at_exit()
        except Exception:  # noqa: BLE001
            pass
        real_exit(code)
    os._exit = _exit
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=after_fork)
    for mod in list(sys.modules.values()):
        try:
            if mod is not None and harness_module(mod):
                watch(mod)
        except Exception:  # noqa: BLE001 - a module that cannot be looked at is not the harness's
            pass
    check_first_sight = g["check_first_sight"]
    for mod, attrs in ((sys.modules["builtins"], None), (clock, [k for k in vars(clock) if k in _TIMER_NAMES])):
        check_first_sight(mod, attrs if attrs is not None else list(vars(mod)))
        watch(mod, attrs)
    for name in ("pesflow_guard", __name__, "pesflow_guard_watch", "pesflow_guard_calls", "pesflow_guard_objects",
                 "pesflow_guard_seen", "pesflow_rules", "pesflow_probe", "pesflow_probe_objects",
                 "pesflow_probe_inputs", "pesflow_probe_values", "pesflow_probe_pace", "pesflow_same_answer"):
        me = sys.modules.get(name)
        if me is not None:
            watch(me)  # a write to the guard's own modules is named too
    emit("on", seconds=round(perf() - began, 6))
    return {"hook": hook, "after_exec": after_exec, "kind": kind, "role": role, "emit": emit}
