"""The runtime guard's view of the harness's calls into the candidate (pesflow_guard.py loads
it): at the first two calls of each of the candidate's functions and at one call drawn at random
in each doubling after them (4-7, 8-15, ...: as few as the powers of two, which a candidate that
counts its calls could have told apart), the kinds of the values returned and the inputs, kept
for the probes after the grader and written out at exit, with the output the harness got from
it (pesflow_guard_seen.py). Standard library only; Python 3.8+."""

import types

_SAMPLE_LIMIT = 1 << 16  # sampled calls: the first two, then one drawn in each doubling up to 65536
_SIZE_SAMPLE = 32  # a container's items an input's size is estimated from (rough_size)
_KEEP = 3  # records kept per entry point and process: the latest (a checking pass then a timed one keeps the timed)
_PLAIN_BASES = (tuple, list, dict)
# how a value is read: a class that defines one of these can make its values when looked at
_READ_HOOKS = ("__len__", "__iter__", "__getitem__", "__eq__", "__bool__", "__array__", "__array_function__",
               "__array_ufunc__", "__array_interface__", "__torch_function__", "tolist", "copy", "__getattribute__",
               "__getattr__")
EXPORTS = ("records", "kind", "wrapper", "entry_module_class", "after_exec", "at_exit")


def code_behind(v):
    """The plain function that runs when `v` is called, where `v` is a callable the harness can
    only call, taken as an entry point: a bound method, a functools.partial (of either), an
    instance of a class whose __call__ is a plain function (the harness gets a StandIn for it). A
    class is watched through its instances (instrument_class)."""
    for _ in range(4):  # a partial of a bound method of ...: a few hops, never a loop
        t = type(v)
        if t is types.FunctionType:
            return v
        if t is types.MethodType:
            v = v.__func__
        elif getattr(t, "__module__", "") == "functools" and t.__name__ == "partial":
            v = v.func
        elif callable_instance(v):
            return t.__call__
        else:
            return None
    return None


class StandIn:
    """What the harness gets for a callable instance of the candidate's: a call goes through the
    guard's wrapper (`call`), every other attribute to the instance, read and written, and
    isinstance sees the instance's own class."""

    __slots__ = ("_pesflow_target", "_pesflow_call", "__wrapped__")

    def __init__(self, target, call):
        object.__setattr__(self, "_pesflow_target", target)
        object.__setattr__(self, "_pesflow_call", call)
        object.__setattr__(self, "__wrapped__", target)

    def __call__(self, *a, **k):
        return object.__getattribute__(self, "_pesflow_call")(*a, **k)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_pesflow_target"), name)

    def __setattr__(self, name, value):
        setattr(object.__getattribute__(self, "_pesflow_target"), name, value)

    @property
    def __class__(self):
        return type(object.__getattribute__(self, "_pesflow_target"))


def stand_in(v, call):
    """`call` (the guard's wrapper of `v`), as the harness is given it: a StandIn where `v` is a
    callable instance, whose other attributes a bare wrapper would hide."""
    return StandIn(v, call) if callable_instance(v) else call


def callable_instance(v):
    """Whether `v` is an instance (not a class) of a class whose __call__ is a plain function."""
    return not isinstance(v, type) and type(getattr(type(v), "__call__", None)) is types.FunctionType



class KeptCalls:
    """The sampled calls kept for the probes, _KEEP an entry point, none too large to keep: their
    inputs, what the harness got. An entry point seen to change its inputs (its first kept
    call's fingerprint before and after) has the inputs of its later kept calls copied before
    the call, as it was asked them: the harness's objects are pickled at exit however it left
    them. Each record: [role, module file, module name, function, call number, args, kwargs,
    output as got, inputs' fingerprint, the harness's own args (held: their id is the key)];
    install's records list, which a timed pass's last calls join at exit, is the one given."""

    def __init__(self, records, limit, emit, rough_size, seen, local):
        self.records, self.limit, self.emit, self.rough_size, self.seen = records, limit, emit, rough_size, seen
        self.local = local  # the guard's own work marks this thread busy: a copy can run the candidate's code
        self.kept = {}
        self.ids = set()
        self.too_large = set()  # entry points that had an input too large to keep (never pickled, never held)
        self.in_place = {}  # entry point -> whether its first kept call changed its inputs

    def asked(self, fid, name, a, k):
        """((args, kwargs) to keep, their fingerprint before the call where it is not known yet
        whether the entry point changes them), or None where the call is not kept: kept already,
        or too large, or asked inside the guard's own work. Copied before the call where it is
        known to, as the guard's own work (a __deepcopy__ of the candidate's is not a call)."""
        if id(a) in self.ids or getattr(self.local, "busy", False):
            return None
        self.local.busy = True
        try:
            return self._asked(fid, name, a, k)
        finally:
            self.local.busy = False

    def _asked(self, fid, name, a, k):
        if fid in self.too_large or self.rough_size((a, k)) > self.limit:
            if fid not in self.too_large:  # said once: a timed pass repeats its large inputs
                self.too_large.add(fid)
                self.emit("record_skipped", fn=name, why="too large")
            return None
        if fid not in self.in_place:
            return (a, k), self.seen.fingerprint((a, k))
        if not self.in_place[fid]:
            return (a, k), None
        import copy  # noqa: PLC0415 - slow to import in every interpreter (it imports weakref): once it is needed
        try:
            return copy.deepcopy((a, k)), None
        except Exception:  # noqa: BLE001 - objects that do not copy: kept as the harness leaves them
            return (a, k), None

    def keep(self, role_name, module, name, fid, i, a, k, asked_in, out, kd):
        """The call kept, in place of its entry point's oldest past _KEEP."""
        (a0, k0), before = asked_in
        if before is not None:
            self.in_place[fid] = self.seen.fingerprint((a, k)) != before
        mine = self.kept.setdefault(fid, [])
        if len(mine) >= _KEEP:
            old = mine.pop(0)
            for j, r in enumerate(self.records):  # by identity: == on kept arrays is elementwise
                if r is old:
                    del self.records[j]
                    break
            self.ids.discard(id(old[-1]))
        self.ids.add(id(a))
        # what the harness got (outputs too large to hold: none), and what it asked
        got = self.seen.snapshot(out) if kd is None and self.rough_size(out) <= self.limit else self.seen.NOT_PLAIN
        mine.append([role_name, getattr(module, "__file__", None), module.__name__, name, i, a0, k0, got,
                     self.seen.fingerprint((a0, k0)), a])
        self.records.append(mine[-1])


def install(g):
    os, sys, types, threading, hashlib, perf = g["os"], g["sys"], g["types"], g["threading"], g["hashlib"], g["perf"]
    local, role, emit, cfg, record, rec_fh, pid = (g["local"], g["role"], g["emit"], g["cfg"], g["record"], g["rec_fh"],
                                                   g["pid"])
    finding = g["finding"]
    sweep, watch, harness_module = g["sweep"], g["watch"], g["harness_module"]
    defined_by_candidate, cand_seen = g["defined_by_candidate"], g["cand_seen"]
    # ------------------------------------------------------------ the harness's calls into the candidate
    # [role, module file, module name, function, call number, args, kwargs, output as got, inputs' fingerprint]
    # (a sampled call's: KeptCalls)
    records = []
    spent = [0.0]  # the guard's own time in sampled calls (its figure, reported at exit)
    lasts = []  # ([latest unsampled call], module, entry's name, entry id) of each of the candidate's entry points

    def disguised(t):
        """A subclass of a plain kind (list, tuple, dict, array, tensor) that its module does not
        export as its own, which defines how it is read: values that may be made when looked at,
        however its class names itself (a __module__ of numpy's, code relabeled as the stdlib's)."""
        mod = sys.modules.get(getattr(t, "__module__", None) or "")
        if (mod is not None and getattr(mod, t.__qualname__, None) is t
            and role(getattr(mod, "__file__", None) or "") is None):
            return False  # the library's own class (numpy.ndarray, a torch.return_types tuple, Parameter)
        for c in t.__mro__:
            if (c in _PLAIN_BASES or c is object
                    or (getattr(c, "__module__", "") or "").split(".")[0] in ("numpy", "torch")
                    and getattr(sys.modules.get(c.__module__), c.__qualname__, None) is c):
                return False
            if any(h in c.__dict__ for h in _READ_HOOKS):
                return True
        return False

    def kind(v, depth=0):
        """Plain values (numbers, arrays, tensors, containers of them) or the name of what is not."""
        t = type(v)
        if v is None or t in (bool, int, float, complex, str, bytes):
            return None
        if t not in (tuple, list, dict) and isinstance(v, (tuple, list, dict)) and disguised(t):
            return "%s.%s" % (getattr(t, "__module__", ""), t.__qualname__)
        if t in (tuple, list) or (isinstance(v, tuple) and hasattr(v, "_fields")):
            for x in list(v)[:16] if depth < 4 else ():
                k = kind(x, depth + 1)
                if k:
                    return k
            return None
        if t is dict:
            for x in list(v.values())[:16] if depth < 4 else ():
                k = kind(x, depth + 1)
                if k:
                    return k
            return None
        mod = getattr(t, "__module__", "") or ""
        if (mod.split(".")[0] in ("numpy", "torch")
            and (mod.split(".")[0] != "torch" or "Tensor" in t.__name__ or t.__name__ in ("Size", "dtype", "device"))):
            return None if not disguised(t) else "%s.%s" % (mod, t.__qualname__)
        if (defined_by_candidate(v)
            or isinstance(v, (types.GeneratorType, types.CoroutineType, types.FunctionType, map, filter, zip))):
            return "%s.%s" % (mod, t.__qualname__)
        return None

    def rough_size(v, depth=0):
        """About the bytes a pickle of `v` takes, without pickling it: the arrays and tensors in
        it (a tensor pickles its whole storage). Pickling a large GPU input only to refuse it
        cost a grading tens of seconds at exit, and keeping it held the memory it used. A long
        container by _SIZE_SAMPLE items spread over it, scaled to its length: walking every
        item of a list of lists, inside the harness's timed calls, cost a millisecond a call
        (pickling after it still refuses what the estimate missed)."""
        t = type(v)
        if t in (bytes, str, bytearray):
            return len(v)
        if t in (tuple, list) or t is dict:
            if depth > 4 or not v:
                return 0
            items = list(v.values()) if t is dict else v
            n = len(items)
            if n <= _SIZE_SAMPLE:
                return sum(rough_size(x, depth + 1) for x in items)
            step = n / _SIZE_SAMPLE
            return sum(rough_size(items[int(j * step)], depth + 1) for j in range(_SIZE_SAMPLE)) * n // _SIZE_SAMPLE
        mod = (getattr(t, "__module__", "") or "").split(".")[0]
        try:
            if mod == "torch" and hasattr(v, "untyped_storage"):
                return int(v.untyped_storage().nbytes())
            if mod == "numpy" and hasattr(v, "nbytes"):
                return int(v.nbytes)
        except Exception:  # noqa: BLE001 - a tensor without storage (meta, fake): pickling decides
            return 0
        return 0

    import weakref  # noqa: PLC0415 - slow to import in every interpreter: only once the guard is on
    import pesflow_guard_objects  # noqa: PLC0415 - slow to import in every interpreter: only once the guard is on
    import pesflow_guard_seen as seen  # noqa: PLC0415 - slow to import in every interpreter: only once the guard is on
    calls_kept = KeptCalls(records, cfg.get("max_record_bytes", 64 << 20), emit, rough_size, seen, local)
    import pesflow_same_answer  # noqa: PLC0415 - slow to import in every interpreter: only once the guard is on
    note_answer, answers_differing = pesflow_same_answer.tracker()
    objects = pesflow_guard_objects.install({**g, "kind": kind, "weakref": weakref})
    instrument_class = objects["instrument_class"]

    def wrapper(fn, role_name, module, name=None):
        """`fn`, any callable of the candidate's the harness took from `module` as `name` (its
        attribute there: what the probe looks up again in the candidate's module and the baseline's)."""
        name = name or fn.__name__
        n = [0]
        fid = "%s:%s" % (module.__name__, name)
        last = [None]  # the latest call that was not sampled, by reference: kept at exit (a timed pass's last call)
        drawn = [2]  # the call drawn in this doubling (from this power of two to the next)
        plain_types = set()  # the types of its outputs seen plain: every call's output type is looked at (lazy ones)
        if record and role_name == "candidate":
            lasts.append((last, module, name, fid))

        def call(*a, **k):
            n[0] += 1
            i = n[0]
            if i > 2 and not i & (i - 1):  # a doubling begins: its call drawn
                drawn[0] = i + draw(fid, i) % i
            if i > 1 and i != drawn[0] or i > _SAMPLE_LIMIT:
                out = fn(*a, **k)
                if type(out) not in plain_types:
                    looked_at(i, out)
                if fid not in calls_kept.too_large:  # never held where an input was too large to keep
                    last[0] = (i, a, k, out)
                return out
            last[0] = None
            return sampled(i, a, k)

        def looked_at(i, out):
            """An output type not seen before, on a call not sampled: a lazy one is told (once a type)."""
            if getattr(local, "busy", False):
                return
            local.busy = True
            try:
                kd = kind(out)
                plain_types.add(type(out))
                if kd is not None:
                    emit("call", role=role_name, fn=fid, n=i, returned=type(out).__name__, unplain=kd, threads_left=0)
            finally:
                local.busy = False

        def sampled(i, a, k):
            t0 = perf()
            sweep()
            # the inputs as the call was asked them, where it is kept: a call that answers in place
            # changes them (the harness's objects are pickled at exit, however it left them)
            asked_in = calls_kept.asked(fid, name, a, k) if record and role_name == "candidate" else None
            before = threading.active_count()
            t1 = perf()
            out = fn(*a, **k)
            t2 = perf()
            left = threading.active_count() - before
            if getattr(local, "busy", False):
                return out
            local.busy = True
            try:
                kd = kind(out)  # pesflow decides whether it is lazy (the baseline may define the same class)
                emit("call", role=role_name, fn=fid, n=i, returned=type(out).__name__, unplain=kd, threads_left=left)
                if record and role_name == "candidate" and kd is None:
                    note_answer((fid, name, getattr(module, "__file__", None)), i, lambda: seen.fingerprint((a, k)),
                                out)
                if asked_in is not None:
                    calls_kept.keep(role_name, module, name, fid, i, a, k, asked_in, out, kd)
            finally:
                local.busy = False
            sweep()
            spent[0] += t1 - t0 + perf() - t2
            return out
        try:
            import functools  # slow to import in every interpreter: only once the guard is on
            functools.update_wrapper(call, fn)
        except Exception:  # noqa: BLE001
            pass
        return call

    salt = str(cfg.get("draws") or "").encode() or os.urandom(16)

    def draw(fid, i):
        """A number the candidate cannot know (the host's secret in the config it may not open), the
        same for the same function and doubling each grading: a count a grader makes of the
        guard's own work (traced events) stays the same from one grading to the next."""
        return int.from_bytes(hashlib.sha256(b"%s|%s|%d" % (salt, fid.encode(), i)).digest()[:4], "little")

    def entry_module_class(role_name):
        cache = {}

        class Entry(types.ModuleType):
            def __getattribute__(self, name):
                v = types.ModuleType.__getattribute__(self, name)
                if name[:1] == "_":
                    return v
                code = v if type(v) is types.FunctionType else code_behind(v)
                if code is None:
                    if (record and role_name == "candidate" and isinstance(v, type)
                            and getattr(v, "__module__", None) == self.__name__ and not getattr(local, "busy", False)
                            and role(sys._getframe(1).f_code.co_filename) is None):
                        instrument_class(v, self)  # the harness takes the candidate's class: its first instance is kept
                    return v
                w = cache.get(name)
                if w is not None and w.__wrapped__ is v:
                    return w
                if role(code.__code__.co_filename) != role_name or getattr(local, "busy", False):
                    return v
                caller = sys._getframe(1).f_code.co_filename
                if role(caller) is not None:
                    return v  # the candidate's own use of its module: never slowed
                w = cache[name] = stand_in(v, wrapper(v, role_name, self, name))
                return w

            def __setattr__(self, name, value):
                types.ModuleType.__setattr__(self, name, value)
        return Entry

    def after_exec(module):
        fn = getattr(module, "__file__", None)
        r = role(fn) if fn else None
        if r is None:
            if harness_module(module):
                watch(module)
            return
        if r == "candidate":
            cand_seen[0] = True
            emit("module", role=r, name=module.__name__, file=fn)
        if type(module) is types.ModuleType:
            try:
                module.__class__ = entry_module_class(r)
            except TypeError:
                pass
        sweep()

    exited = [False]

    def left_running():
        """Work the candidate left running as its process ends: a thread, however it was started,
        with the candidate's code on its stack; an interval timer whose signal handler is the
        candidate's. What such work does lands in whatever the harness times next (the baseline)."""
        me = threading.get_ident()
        for tid, f in list(sys._current_frames().items()):
            depth = 0
            while f is not None and depth < 64 and tid != me:
                if role(f.f_code.co_filename) == "candidate":
                    finding("guard.work_left_running",
                            "a thread running %s (%s:%d) was still alive as the process ended"
                                % (f.f_code.co_name, os.path.basename(f.f_code.co_filename), f.f_lineno))
                    break
                f, depth = f.f_back, depth + 1
        signal = sys.modules.get("signal")
        for timer, sig in (("ITIMER_REAL", "SIGALRM"), ("ITIMER_VIRTUAL", "SIGVTALRM"), ("ITIMER_PROF", "SIGPROF")):
            try:
                if signal is None or not any(signal.getitimer(getattr(signal, timer))):
                    continue
                code = getattr(signal.getsignal(getattr(signal, sig)), "__code__", None)
            except (AttributeError, OSError, ValueError):
                continue
            if code is not None and role(code.co_filename) == "candidate":
                finding("guard.work_left_running",
                        "an interval timer (%s) was still running as the process ended, its handler %s (%s:%d)"
                            % (timer, code.co_name, os.path.basename(code.co_filename), code.co_firstlineno))

    def at_exit():
        if exited[0]:
            return
        exited[0] = True
        began = perf()
        sweep()
        try:
            left_running()
        except Exception:  # noqa: BLE001 - never the end event's loss
            pass
        saved = []
        for cell, module, name, fid in lasts:  # a timed pass's last call: what the grader got from it, copied now
            if cell[0] is None:
                continue
            i, a, k, out = cell[0]
            cell[0] = None
            lim = cfg.get("max_record_bytes", 64 << 20)
            if rough_size((a, k)) <= lim:
                got = seen.snapshot(out) if kind(out) is None and rough_size(out) <= lim else seen.NOT_PLAIN
                records.append(["candidate", getattr(module, "__file__", None), module.__name__, name, i, a, k,
                                got, seen.fingerprint((a, k))])
        kept_objects = objects["object_records"]()
        if (records or kept_objects) and rec_fh[0] is not None:
            import pickle  # slow to import in every interpreter: only once the guard is on
            total = 0
            rows = [(r[:9], None) for r in records]  # a sampled call's record ends with the harness's own args
            rows += [(("candidate", getattr(m, "__file__", None), m.__name__, c.__qualname__, len(h["calls"]), h, None,
                       seen.NOT_PLAIN, None), c.__qualname__) for m, c, h in kept_objects]
            for (role_name, file, modname, fname, i, a, k, got, asked), cls in rows:
                est = rough_size((a, k) if cls is None else a)  # never pickled only to be refused
                if est > cfg.get("max_record_bytes", 64 << 20) or total + est > cfg.get("max_records_bytes", 256 << 20):
                    emit("record_skipped", fn=fname, why="too large")
                    continue
                try:
                    blob = pickle.dumps((a, k) if cls is None else a, protocol=4)
                except Exception as e:  # noqa: BLE001 - unpicklable inputs: no probe for this call
                    emit("record_skipped", fn=fname, why=type(e).__name__)
                    continue
                if (len(blob) > cfg.get("max_record_bytes", 64 << 20)
                    or total + len(blob) > cfg.get("max_records_bytes", 256 << 20)):
                    emit("record_skipped", fn=fname, why="too large")
                    continue
                try:  # the file was opened at start: a harness that blocks opens later cannot stop it
                    rec_fh[0].write(blob)
                    rec_fh[0].flush()
                except (OSError, ValueError):
                    break
                saved.append({"path": rec_fh[0].name, "offset": total, "size": len(blob),
                              "sha256": hashlib.sha256(blob).hexdigest(), "role": role_name, "file": file,
                              "module": modname, "fn": fname, "n": i, "cls": cls})
                total += len(blob)
                if got is seen.NOT_PLAIN:
                    continue
                # its inputs were refilled since: what it answered is not what is kept
                if seen.fingerprint((a, k)) != asked:
                    saved[-1]["got"] = "inputs changed after the call"
                    continue
                try:
                    out_blob = pickle.dumps(got, protocol=4)
                    if total + len(out_blob) > cfg.get("max_records_bytes", 256 << 20):
                        continue
                    rec_fh[0].write(out_blob)
                    rec_fh[0].flush()
                except Exception:  # noqa: BLE001 - an output that does not pickle: its call is probed without it
                    continue
                saved[-1]["got"] = {"offset": total, "size": len(out_blob),
                                    "sha256": hashlib.sha256(out_blob).hexdigest()}
                total += len(out_blob)
        varied = [{"fn": e[1], "file": e[2], "n": n1, "later": n2} for e, n1, n2 in answers_differing()]
        emit("end", records=saved, varied=varied, calls_seconds=round(spent[0], 6),
             exit_seconds=round(perf() - began, 6),
             argv=list.__getitem__(sys.argv, slice(None)) if isinstance(sys.argv, list) else None, cwd=os.getcwd(),
             sys_path=[p for p in sys.path if isinstance(p, str)], exe=sys.executable)

    found = locals()
    return {k: found[k] for k in EXPORTS}
