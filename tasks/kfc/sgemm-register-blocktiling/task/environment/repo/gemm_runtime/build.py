"""Build sgemm_kernel.cu into a shared library with nvcc, cached by source hash."""

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO / "sgemm_kernel.cu"
CACHE = Path(os.environ.get("GEMM_BUILD_CACHE", "/tmp/gemm_runtime_build"))

_ARGTYPES = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
             ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]


def _nvcc():
    found = shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc") if os.path.isfile(p)), None)
    if found is None:
        raise RuntimeError("nvcc not found: put the CUDA toolkit's bin/ on PATH")
    return found


def _arch():
    env = os.environ.get("GEMM_NVCC_ARCH", "").strip()
    return shlex.split(env) if env else ["-arch=native"]


def build_library(source=DEFAULT_SOURCE, arch=None):
    """Compile `source` (once per content and flags) and return the .so path."""
    source = Path(source)
    flags = ["-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", *(arch or _arch())]
    key = hashlib.sha256(source.read_bytes() + " ".join(flags).encode()).hexdigest()[:16]
    out = CACHE / f"{source.stem}-{key}.so"
    if out.is_file():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp.so")
    res = subprocess.run([_nvcc(), *flags, "-o", str(tmp), str(source)], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"nvcc failed for {source}:\n{res.stderr[-4000:]}")
    os.replace(tmp, out)
    return out


def load_library(source=DEFAULT_SOURCE, arch=None):
    """The built library's sgemm_launch, with its C signature declared."""
    lib = ctypes.CDLL(str(build_library(source, arch)), mode=ctypes.RTLD_LOCAL)
    fn = lib.sgemm_launch
    fn.restype = ctypes.c_int
    fn.argtypes = _ARGTYPES
    return fn
