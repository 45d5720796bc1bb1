"""Same inputs, same answer, within one process: a timed pass that asks the candidate again on
inputs it left as they were, and gets another answer than the first time (the checked call's),
was answered otherwise because of when or how often it asked. The guard (pesflow_guard_calls.py)
notes a small sample of each sampled call's output by the inputs' fingerprint, inputs too large
to keep for the probe included (a GPU package's timed shapes), and names at exit the calls whose
answers differ; the probe (pesflow_probe.py) asks the frozen baseline twice on a kept input of
the same function, and only where the baseline answers alike (no state, no randomness in the
contract) is the difference a finding. Standard library (numpy and torch when the outputs hold
them); Python 3.8+.
"""

import copy

import pesflow_probe_values as values

_SAMPLED = 1024  # elements of an output array kept: strided across it
_PER_ENTRY = 64  # inputs noted per entry point and process


def sample(v, depth=0):
    """A small copy of the numbers an output holds, where they are (a GPU output's on its GPU, so
    no copy waits for the device inside the harness's timing): None where it holds no numbers."""
    t = type(v)
    if t in (bool, int, float):
        return v
    if t in (tuple, list) and 0 < len(v) <= 16 and depth < 3:  # a tuple of outputs: noted where one is an array
        parts = [sample(x, depth + 1) for x in v]
        return parts if any(p is not None and type(p) not in (bool, int, float) for p in parts) else None
    mod = (getattr(t, "__module__", "") or "").split(".")[0]
    try:
        if mod == "torch" and hasattr(v, "detach") and hasattr(v, "numel") and v.numel() and not v.is_sparse:
            if not (v.is_floating_point() or v.is_complex()
                    or str(v.dtype).startswith(("torch.int", "torch.uint", "torch.bool"))):
                return None
            flat = v.detach().reshape(-1)
            return flat[::max(1, flat.numel() // _SAMPLED)][:_SAMPLED].clone()
        if mod == "numpy" and hasattr(v, "dtype") and getattr(v, "size", 0) and v.dtype.kind in "biufc":
            flat = v.reshape(-1)
            return flat[::max(1, flat.size // _SAMPLED)][:_SAMPLED].copy()
    except Exception:  # noqa: BLE001 - a tensor with no storage (meta, fake): nothing to note
        return None
    return None


def tracker():
    """note(entry, call number, inputs' fingerprint, output) at each sampled call; differing() at
    exit: [(entry, first call, later call)] where the same unchanged inputs got other numbers."""
    first, latest, count = {}, {}, {}

    def note(entry, n, fingerprint, out):
        """fingerprint: called only where the output holds arrays (inside the harness's timing)."""
        try:
            s = sample(out)
            # numbers alone: a counter's or an allocator's, stateful by contract
            if s is None or type(s) in (bool, int, float):
                return
            key = (entry, fingerprint())
        except Exception:  # noqa: BLE001 - never the harness's failure
            return
        if key in first:
            latest[key] = (n, s)
        elif count.get(entry, 0) < _PER_ENTRY:
            count[entry] = count.get(entry, 0) + 1
            first[key] = (n, s)

    def differing():
        out = []
        for key, (n2, s2) in latest.items():
            n1, s1 = first[key]
            try:
                if not values.close(values.plain(s1), values.plain(s2), loose=True):
                    out.append((key[0], n1, n2))
            except Exception:  # noqa: BLE001 - a device gone at exit: no conclusion
                continue
        return out

    return note, differing


def baseline_alike(call, args, kwargs):
    """Does the baseline answer the same inputs alike twice (fresh copies each time)? None where it
    cannot be asked."""
    try:
        a = values.plain(call(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
        b = values.plain(call(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
        values.sync()
        return bool(values.close(a, b, loose=True))
    except Exception:  # noqa: BLE001 - a stub baseline, or inputs it cannot take: no conclusion
        return None


def judged(varied, replayable, baseline_of):
    """[(rule, evidence)]: each call the guard saw answered otherwise on the same unchanged inputs
    (varied), where the baseline answers a kept input of the same function alike twice."""
    out = []
    for v in varied:
        for rec, key, _fn, args, kwargs in replayable:
            if rec.get("fn") != v.get("fn") or rec.get("file") != v.get("file"):
                continue
            base = baseline_of(rec, key)
            if base is not None and baseline_alike(base, args, kwargs):
                out.append(("probe.same_inputs_answered_otherwise",
                            "%s: calls %s and %s of the process `%s` asked it the same inputs, "
                            "unchanged, and got other answers "
                            "(the baseline answers an input alike each time)" % (
                                v.get("fn"), v.get("n"), v.get("later"),
                                " ".join(map(str, (v.get("argv") or [])[:3])))))
            break
    return out
