"""What the harness got from a kept call into the candidate (pesflow_guard_calls.py), for the
probes' "same answer whoever asks" check: the output copied as plain values the moment it
returned, and a fingerprint of the inputs, taken then and again at exit, so that an output is
only compared where the inputs it answered are the ones kept (a harness that refills its
input buffers for the next call changes them). Standard library only; Python 3.8+.
"""

import zlib

# How deep an output or an input is followed, and how many containers a copy holds: the probe's
# own limits (a container that holds itself is not plain either)
from pesflow_probe_values import NEST_DEPTH, NODES as _COPY_NODES

_SAMPLED = 1024  # elements of an array read for a fingerprint; a list's or dict's items at most
_NODES = 512  # values a fingerprint looks at, in all
NOT_PLAIN = object()  # an output with no plain copy (an object, a generator): not kept


def snapshot(v):
    """A copy of `v` as plain values: numbers, text, bytes, containers of them, numpy arrays and
    tensors (copied where they are: a GPU output stays on its GPU); NOT_PLAIN where it is not."""
    return _copy(v, 0, [_COPY_NODES], set())


def _copy(v, depth, left, path):
    t = type(v)
    if v is None or t in (bool, int, float, complex, str, bytes):
        return v
    left[0] -= 1
    if depth > NEST_DEPTH or left[0] < 0 or id(v) in path:
        return NOT_PLAIN
    if t in (tuple, list) or (isinstance(v, tuple) and hasattr(v, "_fields")) or t is dict:
        path.add(id(v))
        try:
            items = v.items() if t is dict else enumerate(v)
            out = {} if t is dict else []
            for k, x in items:
                c = _copy(x, depth + 1, left, path)
                if c is NOT_PLAIN:
                    return NOT_PLAIN
                if t is dict:
                    out[str(k)] = c
                else:
                    out.append(c)
            return out
        finally:
            path.discard(id(v))
    mod = (getattr(t, "__module__", "") or "").split(".")[0]
    try:
        if mod == "torch" and hasattr(v, "detach") and hasattr(v, "clone"):
            return v.detach().clone()
        if mod == "numpy" and hasattr(v, "copy") and hasattr(v, "dtype"):
            return v.copy()
    except Exception:  # noqa: BLE001 - a tensor with no storage (meta, fake)
        return NOT_PLAIN
    return NOT_PLAIN


def fingerprint(v):
    """A cheap digest of the values `v` holds now (an int): at most _NODES values looked at, lists
    and dicts sampled across their length, arrays by a sample of their elements, tensors by their
    storage and the version counter every in-place torch operation moves. Cheap because it runs
    inside the harness's calls (and a grader that counts instructions counts it)."""
    left = [_NODES]
    return hash(_parts(v, 0, left))


def _parts(v, depth, left):
    left[0] -= 1
    t = type(v)
    if v is None or t in (bool, int, float, complex, str, bytes):
        return v if t is not str or len(v) <= 256 else (len(v), hash(v))
    if depth > NEST_DEPTH or left[0] <= 0:
        return (t.__name__, id(v))
    if t in (tuple, list) or isinstance(v, tuple):
        step = max(1, len(v) // max(1, min(left[0], _SAMPLED)))
        return (t.__name__, len(v), tuple(_parts(x, depth + 1, left) for x in v[::step] if left[0] > 0))
    if t is dict:
        keys = list(v)
        step = max(1, len(keys) // max(1, min(left[0], _SAMPLED)))
        return ("dict", len(keys), tuple((str(k), _parts(v[k], depth + 1, left)) for k in keys[::step] if left[0] > 0))
    if t is bytearray:
        return ("bytearray", zlib.crc32(bytes(v)))
    mod = (getattr(t, "__module__", "") or "").split(".")[0]
    try:
        if mod == "torch" and hasattr(v, "data_ptr"):
            return ("tensor", v.data_ptr(), getattr(v, "_version", 0), tuple(v.shape), str(v.dtype))
        if mod == "numpy" and hasattr(v, "flat") and hasattr(v, "size"):
            step = max(1, int(v.size) // _SAMPLED)
            return ("ndarray", tuple(v.shape), str(v.dtype), zlib.crc32(v.flat[::step].tobytes()))
    except Exception:  # noqa: BLE001 - no fingerprint: judged by identity
        return ("unknown", id(v))
    d = getattr(v, "__dict__", None)
    if isinstance(d, dict):
        return (t.__name__, _parts(d, depth + 1, left))
    return (t.__name__, id(v))
