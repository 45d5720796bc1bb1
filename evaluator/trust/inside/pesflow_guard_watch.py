"""The runtime guard's watch over what a candidate may not touch (pesflow_guard.py loads it):
watched modules and classes (clocks, builtins, the harness's own modules), sys.argv and the
grader's variables. Standard library only; Python 3.8+."""

import pesflow_rules as _rules  # the clocks' names, written once for the static read and the guard

_TIMER_NAMES = _rules.TIMER_ATTRS
_TIMER_MODULES = _rules.TIMER_MODULES
_WATCHED_MODULES = ("time", "timeit", "builtins", "torch", "torch.cuda", "triton", "triton.testing", "numpy",
                    "numpy.testing", "torch.testing", "gc", "inspect", "os", "sys")
EXPORTS = ("defined_by_candidate", "harness_module", "rule_for", "note_write", "Watched", "watch", "sweep", "cand_seen",
           "check_first_sight",
           "reads_argv", "Argv", "OrigArgv", "grader_var", "env_class", "TIMER_NAMES")
TIMER_NAMES = _TIMER_NAMES


def install(g):
    os, sys, types = g["os"], g["sys"], g["types"]
    local, role, culprit, finding, real_of = g["local"], g["role"], g["culprit"], g["finding"], g["real_of"]
    system_roots, mode_vars, mode_re = g["system_roots"], g["mode_vars"], g["mode_re"]
    # ------------------------------------------------------------ what the candidate may not touch
    def defined_by_candidate(value):
        code = getattr(value, "__code__", None) or getattr(getattr(value, "__func__", None), "__code__", None)
        if code is not None and role(code.co_filename) == "candidate":
            return True
        wrapped = getattr(value, "__wrapped__", None) or getattr(value, "func", None)
        if wrapped is not None and wrapped is not value and getattr(wrapped, "__code__", None) is not None:
            if role(wrapped.__code__.co_filename) == "candidate" and code is None:
                return True
        cls = value if isinstance(value, type) else type(value)
        mod = sys.modules.get(getattr(cls, "__module__", "") or "")
        if mod is not None and role(getattr(mod, "__file__", "") or "") == "candidate":
            return True
        for attr in list(getattr(cls, "__dict__", {}).values())[:32]:  # a module loaded without sys.modules
            c = getattr(attr, "__code__", None)
            if c is not None:
                return role(c.co_filename) == "candidate"
        return False

    def harness_module(mod):
        """The grader's own code: not the candidate's, the baseline's, the standard library or
        an installed package."""
        name = getattr(mod, "__name__", "")
        if name == "__main__":
            fn = getattr(mod, "__file__", None)
            return fn is None or role(fn) is None
        fn = getattr(mod, "__file__", None)
        if not fn or role(fn) is not None or name.startswith("pesflow_"):
            return False
        real = real_of(fn)
        # code written during the grading (a JIT's or the candidate's generated module) is not the grader's
        return not (real.startswith(system_roots) or "/site-packages/" in real or "/dist-packages/" in real
                    or (planted(fn) and not real.startswith(("/tests/", "/opt/loop/"))))

    source_root = (g["cfg"].get("source_root") or "/app/repo").rstrip("/") + "/"

    def grader_module(mod):
        """The grader's code proper (its scripts and harness), not the repository's own modules
        the candidate's code builds on: reading those is honest."""
        if not harness_module(mod):
            return False
        fn = getattr(mod, "__file__", None)
        return not (fn and real_of(fn).startswith(source_root))

    def rule_for(modname, attr):
        if attr in _TIMER_NAMES or modname in ("time", "timeit") or modname.startswith(_TIMER_MODULES[2:]):
            return "guard.timer_replaced"
        return "guard.harness_patched"

    def note_write(mod, name, value, deleted=False):
        if getattr(local, "busy", False):
            return
        if (isinstance(value, types.ModuleType)
            and getattr(value, "__name__", "") == "%s.%s" % (getattr(mod, "__name__", ""), name)):
            return  # the import system binding a submodule to its package
        local.busy = True
        try:
            f = culprit(3)
            if f is not None:
                modname = getattr(mod, "__name__", "?")
                if modname.startswith("pesflow_"):
                    finding("guard.guard_replaced", "%s.%s %s" % (modname, name, "deleted" if deleted else "replaced"),
                            f)
                    return
                if modname in _WATCHED_MODULES and not (name in _TIMER_NAMES
                                                        or modname in ("time", "timeit", "builtins")
                                                         or modname.endswith("testing")):
                    return  # e.g. torch.backends flags: honest settings, not the harness's tools
                finding(rule_for(modname, name), "%s.%s %s" % (modname, name, "deleted" if deleted else "replaced"), f)
        finally:
            local.busy = False

    class Watched(types.ModuleType):
        def __setattr__(self, name, value):
            note_write(self, name, value)
            types.ModuleType.__setattr__(self, name, value)

        def __delattr__(self, name):
            note_write(self, name, None, deleted=True)
            types.ModuleType.__delattr__(self, name)

    class Harness(Watched):
        """The grader's own module: the candidate reading its state (which pass runs, what it
        expects) is sniffing the grader, whatever it then does with it."""

        def __getattribute__(self, name):
            if not getattr(local, "busy", False):
                local.busy = True
                try:
                    f = culprit(2)
                    if f is not None:
                        finding("guard.grader_read",
                                "read the harness's %s.%s" % (types.ModuleType.__getattribute__(self, "__name__"),
                                                              name), f)
                finally:
                    local.busy = False
            return types.ModuleType.__getattribute__(self, name)

    prints = {}  # (module name, attr) -> id of the value seen
    watched_ids = set()

    def watch(mod, attrs=None):
        if id(mod) in watched_ids:
            return
        watched_ids.add(id(mod))
        if type(mod) is types.ModuleType:
            try:
                mod.__class__ = Harness if grader_module(mod) else Watched
            except TypeError:
                pass
        name = getattr(mod, "__name__", "?")
        d = getattr(mod, "__dict__", {})
        for k in (attrs if attrs is not None else list(d)):
            v = d.get(k)
            if v is not None and (attrs is not None or callable(v)):
                prints[(name, k)] = id(v)

    def sweep():
        """Watched attributes that changed behind __setattr__'s back (vars(m)[k] = v)."""
        if getattr(local, "busy", False):
            return
        local.busy = True
        try:
            for modname in ("time", "timeit", "torch.cuda", "triton.testing", "builtins"):
                mod = sys.modules.get(modname)
                if mod is not None and id(mod) not in watched_ids:
                    attrs = [k for k in vars(mod) if k in _TIMER_NAMES] if modname != "builtins" else list(vars(mod))
                    check_first_sight(mod, attrs)
                    watch(mod, attrs if modname != "builtins" else None)
            main = sys.modules.get("__main__")
            if main is not None and harness_module(main):
                watch(main)
            for (modname, k), seen in list(prints.items()):
                mod = sys.modules.get(modname)
                v = getattr(mod, "__dict__", {}).get(k) if mod is not None else None
                if v is not None and id(v) != seen:
                    prints[(modname, k)] = id(v)
                    if defined_by_candidate(v) or (modname in ("time", "timeit") and cand_seen[0]) or (
                            modname != "builtins" and planted(origin(v))):  # a clock's code the grading wrote
                        finding(rule_for(modname, k),
                                "%s.%s replaced (now %s)" % (modname, k, getattr(v, "__qualname__", type(v).__name__)))
        finally:
            local.busy = False

    cand_seen = [False]

    # ------------------------------------------------------------ replaced before the guard came on
    started = float(g["cfg"].get("started") or 0)  # when the grading began (host clock: one kernel)

    def origin(value):
        """The file of the Python code behind `value` (a function, method, wrapper, class or
        instance); None for C code."""
        for obj in (value, getattr(value, "__func__", None), getattr(value, "__wrapped__", None),
                    getattr(value, "func", None)):
            code = getattr(obj, "__code__", None)
            if code is not None:
                return code.co_filename
        cls = value if isinstance(value, type) else type(value)
        mod = sys.modules.get(getattr(cls, "__module__", "") or "")
        fn = getattr(mod, "__file__", None) if mod is not None else None
        if fn:
            return fn
        for attr in list(getattr(cls, "__dict__", {}).values())[:32]:
            code = getattr(attr, "__code__", None)
            if code is not None:
                return code.co_filename
        return None

    def planted(filename):
        """Code the grading itself wrote (a file the candidate's code put on the interpreter's
        path runs before the candidate's own, where nothing attributes it): a file written since
        the grading began, one gone since, or code from no file at all."""
        if not filename or filename.startswith("<frozen"):
            return False
        if filename.startswith("<"):
            return True
        real = real_of(filename)
        if real.startswith(system_roots) or "/site-packages/" in real or "/dist-packages/" in real:
            return False  # the interpreter's own and installed packages: the image's, whatever their times say
        if real.startswith(("/tests/", "/opt/loop/")):
            return False  # the graders' own, mounted or copied in for the grading
        try:
            return bool(started) and os.stat(real).st_ctime > started
        except OSError:
            return True

    def check_first_sight(mod, attrs):
        """Clocks and builtins as the guard first sees them in this process: one whose code was
        planted by the grading was replaced before the candidate's first line ran (a
        sitecustomize or a shadowing module the candidate wrote for the interpreters after it)."""
        name = getattr(mod, "__name__", "?")
        d = getattr(mod, "__dict__", {})
        for k in attrs:
            v = d.get(k)
            if v is None or isinstance(v, types.ModuleType):  # timeit.time: the module, not a clock
                continue
            if getattr(v, "__self__", None) is mod and getattr(v, "__name__", None) == k or (
                    isinstance(v, type) and v.__module__ == name == "builtins"):
                continue  # the module's own C function, or a builtin type: what it always was
            # one of the module's clocks under another's name; else code the grading wrote (a
            # harness's own stand-in clock, in its read-only files, is the harness's business)
            swapped = getattr(v, "__self__", None) is mod and name == "time"
            values = [v] + ([getattr(v, a, None) for a in _TIMER_NAMES if a in getattr(v, "__dict__", {})]
                            if isinstance(v, type) else [])
            where = next((origin(x) for x in values if x is not None and planted(origin(x))), None)
            if (swapped or where) and not defined_by_candidate(v):
                finding(rule_for(name, k) if name != "builtins" else "guard.harness_patched",
                        "%s.%s was already replaced when the candidate's code first ran (now %s from %s)"
                        % (name, k, getattr(v, "__qualname__", type(v).__name__), where or origin(v) or "C code"))

    # ------------------------------------------------------------ argv and the grader's variables
    def reads_argv(what, named=None):
        """`named`: only when the candidate's code names it (a literal of the reading frame), so
        that copying the whole environment for a compiler it starts is not a read of it."""
        if getattr(local, "busy", False):
            return
        local.busy = True
        try:
            f = culprit(3, hops=True)
            if f is not None and (named is None or named in f.f_code.co_consts):
                finding("guard.grader_read", "read " + what, f)
        finally:
            local.busy = False

    class Argv(list):
        __slots__ = ()
        _name = "sys.argv"

        def __reduce__(self):  # pickles as the plain list it stands for (multiprocessing sends argv)
            return (list, (list.__getitem__(self, slice(None)),))

    def _argv_method(name):
        base = getattr(list, name)

        def m(self, *a):
            reads_argv(self._name)
            return base(self, *a)
        m.__name__ = name
        return m

    for _m in ("__getitem__", "__iter__", "__len__", "__contains__", "index", "count", "copy", "__reversed__",
               "__eq__"):
        setattr(Argv, _m, _argv_method(_m))

    class OrigArgv(Argv):
        __slots__ = ()
        _name = "sys.orig_argv"

    def grader_var(key):
        if isinstance(key, bytes):
            key = key.decode(errors="replace")
        return isinstance(key, str) and (key in mode_vars or bool(mode_re.search(key)))

    def env_class(base):
        class Env(base):
            def __getitem__(self, key):
                if grader_var(key):
                    reads_argv("the grader's variable " + str(key), named=key)
                return base.__getitem__(self, key)

            def __contains__(self, key):
                if grader_var(key):
                    reads_argv("the grader's variable " + str(key), named=key)
                return base.__contains__(self, key)
        return Env

    found = dict(locals(), TIMER_NAMES=_TIMER_NAMES)
    return {k: found[k] for k in EXPORTS}
