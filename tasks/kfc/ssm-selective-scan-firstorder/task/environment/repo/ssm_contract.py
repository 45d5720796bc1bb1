"""Input validation for the state-space scan: what every implementation must accept or refuse.

`check_scan_inputs(A, B, C, x)` returns the sizes `(batch, length, channels, state)` or
raises: TypeError for a non-tensor, a non-floating dtype or mixed dtypes; ValueError for
wrong ranks or sizes that do not agree across the four inputs.
"""

import torch

FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def accumulation_dtype(dtype):
    """The dtype the state is kept in: float32, or float64 for float64 inputs."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_scan_inputs(A, B, C, x):
    named = (("A", A), ("B", B), ("C", C), ("x", x))
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in FLOATING:
            raise TypeError(f"{name} must be float16, bfloat16, float32 or float64, got {t.dtype}")
    dtypes = {t.dtype for _, t in named}
    if len(dtypes) != 1:
        raise TypeError("A, B, C and x must share one dtype, got " + ", ".join(f"{n}={t.dtype}" for n, t in named))
    if A.dim() != 4:
        raise ValueError(f"A must be 4-D (batch, length, channels, state), got shape {tuple(A.shape)}")
    for name, t in (("B", B), ("C", C), ("x", x)):
        if t.dim() != 3:
            raise ValueError(f"{name} must be 3-D, got shape {tuple(t.shape)}")
    batch, length, channels, state = A.shape
    if tuple(B.shape) != (batch, length, state):
        raise ValueError(f"B must have shape {(batch, length, state)}, got {tuple(B.shape)}")
    if tuple(C.shape) != (batch, length, state):
        raise ValueError(f"C must have shape {(batch, length, state)}, got {tuple(C.shape)}")
    if tuple(x.shape) != (batch, length, channels):
        raise ValueError(f"x must have shape {(batch, length, channels)}, got {tuple(x.shape)}")
    return batch, length, channels, state
