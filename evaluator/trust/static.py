"""The static trust screen: the candidate's Python (AST) read for the families' spellings.

`screen(files, baseline)` reports only what the candidate ADDED: a spelling the baseline had too (same family
and wording, anywhere in the scope) is the repository's. Names reached indirectly (aliases, getattr of string
pieces, __import__, importlib, sys.modules, vars()/__dict__, exec of a literal) resolve as far as folding
literals goes; what is computed at run time is the runtime guard's to see. Files that are not .py or do not
parse are noted in the checks, never a finding.
"""

from __future__ import annotations

import ast
import re

from evaluator.trust.findings import Finding
# the rules and vocabularies the guard inside the grading reads too
from evaluator.trust.inside import pesflow_rules as rules

# replacing any of these replaces the clock or the synchronization the harness measures with
TIMER, TIMER_MODULES = rules.TIMERS, rules.TIMER_MODULES  # swapped whole, or a computed name of one of the modules
# documented switches a kernel may set on its libraries (not the libraries' code)
HONEST_TARGETS = tuple("torch.backends sys.path sys.dont_write_bytecode torch._dynamo.config torch._inductor.config "
                       "torch._functorch.config".split())
GUARD = tuple("""sys.audit sys.addaudithook sys.settrace sys.setprofile sys.monitoring threading.settrace
    threading.setprofile threading.settrace_all_threads threading.setprofile_all_threads ctypes.pythonapi ctypes.PyDLL
    ctypes.pydll _ctypes _testcapi""".split())
FRAME_REFS = tuple("""sys._getframe sys._current_frames sys._getframemodulename inspect.currentframe inspect.stack
    inspect.getouterframes inspect.getinnerframes inspect.getframeinfo inspect.trace traceback.extract_stack
    traceback.walk_stack traceback.format_stack traceback.print_stack traceback.StackSummary.extract""".split())
FRAME_ATTRS = tuple("f_back f_locals f_globals f_code f_builtins tb_frame gi_frame cr_frame ag_frame".split())
GC_REFS, ARGV = ("gc.get_objects", "gc.get_referrers", "gc.get_referents"), ("sys.argv", "sys.orig_argv")
SPAWN = tuple("subprocess os.system os.popen os.posix_spawn os.posix_spawnp multiprocessing.set_executable pty.spawn"
              .split()) + tuple(f"os.{k}{s}" for k in ("exec", "spawn") for s in "l le lp lpe v ve vp vpe".split())
SETTERS = tuple("setattr builtins.setattr object.__setattr__ type.__setattr__ delattr builtins.delattr "
                "object.__delattr__ type.__delattr__".split())
ENV_READS = tuple("os.getenv os.getenvb os.environ.get os.environ.setdefault "
                  "os.environ.pop os.environ.__getitem__".split())
# every variable (the grader's too) or every module (the harness's too): (rule, what) by what is walked
WALKS = {"os.environ": ("static.environ_walked", "os.environ enumerated"),
         "sys.modules": ("static.modules_walked", "sys.modules walked")}
GRADER_ENV = re.compile(rules.GRADER_VAR_WRITTEN, re.I)
HONEST_ENV = rules.HONEST_VAR_PREFIXES
GRADER_PATHS = re.compile(rules.GRADER_PATH_WRITTEN)
CODE_ATTRS = ("__code__", "__defaults__", "__kwdefaults__")
IDENT_CALLS = ("data_ptr", "tobytes", "unsafe_ptr")  # an argument's address or bytes, as a cache key
WEAKDICTS, LOOKUPS = (("weakref.WeakKeyDictionary", "weakref.WeakValueDictionary"),
                      ("get", "setdefault", "pop", "__getitem__"))
COMPUTED, FUNCS = "<computed>", (ast.FunctionDef, ast.AsyncFunctionDef)
WATCHED = TIMER + GUARD + FRAME_REFS + GC_REFS + ARGV  # what `from gc import *` brings that matters here


def _under(q: str, names: tuple[str, ...]) -> bool:
    return any(q == n or q.startswith(n + ".") for n in names)


def _root(n: ast.AST) -> str | None:
    """The variable an expression hangs from: x for x.a().b[0]."""
    while isinstance(n, (ast.Attribute, ast.Call, ast.Subscript)):
        n = n.func if isinstance(n, ast.Call) else n.value
    return n.id if isinstance(n, ast.Name) else None


def _single(s: ast.AST) -> str | None:
    """The name a plain `name = value` binds."""
    ok = isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
    return s.targets[0].id if ok else None


def _walk_values(n: ast.AST):
    """ast.walk less comparisons, modulo/mask arithmetic (`x.data_ptr() % 16 == 0` is alignment, not identity) and
    lookups (what a cache keyed by id(x) holds is not x's identity)."""
    yield n
    inner = n
    while isinstance(inner, ast.Subscript):  # x.__array_interface__['data'][0] is x's address, not a lookup
        inner = inner.value
    lookup = (isinstance(n, ast.Subscript) and not (isinstance(inner, ast.Attribute) and "interface" in inner.attr)) \
        or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LOOKUPS)
    if (not lookup and not isinstance(n, ast.Compare)
        and not (isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mod, ast.BitAnd)))):
        for c in ast.iter_child_nodes(n):
            yield from _walk_values(c)


def _imports(n: ast.AST) -> dict[str, str]:
    if isinstance(n, ast.Import):
        return {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in n.names}
    if isinstance(n, ast.ImportFrom):
        mod = "." * (n.level or 0) + (n.module or "")  # relative: '.x', the candidate's own package
        star = ({w.rpartition(".")[2]: w for w in WATCHED if w.rpartition(".")[0] == mod}
                if "*" in [a.name for a in n.names] else {})
        return (star | {a.asname or a.name: f"{mod}.{a.name}" if n.module else mod + a.name
                        for a in n.names if a.name != "*"})
    return {}


class _Reader(ast.NodeVisitor):
    """One file's hits (rule, what, line); `what` names no location, so baselines compare."""

    def __init__(self, tree: ast.Module, own: tuple[str, ...], alias: dict[str, str] | None = None):
        self.own, self.hits, self.main_block, self.tree = own, [], 0, tree
        self.alias, self.strs = dict(alias or {}), {}
        nodes = list(ast.walk(tree))
        self.docs = {id(n.body[0].value) for n in nodes if isinstance(getattr(n, "body", None), list)
                     and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        self.own_funcs = {n.name for n in nodes if isinstance(n, FUNCS)}
        assigned: dict[str, list[ast.AST]] = {}
        for n in nodes:  # who is who, file-wide: imports, and names given one module (or one string) only
            self.alias.update(_imports(n))
            if _single(n):
                assigned.setdefault(_single(n), []).append(n.value)
        single = {id(n.targets[0]) for n in nodes if _single(n)}
        fixed = set(self.alias) | {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
                                   and id(n) not in single}  # other bindings (loops, with, del) leave a name unresolved
        fixed |= {getattr(n, "name", None) or n.arg for n in nodes if isinstance(n, (*FUNCS, ast.ClassDef, ast.arg))}
        for _ in range(2):  # chains: a = time; b = a.perf_counter
            for name, values in [(k, v) for k, v in assigned.items() if k not in fixed]:
                qs, ss = {self.q(v) for v in values}, {self.fold(v) for v in values}
                self.alias.update({name: qs.pop()} if len(qs) == 1 and None not in qs else {})
                self.strs.update({name: ss.pop()} if len(ss) == 1 and None not in ss else {})
        self.weak = {ast.unparse(t) for n in nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                     and self.q(n.value.func) in WEAKDICTS for t in n.targets}  # d = weakref.WeakKeyDictionary()

    def q(self, n: ast.AST | None, depth: int = 0) -> str | None:
        """The dotted name an expression stands for; None when unknown, computed or the file's own."""
        if n is None or depth > 30:
            return None
        if isinstance(n, ast.Name):
            return self.alias.get(n.id) or ("builtins" if n.id == "__builtins__" else None)
        if isinstance(n, ast.Attribute):
            b = self.q(n.value, depth + 1)
            return f"{b}.{n.attr}" if b else None
        if isinstance(n, ast.Subscript):
            return self._module_key(n.slice) if self.q(n.value, depth + 1) == "sys.modules" else None
        if not isinstance(n, ast.Call) or not n.args:
            return None
        f, a = self.fname(n.func), n.args
        if f in ("getattr", "builtins.getattr") and len(a) >= 2 and (b := self.q(a[0], depth + 1)):
            return f"{b}.{self.fold(a[1]) or COMPUTED}"
        if f in ("__import__", "builtins.__import__", "importlib.__import__", "importlib.import_module"):
            s = self.fold(a[0])
            whole = f == "importlib.import_module" or len(a) >= 4 or any(k.arg == "fromlist" for k in n.keywords)
            return "<sys.modules>" if s is None else s if whole else s.split(".")[0]
        return self._module_key(a[0]) if f == "sys.modules.get" else None

    def _module_key(self, key: ast.AST | None) -> str:
        if isinstance(key, ast.Name) and key.id == "__name__":
            return ".<self>"  # the candidate's own module
        return self.fold(key) or "<sys.modules>"  # a module picked at run time: the harness's, for all we know

    def fname(self, f: ast.AST) -> str:
        """A callee's dotted name; names bound nowhere spelled as written (getattr, object.__setattr__)."""
        return self.q(f) or (ast.unparse(f) if isinstance(f, (ast.Name, ast.Attribute)) else "")

    def fold(self, n: ast.AST | None, wild: bool = False, d: int = 0) -> str | None:
        """A string built of literals only ('ti'+'me', f'{"a"}', ''.join([...]), 'emit'[::-1]); with
        wild, computed parts become '*' and paths join (f'/proc/{pid}/cmdline' -> /proc/*/cmdline)."""
        r, d = None, d + 1
        if isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)):
            r = n.value if isinstance(n.value, str) else n.value.decode("latin-1")
        elif isinstance(n, ast.Name):
            r = self.strs.get(n.id)
        elif d > 20:
            pass
        elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Div)) and (wild or isinstance(n.op, ast.Add)):
            a, b = self.fold(n.left, wild, d), self.fold(n.right, wild, d)
            r = a + ("/" if isinstance(n.op, ast.Div) else "") + b if a is not None and b is not None else None
        elif isinstance(n, ast.JoinedStr):
            parts = [self.fold(v.value if isinstance(v, ast.FormattedValue) else v, wild, d) for v in n.values]
            r = None if None in parts else "".join(parts)
        elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Slice):
            s, sl = self.fold(n.value, False, d), n.slice
            try:
                ints = [None if x is None else ast.literal_eval(x) for x in (sl.lower, sl.upper, sl.step)]
                r = s[slice(*ints)] if s is not None and all(i is None or type(i) is int for i in ints) else None
            except (ValueError, TypeError, SyntaxError):
                r = None
        elif isinstance(n, ast.Call):
            r = self._fold_call(n, wild, d)
        return ("*" if wild else None) if r is None or len(r) > 4096 else r

    def _fold_call(self, n: ast.Call, wild: bool, d: int) -> str | None:
        f, args, name = n.func, n.args, self.fname(n.func)
        if (wild and (name in ("os.path.join", "posixpath.join") or name.startswith("pathlib.")
                      or name.endswith(".joinpath"))):
            return "/".join(self.fold(a, True, d) for a in ([f.value] if name.endswith(".joinpath") else []) + args)
        base = self.fold(f.value, False, d) if isinstance(f, ast.Attribute) else None
        if base is None or n.keywords:
            return None
        if f.attr == "join" and len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
            items = [self.fold(e, False, d) for e in args[0].elts]
            return None if None in items else base.join(items)
        vals = [self.fold(a, False, d) for a in args]
        return base.replace(*vals) if f.attr == "replace" and len(vals) == 2 and None not in vals else None

    # -- what a hit is
    def hit(self, rule: str, what: str, node: ast.AST) -> None:
        line = getattr(node, "lineno", 0)  # once a line and kind: '/tests/' + x and its pieces name one path
        if not any(h[0] == rule and h[2] == line and h[1].split()[0] == what.split()[0] for h in self.hits[-8:]):
            self.hits.append((rule, what, line))

    def classify(self, q: str) -> str | None:
        """The rule replacing q breaks, or None where q is the candidate's own or an honest switch."""
        base, _, last = q.rpartition(".")
        if "pesflow" in q.lower() or _under(q, GUARD):
            return "static.guard_assigned"
        if q.startswith(".") or _under(q, self.own):
            return None
        if _under(q, TIMER) or q in TIMER_MODULES or (last in (COMPUTED, "*") and base in TIMER_MODULES):
            return "static.timer_assigned"
        # any other module's attribute (builtins, __main__, numpy.allclose, torch.testing, the harness's): not the
        # candidate's
        return None if _under(q, HONEST_TARGETS) else "static.harness_assigned"

    def patched(self, q: str | None, how: str, node: ast.AST) -> None:
        if q and (fam := self.classify(q)):
            self.hit(fam, f"{q} {how}", node)

    def ref(self, q: str | None, node: ast.AST) -> None:
        """A name read: frame walks, gc walks, guard tampering, argv, the main module."""
        if q and q.rpartition(".")[0] in WALKS and q.rpartition(".")[2] in ("items", "keys", "values"):
            return self.hit(*WALKS[q.rpartition(".")[0]], node)
        rule = None if not q else "static.frame_read" if q in FRAME_REFS else "static.gc_walked" if q in GC_REFS else \
            "static.guard_hook_used" if _under(q, GUARD) and q != "sys.audit" else \
            "static.argv_read" if (q in ARGV and not self.main_block) or q.startswith("__main__.") else None
        if rule:
            self.hit(rule, f"{q} {'read' if rule == 'static.argv_read' else 'used'}", node)

    def env_read(self, key: ast.AST | None, node: ast.AST) -> None:
        name, libs = self.fold(key), {m.split(".")[0].upper() + "_" for m in self.own}  # FLA_CACHE_MODE in fla/: fla's
        if name is None or (not name.upper().startswith((*HONEST_ENV, *libs)) and GRADER_ENV.fullmatch(name)):
            self.hit("static.grader_var_read", f"os.environ[{COMPUTED if name is None else repr(name)}] read", node)

    # -- stores: x.attr = v, d[k] = v, del x.attr
    def store(self, t: ast.AST, how: str) -> None:
        if isinstance(t, (ast.Tuple, ast.List, ast.Starred)):
            for e in [t.value] if isinstance(t, ast.Starred) else t.elts:
                self.store(e, how)
        elif isinstance(t, ast.Attribute) and self.q(t.value):
            self.patched(f"{self.q(t.value)}.{t.attr}", how, t)
        elif isinstance(t, ast.Attribute) and t.attr in CODE_ATTRS and _root(t.value) not in self.own_funcs:
            self.hit("static.code_assigned", f"{t.attr} of {ast.unparse(t.value)} {how}", t)
        elif isinstance(t, ast.Subscript):
            self.dict_write(t.value, [t.slice], t, how)

    def dict_write(self, c: ast.AST, keys: list, node: ast.AST, how: str) -> None:
        """A write into a namespace: sys.modules, a module's __dict__, vars(m), __builtins__."""
        cq = self.q(c)
        if cq == "sys.modules":
            for k in keys or [None]:
                self.patched(k if isinstance(k, str) else self._module_key(k), "replaced in sys.modules", node)
            return
        base = self.q(c.value) if isinstance(c, ast.Attribute) and c.attr == "__dict__" else self.q(c.args[0]) \
            if isinstance(c, ast.Call) and self.fname(c.func) in ("vars", "builtins.vars") and c.args else \
            cq if cq == "builtins" else None
        for k in (keys or [None]) if base else []:
            self.patched(f"{base}.{k if isinstance(k, str) else self.fold(k) or COMPUTED}", f"{how} in its namespace",
                         node)

    def visit_Assign(self, n: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        value = getattr(n, "value", None)
        if isinstance(n, ast.AnnAssign) and value is None:
            return
        qv = self.q(value)
        for t in getattr(n, "targets", None) or [n.target]:
            self.store(t, "deleted" if isinstance(n, ast.Delete) else "assigned")
        self.generic_visit(n)
        if _single(n) and qv:
            self.alias[_single(n)] = qv

    def visit_Name(self, n: ast.Name) -> None:
        if isinstance(n.ctx, ast.Load):
            self.ref(self.alias.get(n.id), n)
        else:
            self.alias.pop(n.id, None)  # rebound (triton = MagicMock()): from here on not the module

    # -- scopes: a rebinding in a branch holds inside the branch, one in a def or class inside it
    def _stmts(self, stmts: list, keep: bool = False) -> None:
        saved = dict(self.alias)
        for s in stmts:
            self.visit(s)
        self.alias = {**self.alias, **saved} if keep else saved

    def generic_visit(self, node: ast.AST) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                self.visit(value)
            elif (isinstance(value, list) and value and isinstance(value[0], ast.stmt)
                  and not isinstance(node, ast.Module)):
                self._stmts(value, keep=not isinstance(node, (*FUNCS, ast.ClassDef)))  # a def's body keeps nothing
            elif isinstance(value, list):
                for item in (x for x in value if isinstance(x, ast.AST)):
                    self.visit(item)

    def visit_If(self, n: ast.If) -> None:
        t = n.test
        main = isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__" \
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in t.comparators)
        self.visit(t)
        self.main_block += main  # a script's main block: not run when the grader imports the module
        self._stmts(n.body, keep=True)
        self.main_block -= main
        self._stmts(n.orelse, keep=True)

    def visit_Import(self, n: ast.Import | ast.ImportFrom) -> None:
        self.alias.update(_imports(n))
        mods = [getattr(n, "module", None) or "", *(a.name for a in n.names)]
        for m in [m for m in mods if "pesflow" in m.lower()] + ["__main__"] * ("__main__" in mods):
            self.hit(*(("static.main_imported", "imports __main__") if m == "__main__"
                       else ("static.pesflow_imported", f"imports {m}")), n)
        for a in n.names if isinstance(n, ast.ImportFrom) and not n.level else []:
            if f"{n.module}.{a.name}" not in ARGV:  # from sys import _getframe names it here (argv: its reads count)
                self.ref(f"{n.module}.{a.name}", n)

    # -- reads
    def visit_Attribute(self, n: ast.Attribute) -> None:
        q = self.q(n) if isinstance(n.ctx, ast.Load) else None
        self.ref(q, n)
        if isinstance(n.ctx, ast.Load) and n.attr in FRAME_ATTRS:
            self.hit("static.frame_read", f".{n.attr} read", n)
        elif n.attr == "__dict__" and q and _under(q[:-9], TIMER):
            self.hit("static.timer_class_dict", f"class dict of {q[:-9]} reached", n)
        elif n.attr in ("cmdline", "parent", "parents", "environ") and "psutil" in self.alias.values() \
                and isinstance(n.value, ast.Call):
            self.hit("static.psutil_read", f"psutil .{n.attr}() read", n)
        self.generic_visit(n)

    def visit_Subscript(self, n: ast.Subscript) -> None:
        if isinstance(n.ctx, ast.Load) and self.q(n.value) == "os.environ":
            self.env_read(n.slice, n)
        self.ref(self.q(n) if isinstance(n.ctx, ast.Load) else None, n)
        self.generic_visit(n)

    def visit_Compare(self, n: ast.Compare) -> None:
        if any(isinstance(op, (ast.In, ast.NotIn)) and self.q(c) == "os.environ"
               for op, c in zip(n.ops, n.comparators)):
            self.env_read(n.left, n)
        self.generic_visit(n)

    def visit_For(self, n: ast.For | ast.comprehension) -> None:
        it = n.iter.args[0] if isinstance(n.iter, ast.Call) and self.fname(n.iter.func) in ("list", "tuple", "sorted") \
            and n.iter.args else n.iter  # for k in os.environ, for m in list(sys.modules)
        if self.q(it) in WALKS:
            self.hit(*WALKS[self.q(it)], n.iter)
        self.generic_visit(n)

    def visit_JoinedStr(self, n: ast.JoinedStr | ast.BinOp | ast.Constant) -> None:
        """A string naming the grader's files, or pesflow (its guard, its variables)."""
        path, text = self.fold(n, wild=True) or "", self.fold(n) or ""
        if id(n) not in self.docs and GRADER_PATHS.search(path):
            self.hit("static.grader_path_named", f"path {path[:80]!r} named", n)
        if id(n) not in self.docs and "pesflow" in text.lower():
            self.hit("static.pesflow_named", f"names {text[:60]!r}", n)
        self.generic_visit(n)

    def visit_Call(self, n: ast.Call) -> None:
        f, a = self.fname(n.func), n.args
        meth = n.func.attr if isinstance(n.func, ast.Attribute) else ""
        self.ref(self.q(n), n)
        if f in SETTERS or meth in ("setattr", "delattr", "__setattr__", "__delattr__"):
            self._setattr(n, f, meth)
        elif _under(f, ("unittest.mock.patch", "mock.patch")) and a:  # patch('time.time'), .object(time, 'time'), .dict
            obj = self.q(a[0]) if f.endswith(".object") and len(a) >= 2 else None
            if f.endswith(".dict"):
                self.dict_write(a[0], [], n, "patched with mock")
            else:
                self.patched(f"{obj}.{self.fold(a[1]) or COMPUTED}" if obj else self.fold(a[0]), "patched with mock", n)
        elif meth in ("update", "setdefault", "__setitem__") and self.q(n.func.value) != "os.environ":
            keys = [k.arg for k in n.keywords if k.arg] + [k for d in a[:1] for k in (
                # update({..}) / setdefault(k, v)
                d.keys if isinstance(d, ast.Dict) else [] if meth == "update" else [d])]
            self.dict_write(n.func.value, keys, n, "written")
        if f in ENV_READS:
            self.env_read(a[0] if a else None, n)
        elif _under(f, SPAWN):
            self._spawn(n, f)
        elif f in ("exec", "eval", "compile", "builtins.exec", "builtins.eval") and a and self.fold(a[0]):
            # exec of a literal text: read too, hits on the exec's line
            hits = _read(self.fold(a[0]), self.own, self.alias)
            self.hits += [(rule, f"{what} in exec'd text", n.lineno)
                          for rule, what, _ in (hits if isinstance(hits, list) else [])]
        self.generic_visit(n)

    def _setattr(self, n: ast.Call, f: str, meth: str) -> None:
        a, how = n.args, "deleted" if "del" in f + meth else "set by setattr"
        obj, name = (a[0], a[1]) if len(a) >= 2 else (None, None)
        if meth in ("__setattr__", "__delattr__") and f not in SETTERS:
            obj, name = n.func.value, a[0] if a else None  # m.__setattr__('x', v)
        elif meth == "setattr" and len(a) == 2 and "." in (self.fold(a[0]) or ""):
            return self.patched(self.fold(a[0]), how, n)  # monkeypatch.setattr('time.time', f)
        if obj is not None:  # setattr(m, 'x', v) is m.x = v
            self.store(ast.Attribute(value=obj, attr=self.fold(name) or COMPUTED, ctx=ast.Store(), lineno=n.lineno),
                       how)

    def _spawn(self, n: ast.Call, f: str) -> None:
        """A python started with -S: no site-packages, so none of the guard they bring (rules.skips_site)."""
        nodes = [s for x in n.args for s in ast.walk(x)]
        tokens = [t for s in nodes if isinstance(s, ast.Constant) and isinstance(s.value, str) for t in s.value.split()]
        flag = next((t for t in tokens if rules.skips_site(t)), None)
        if flag and (any(self.q(s) == "sys.executable" for s in nodes) or any("python" in t for t in tokens)):
            self.hit("static.python_without_site", f"{f} runs python {flag}", n)

    # -- output caches: a lookup keyed by an argument's identity whose value is handed back
    def visit_FunctionDef(self, n: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = n.args.posonlyargs + n.args.args + n.args.kwonlyargs
        params = {x.arg for x in args + [v for v in (n.args.vararg, n.args.kwarg) if v]} - {"self", "cls"}
        tensors = [x.arg for x in args if x.annotation and re.search(r"Tensor|ndarray", ast.unparse(x.annotation))]
        if tensors and any(
                self.q(d.func if isinstance(d, ast.Call) else d) in ("functools.lru_cache", "functools.cache")
                for d in n.decorator_list):  # lru_cache keys a tensor by its identity: the kept result
            self.hit("static.tensor_lru_cache", f"lru_cache on {n.name}({tensors[0]}: a tensor)", n)
        self._cached(n, params, set(tensors))
        self.generic_visit(n)

    def _ident(self, e: ast.AST, params: set[str], tainted: dict[str, str]) -> str | None:
        for s in _walk_values(e):
            fn = s.func if isinstance(s, ast.Call) else None
            arg = s.args[0] if fn is not None and s.args else None
            if isinstance(s, ast.Name) and s.id in tainted:
                return tainted[s.id]
            if (isinstance(fn, ast.Name) and fn.id == "id" and isinstance(arg, (ast.Name, ast.Attribute))
                and _root(arg) in params):
                return f"id({ast.unparse(arg)})"
            if isinstance(fn, ast.Attribute) and fn.attr in IDENT_CALLS and _root(fn.value) in params:
                return f"{_root(fn.value)}.{fn.attr}()"
            if fn is not None and self.q(fn) == "weakref.ref" and arg is not None and _root(arg) in params:
                return f"weakref.ref({_root(arg)})"
            if isinstance(s, ast.Attribute) and _root(s) in params and (
                    s.attr in ("__array_interface__", "__cuda_array_interface__")
                    or (s.attr == "data" and isinstance(s.value, ast.Attribute) and s.value.attr == "ctypes")):
                return ast.unparse(s)
        return None

    def _cached(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str], tensors: set[str]) -> None:
        body = [s for st in fn.body for s in ast.walk(st)]
        tainted: dict[str, str] = {}
        bound: dict[str, list[ast.AST]] = {}  # name -> the values given it (k = id(x); out = cache.get(k))
        for s in filter(_single, body):
            bound.setdefault(_single(s), []).append(s.value)
        for name, values in list(bound.items()) * 2:  # twice, for chains: k = id(x); key = (k, n)
            why = next(filter(None, (self._ident(v, params, tainted) for v in values)), None)
            tainted.update({name: why} if why and name not in tainted else {})
        inside = {name: {id(x) for v in values for x in ast.walk(v)} for name, values in bound.items()}
        returned = [x for r in body if isinstance(r, ast.Return) and r.value is not None for x in ast.walk(r.value)]
        ret_nodes, ret_names = {id(x) for x in returned}, {x.id for x in returned if isinstance(x, ast.Name)}
        replayed = {_root(c.func) for c in body if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and c.func.attr == "replay"}  # a CUDA graph's replay recomputes: a graph cache, not a kept output
        for s in body:
            key, container = (s.slice, s.value) if isinstance(s, ast.Subscript) and isinstance(s.ctx, ast.Load) else \
                (s.args[0], s.func.value) if isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) and s.args \
                and s.func.attr in LOOKUPS else (None, None)
            if key is None or self.q(container) in ("os.environ", "sys.modules"):
                continue
            why = self._ident(key, params, tainted)
            direct = [e.id for e in ([key] + getattr(key, "elts", [])) if isinstance(e, ast.Name) and e.id in params]
            if not why and direct and (ast.unparse(container) in self.weak or direct[0] in tensors):
                why = f"the argument {direct[0]} itself"  # a weak dict, or a tensor: both hash by identity
            # a key with the argument's in-place version counter (x._version) misses once the argument is
            # written: a staged copy of the input, not an output kept blind
            keyed = [key] + [v for nm in ast.walk(key) if isinstance(nm, ast.Name) for v in bound.get(nm.id, [])]
            if (not why or any(isinstance(x, ast.Attribute) and x.attr == "_version" and _root(x) in params
                               for e in keyed for x in ast.walk(e))
                    or any(id(s) in inside.get(nm, ()) for nm in replayed)):
                continue
            if id(s) in ret_nodes or any(id(s) in inside.get(nm, ()) for nm in ret_names):
                return self.hit("static.identity_keyed_cache", f"a cache keyed by {why} handed back by {fn.name}()", s)

    # the same readers for the other spellings
    visit_AugAssign = visit_AnnAssign = visit_Delete = visit_Assign
    visit_ImportFrom, visit_comprehension, visit_AsyncFunctionDef = visit_Import, visit_For, visit_FunctionDef
    visit_BinOp = visit_Constant = visit_JoinedStr


def _module_names(paths: list[str]) -> tuple[str, ...]:
    """The candidate's own modules, by path: a/b/c.py -> a.b.c, a/b/__init__.py -> a.b."""
    parts = [p[:-3].split("/") for p in paths if p.endswith(".py")]
    return tuple(m for m in (".".join(x[:-1] if x[-1] == "__init__" else x) for x in parts) if m)


def _read(text: str, own: tuple[str, ...], alias: dict[str, str] | None = None) -> list[tuple[str, str, int]] | str:
    """One file's hits, or why it was not read (never an exception: a screen must not fail the grading)."""
    try:
        r = _Reader(ast.parse(text), own, alias)
        r.visit(r.tree)
    except SyntaxError as e:
        return f"syntax error at line {e.lineno}" if e.lineno else "syntax error"
    except Exception as e:  # noqa: BLE001 - a bug here is a skipped file, noted, not a failed grading
        return f"not read: {type(e).__name__}"
    return r.hits


def screen(files: dict[str, str | None], baseline: dict[str, str | None]) -> tuple[list[Finding], dict]:
    """Findings (screen="static") for what the candidate's Python added over the baseline, and what was read."""
    own = _module_names(sorted(set(files) | set(baseline)))
    seen: dict[tuple[str, str], int] = {}  # (rule, what) -> how many times the baseline has it
    for path, text in sorted(baseline.items()):
        hits = _read(text, own) if text is not None and path.endswith(".py") else []
        for fam, what, _ in set(hits) if isinstance(hits, list) else ():
            seen[(fam, what)] = seen.get((fam, what), 0) + 1
    in_baseline, skipped, found, read, patterns = sum(seen.values()), [], {}, 0, 0
    for path, text in sorted(files.items()):
        hits = _read(text, own) if text is not None and path.endswith(".py") else []
        if isinstance(hits, str) or (text is not None and not path.endswith(".py")):
            skipped.append(f"{path} ({hits if isinstance(hits, str) else 'not python'})")
            continue
        read += text is not None
        for fam, what, line in sorted(set(hits), key=lambda h: (h[2], h[0], h[1])):
            patterns += 1
            if seen.get((fam, what), 0) > 0:
                seen[(fam, what)] -= 1  # the repository's own spelling, carried over
            else:
                found[(fam, what, path, line)] = None
    findings = [Finding(rule=r, evidence=f"{w} at {p}:{ln}", screen="static") for r, w, p, ln in found]
    return findings, {"files": read, "skipped": skipped, "patterns": patterns, "in_baseline": in_baseline}
