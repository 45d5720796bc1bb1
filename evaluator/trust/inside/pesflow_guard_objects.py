"""The runtime guard's view of a harness that drives the candidate through a class (a queue, a
store, an optimizer, a module): the first instance the harness makes in a process, its
constructor's inputs and the method calls the harness makes on it, in order, kept for the
probes (which replay them on the candidate's class and on the baseline's). pesflow_guard_calls.py
loads it. Standard library only; Python 3.8+.

Cost: the class's methods are wrapped only while that one instance is being recorded, and only
while the recording costs at most 2 % of the methods' own time (a cheap method is recorded for
its first 64 calls; a GPU kernel's for all of them, up to 20000 calls and 64 MiB of arrays held).
When the harness makes a second instance, or the budget is spent, the class gets its own methods
back, so a timed loop runs the candidate's code as written. A recording cut short for its cost
says so (`cut`): the probes then replay it scaled up, since the calls it did not keep are
the ones that grow the instance.
"""

_MAX_CALLS = 20000  # calls kept of the recorded instance: the probes replay a prefix of them
_MAX_BYTES = 64 << 20  # the arrays and tensors its calls were handed, kept alive until exit: no more
_CALL_COST_S = 2.5e-6  # what recording adds to a call (the wrapper, measured on a 2-core machine)
_COST_SHARE = 0.02  # of the methods' own time, at most
EXPORTS = ("instrument_class", "object_records")


def install(g):
    sys, types, weakref, local, role, emit = g["sys"], g["types"], g["weakref"], g["local"], g["role"], g["emit"]
    kind, perf = g["kind"], g["perf"]
    depth = [0]  # inside a recorded call: the calls it makes itself are not the harness's
    recorded = []  # one per class: [module, class, init (args, kwargs), [(method, args, kwargs), ...], flags]
    state = {}  # id(class) -> {"saved": {name: original or None}, "inst": weakref or None, "rec": entry, "done": bool}

    def _harness_call():
        # the caller's caller: the wrapper's own frame is 0, the method's caller is 2 from here
        return role(sys._getframe(2).f_code.co_filename) is None

    def held(values):
        """Bytes of the arrays and tensors among `values` (and one level into lists of them)."""
        n = 0
        for x in values:
            if isinstance(x, (list, tuple)):
                n += sum(int(getattr(y, "nbytes", 0) or 0) for y in x[:64] if not isinstance(y, (int, float, str)))
            elif not isinstance(x, (int, float, str, bytes, type(None))):
                try:
                    n += int(getattr(x, "nbytes", 0) or 0)
                except (TypeError, ValueError):
                    pass
        return n

    def restore(cls):
        st = state.get(id(cls))
        if st is None or st["done"]:
            return
        st["done"] = True
        busy = getattr(local, "busy", False)
        local.busy = True  # the guard's own writes: never findings
        try:
            for name, orig in st["saved"].items():
                if orig is None:
                    type.__delattr__(cls, name)
                else:
                    type.__setattr__(cls, name, orig)
        except Exception:  # noqa: BLE001 - a class that will not take them back keeps the wrappers
            pass
        finally:
            local.busy = busy

    def instrument_class(cls, module):
        """Wrap the methods of a class the candidate defines, once, for its first instance."""
        if id(cls) in state or getattr(local, "busy", False):
            return
        st = state[id(cls)] = {"saved": {}, "inst": None, "rec": None, "done": False}
        names = []
        for c in cls.__mro__:
            if c is object:
                continue
            for name, v in vars(c).items():
                # the candidate's own methods, known by their code's file: a harness may load the scope
                # file under a name of its own without putting it in sys.modules
                if type(v) is types.FunctionType and (name[:1] != "_" or name == "__call__") and name not in names and \
                        role(v.__code__.co_filename) == "candidate":
                    names.append(name)
        orig_init = cls.__init__
        if not names or type(orig_init) is not types.FunctionType:
            # object's or a builtin's __init__ (a tuple's, with its own __new__) cannot be wrapped
            # without changing what it accepts: such value classes are not what a harness drives
            st["done"] = True
            return

        def init(self, *a, **k):
            # the first instance the harness makes, or the next where no call reached the one before
            # (a throwaway a harness makes to look at the class: its empty history probes nothing)
            throwaway = st["inst"] is not None and not st["rec"][3]
            if type(self) is cls and (st["inst"] is None or throwaway) and not st["done"] and _harness_call():
                if throwaway:
                    recorded.remove(st["rec"])
                try:
                    st["inst"] = weakref.ref(self)
                except TypeError:
                    # no weak references: kept alive, as the harness keeps it
                    st["inst"] = (lambda o: (lambda: o))(self)
                st["rec"] = [module, cls, (a, k), [], {}]
                recorded.append(st["rec"])
            elif type(self) is cls and st["inst"] is not None:
                restore(cls)  # a second instance: the first one's history is what the probes get
            return orig_init(self, *a, **k)

        def method(name, fn):
            fid = "%s:%s.%s" % (module.__name__, cls.__qualname__, name)
            n = [0]

            def call(self, *a, **k):
                # the hot path is kept short: it runs inside the grader's timed loop while recording
                inst = st["inst"]
                if depth[0] or st["done"] or inst is None or inst() is not self:
                    return fn(self, *a, **k)  # the method's own calls of its siblings: part of the outer call
                calls = st["rec"][3]
                calls.append((name, a, k))
                depth[0] += 1
                timed = len(calls) & 63 == 1  # every 64th call's own time: what the recording costs beside it
                try:
                    if timed:
                        t0 = perf()
                        out = fn(self, *a, **k)
                        st["method_s"] = st.get("method_s", 0.0) + 64 * (perf() - t0)
                    else:
                        out = fn(self, *a, **k)
                finally:
                    depth[0] -= 1
                n[0] += 1
                i = n[0]
                if not i & (i - 1):  # sampled, as the functions' calls are: what the method hands back
                    local.busy = True
                    try:
                        emit("call", role="candidate", fn=fid, n=i, returned=type(out).__name__, unplain=kind(out),
                             threads_left=0)
                    finally:
                        local.busy = False
                if not len(calls) & 63:  # the arrays held, estimated from every 64th call
                    st["bytes"] = st.get("bytes", 0) + 64 * (held(a) + held(k.values()))
                    # inside the grader's timed loop: recording may cost at most 2 % of the methods' own time
                    # (a cheap method is recorded for its first calls only; an expensive one for all)
                    if len(calls) * _CALL_COST_S > _COST_SHARE * st.get("method_s", 0.0):
                        st["rec"][4]["cut"] = "cost"  # the probes scale the replay up instead
                        restore(cls)
                    elif len(calls) >= _MAX_CALLS or st["bytes"] > _MAX_BYTES:
                        restore(cls)
                return out
            call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
            call.__wrapped__ = fn
            return call

        local.busy = True
        try:
            st["saved"]["__init__"] = cls.__dict__.get("__init__")
            type.__setattr__(cls, "__init__", init)
            for name in names:
                st["saved"][name] = cls.__dict__.get(name)
                type.__setattr__(cls, name, method(name, getattr(cls, name)))
        except Exception:  # noqa: BLE001 - a class that refuses: no history, its methods as they were
            local.busy = False
            restore(cls)
        finally:
            local.busy = False

    def object_records():
        """[(module, class, payload)]: the payload holds the constructor's inputs and the calls,
        pickled together by the caller (one pickle keeps which call was handed which object)."""
        out = []
        for module, cls, init, calls, flags in recorded:
            if calls:
                out.append((module, cls, {"init": init, "calls": list(calls), "cut": flags.get("cut")}))
        return out

    found = locals()
    return {k: found[k] for k in EXPORTS}
