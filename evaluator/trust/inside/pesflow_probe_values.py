"""Values for pesflow's probes (pesflow_probe.py): a plain copy of what a call returned,
comparison by value whatever its kind (exactly for ints, text and other exact values, within a
tolerance for floats: arrays and tensors where they are), and new values for a call's inputs.
Standard library (numpy and torch when the values hold them); Python 3.8+.
"""

import copy
import sys

# pesflow's one tolerance for floats, |x - y| <= ATOL + RTOL * |y|, and the loose one (at most 1 %
# of the elements far off) the probes judge by; also what the mismatch lines (pesflow_mismatch.py) state
RTOL, ATOL = 1e-3, 1e-5
LOOSE_RTOL, LOOSE_ATOL = 2e-2, 1e-3


def _np():
    return sys.modules.get("numpy")


def _torch():
    return sys.modules.get("torch")


def on_gpu():
    t = _torch()
    return t is not None and getattr(t, "cuda", None) is not None and t.cuda.is_available() and t.cuda.is_initialized()


def sync(device=True):
    """Wait for the GPU: the whole device, or only the caller's stream (what a caller that
    reads the output at once is owed; work left on another stream is not waited for)."""
    if on_gpu():
        t = _torch()
        t.cuda.synchronize() if device else t.cuda.current_stream().synchronize()


# How deep an output is followed (the guard's copy, pesflow_guard_seen, reads it from here):
# deeper than any honest output seen (a package's nest past 6, where the comparison once gave up
# silently); a container that holds itself, or more than NODES containers in all (shared parts
# counted each time they are met), is not plain
NEST_DEPTH = 64
NODES = 1 << 20


def _enter(depth, left):
    left[0] -= 1
    if depth > NEST_DEPTH or left[0] < 0:
        raise TypeError(f"nested past {NEST_DEPTH} levels or {NODES} containers")


def plain(v, depth=0, left=None):
    """A deep copy of `v` as plain values (numbers, lists, numpy arrays, tensors where they are:
    a GPU output is copied and compared on its GPU, not moved to the CPU); raises on what is not."""
    np, t = _np(), _torch()
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return v
    left = [NODES] if left is None else left
    if t is not None and type(v) in (t.Tensor, t.nn.Parameter):
        return v.detach().clone()
    if t is not None and isinstance(v, t.Tensor):  # a subclass: its own conversion decides what it is
        return v.detach().to("cpu").clone().numpy() if v.dtype != t.bfloat16 else v.detach().float().cpu().numpy()
    if np is not None and isinstance(v, (np.ndarray, np.generic)):
        return np.array(v, copy=True)
    if isinstance(v, (tuple, list)):
        _enter(depth, left)
        return [plain(x, depth + 1, left) for x in v]
    if isinstance(v, dict):
        _enter(depth, left)
        return {str(k): plain(x, depth + 1, left) for k, x in v.items()}
    raise TypeError(type(v).__name__)


def close(a, b, loose=False):
    """Same values (floats within a tolerance)? Loose: at most 1 % of the elements far off."""
    np, t = _np(), _torch()
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, loose) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], loose) for k in a)
    if t is not None and (isinstance(a, t.Tensor) or isinstance(b, t.Tensor)):
        return _close_tensors(t, a, b, loose)
    if np is not None and (isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic))):
        try:
            x, y = np.asarray(a), np.asarray(b)
            if x.shape != y.shape:
                return False
            if x.dtype.kind in "fc" or y.dtype.kind in "fc":
                x, y = x.astype(np.float64), y.astype(np.float64)
                ok = np.isclose(x, y, rtol=LOOSE_RTOL if loose else RTOL, atol=LOOSE_ATOL if loose else ATOL,
                                equal_nan=True)
                return _enough(int(np.count_nonzero(ok)), ok.size, loose)
            return bool(np.array_equal(x, y)) if not loose else _enough(int(np.count_nonzero(x == y)), x.size, True)
        except (TypeError, ValueError):
            return False
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-3 * max(1.0, abs(b)) * (20 if loose else 1)
    return a == b


def _close_tensors(t, a, b, loose):
    """`close` for tensors, where they are (the same rule as for arrays: |x-y| <= atol + rtol*|y|)."""
    try:
        x = a if isinstance(a, t.Tensor) else t.as_tensor(_np().asarray(a) if _np() is not None else a)
        y = b if isinstance(b, t.Tensor) else t.as_tensor(_np().asarray(b) if _np() is not None else b)
        y = y.to(x.device) if x.is_cuda or not y.is_cuda else y
        x = x.to(y.device)
        if tuple(x.shape) != tuple(y.shape):
            return False
        if not x.numel():
            return True
        if x.is_floating_point() or y.is_floating_point() or x.is_complex() or y.is_complex():
            kind = t.complex128 if x.is_complex() or y.is_complex() else t.float64
            ok = t.isclose(x.to(kind), y.to(kind), rtol=LOOSE_RTOL if loose else RTOL,
                           atol=LOOSE_ATOL if loose else ATOL, equal_nan=True)
            return _enough(int(ok.sum().item()), x.numel(), loose)
        same = x == y
        return _enough(int(same.sum().item()), x.numel(), True) if loose else bool(same.all().item())
    except (TypeError, ValueError, RuntimeError):
        return False


def _enough(good, total, loose):
    """Every element close (at least 99 % of them, loose), by count: a mean of the matches is
    not exact (CUDA's multiplies by 1/n: 2244 of 2244 read 0.9999999999999999, an honest output
    called changed after it had returned)."""
    return good == total if not loose else 100 * good >= 99 * total


def numeric(v, depth=0, left=None):
    """Numbers and arrays only (in lists, tuples, dicts): what `close` can judge."""
    np, t = _np(), _torch()
    left = [NODES] if left is None else left
    if t is not None and isinstance(v, t.Tensor):
        return True
    if isinstance(v, (bool, int, float, complex)) or (np is not None and isinstance(v, (np.ndarray, np.generic))
                                                      and getattr(v, "dtype", None) is not None
                                                      and v.dtype.kind in "biufc"):
        return True
    if isinstance(v, (list, tuple, dict)):
        left[0] -= 1
        if depth > NEST_DEPTH or left[0] < 0:
            return False
        return bool(v) and all(numeric(x, depth + 1, left) for x in (v.values() if isinstance(v, dict) else v))
    return False


_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def _flat(v):
    """A list of plain scalars (or of tuples of them): new values of it are its items reordered."""
    return type(v) is list and len(v) > 1 and all(
        type(x) in _SCALARS or (type(x) is tuple and all(type(y) in _SCALARS for y in x)) for x in v)


def leaves(v, out=None):
    """The mutable values an input holds, in order: arrays, tensors and lists of scalars (inputs
    of every kind the harness passes, not only arrays, get new values)."""
    out = [] if out is None else out
    np, t = _np(), _torch()
    if ((np is not None and isinstance(v, np.ndarray) and v.flags.writeable)
        or (t is not None and isinstance(v, t.Tensor)) or _flat(v)):
        out.append(v)
    elif isinstance(v, (tuple, list)):
        for x in v:
            leaves(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            leaves(x, out)
    return out


def _length(leaf):
    return len(leaf) if type(leaf) is list else (leaf.shape[0] if getattr(leaf, "ndim", 0) >= 1 else 0)


def rolled(args, k=0):
    """New values of the same kinds, shapes and range: each array's elements (a list's items)
    rolled along its first axis (indices stay valid indices), by a shift that `k` varies."""
    new = copy.deepcopy(args)
    for leaf in leaves(new):
        n = _length(leaf)
        if n > 1:
            shift = (max(1, n // 3) + k) % n or 1
            t = _torch()
            if type(leaf) is list:
                leaf[:] = leaf[-shift:] + leaf[:-shift]
            elif t is not None and isinstance(leaf, t.Tensor):
                leaf.copy_(t.roll(leaf, shifts=shift, dims=0))
            else:
                _np().copyto(leaf, _np().roll(leaf, shift, axis=0))
    return new


def shifts(args, count):
    """Up to `count` values of `rolled`'s k, each giving values no other k gave (k=0 among them)."""
    n = max([_length(x) for x in leaves(args)] or [0])
    got = {}
    for k in range(n + 1 if n > 1 else 0):
        got.setdefault((max(1, n // 3) + k) % n or 1, k)  # the shift of the longest array
    return sorted(got.values())[1:count + 1]


def left_changed(used, original):
    """What a call left of its inputs (`used`, once it returned) as plain values, where it changed
    them (an answer written in place); None where it left them as they were or they are not plain."""
    try:
        after = plain(used)
        return None if close(after, plain(original)) else after
    except TypeError:
        return None


def far_shifts(args, count):
    """Up to `count` values of `rolled`'s k from the far end of `shifts`' (whose first ones the
    other probes take): each a shift of the longest array no other gives, none giving no shift."""
    n = max([_length(x) for x in leaves(args)] or [0])
    out, seen = [], set()
    for k in range(n - 1, max(0, n - 4 * count) - 1, -1):
        shift = (max(1, n // 3) + k) % n
        if len(out) >= count:
            break
        if shift > 1 and shift not in seen:
            seen.add(shift)
            out.append(k)
    return out


def nbytes(args):
    return sum(int(getattr(x, "nbytes", 0) or (x.numel() * x.element_size() if hasattr(x, "numel") else 0))
               for x in leaves(args))


def overwrite(dst, src):
    """Rewrite dst's arrays (lists) in place with src's values (same shapes); False when they differ."""
    a, b = leaves(dst), leaves(src)
    if not a or len(a) != len(b) or any(type(x) is not type(y) or (len(x) if type(x) is list else tuple(x.shape)) !=
                                        (len(y) if type(y) is list else tuple(y.shape)) for x, y in zip(a, b)):
        return False
    t = _torch()
    for x, y in zip(a, b):
        if type(x) is list:
            x[:] = y
        elif t is not None and isinstance(x, t.Tensor):
            x.copy_(y)
        else:
            _np().copyto(x, y)
    return True
