"""torch-facing wrappers around sgemm_launch."""

import torch

from gemm_runtime.build import load_library

_LAUNCH = {}


def _launcher():
    if "fn" not in _LAUNCH:
        _LAUNCH["fn"] = load_library()
    return _LAUNCH["fn"]


def _check(t, name, shape):
    if t.dtype != torch.float32 or not t.is_cuda or not t.is_contiguous():
        raise ValueError(f"{name} must be a contiguous float32 CUDA tensor")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape}")


def sgemm(a, b, c=None, alpha=1.0, beta=0.0, out=None):
    """out = alpha * a @ b + beta * c on the current CUDA stream (c unused when beta == 0)."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}")
    m, k = a.shape
    n = b.shape[1]
    _check(a, "a", (m, k))
    _check(b, "b", (k, n))
    if beta != 0.0:
        if c is None:
            raise ValueError("beta != 0 needs c")
        _check(c, "c", (m, n))
    if out is None:
        out = torch.empty((m, n), dtype=torch.float32, device=a.device)
    _check(out, "out", (m, n))
    c_ptr = c.data_ptr() if c is not None else out.data_ptr()
    stream = torch.cuda.current_stream(a.device).cuda_stream
    rc = _launcher()(m, n, k, float(alpha), a.data_ptr(), b.data_ptr(), float(beta), c_ptr,
                     out.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"sgemm_launch failed with CUDA error {rc}")
    return out


def linear_forward(x, weight, bias=None):
    """y = x @ weight + bias for x (tokens, in), weight (in, out), bias (out,)."""
    if bias is None:
        return sgemm(x, weight)
    c = bias.reshape(1, -1).expand(x.shape[0], weight.shape[1]).contiguous()
    return sgemm(x, weight, c, alpha=1.0, beta=1.0)
