"""Input validation for causal_attention: what every implementation must accept or refuse.

`check_attention_inputs(q, k, v, scale)` returns `(batch, heads, seq, head_dim, scale)`
with the scale resolved to a float, or raises: TypeError for a non-tensor, an unsupported
or mixed dtype, or a scale that is not a real number; ValueError for wrong ranks, shapes
that disagree, an unsupported head_dim, an empty sequence or a scale that is not a
positive finite number.
"""

import math
import numbers

import torch

from attn import SUPPORTED_HEAD_DIMS

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def check_attention_inputs(q, k, v, scale=None):
    named = (("q", q), ("k", k), ("v", v))
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in DTYPES:
            raise TypeError(f"{name} must be float16, bfloat16 or float32, got {t.dtype}")
    if len({t.dtype for _, t in named}) != 1:
        raise TypeError(f"q, k and v must share one dtype, got q={q.dtype}, k={k.dtype}, v={v.dtype}")
    for name, t in named:
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq, head_dim), got shape {tuple(t.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k and v must have one shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if len({t.device for _, t in named}) != 1:
        raise ValueError("q, k and v must be on one device")
    batch, heads, seq, head_dim = q.shape
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {head_dim}")
    if seq == 0:
        raise ValueError("seq must be at least 1")
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    elif isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"scale must be a real number or None, got {type(scale).__name__}")
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    return batch, heads, seq, head_dim, scale
