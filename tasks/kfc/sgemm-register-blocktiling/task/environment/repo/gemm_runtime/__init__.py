"""Runtime for the server's fp32 GEMM kernel (sgemm_kernel.cu)."""

from gemm_runtime.build import build_library, load_library
from gemm_runtime.linear import linear_forward, sgemm

__all__ = ["build_library", "load_library", "linear_forward", "sgemm"]
