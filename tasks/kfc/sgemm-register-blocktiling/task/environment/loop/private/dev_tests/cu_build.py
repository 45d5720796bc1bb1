"""Build a .cu scope file into a shared library with nvcc, and check what it links.

The candidate and the frozen baseline are built with the same command:
    nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC <arch> -o <tmp>/<name>.so <src>
<arch> is -arch=native on a GPU machine and -arch=sm_90 for the compile-only CPU
lane; KERNELBENCH_NVCC_ARCH replaces it (e.g. "-arch=sm_90" or a -gencode list) and
KERNELBENCH_NVCC names the nvcc binary.

Link check (forbidden_pattern:links:<lib> / forbidden_pattern:unresolved_symbol:<sym>):
the library may only need the C/C++ runtime libraries (and libcudart when the
override asks for a shared CUDA runtime), and every symbol it leaves undefined must
be defined by one of those. A symbol left for the process to provide at load time
(cuBLAS or libtorch symbols, the Python C API, the baseline's entry point) fails.
"""

import os
import re
import shlex
import shutil
import subprocess

COMPILE_TIMEOUT_S = 240

ALLOWED_NEEDED = re.compile(
    r"^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux-x86-64|ld-linux-aarch64|libcudart)\.so(\.[\d.]+)?$"
)
_CUDA_LIB_DIRS = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                  "/usr/local/cuda/targets/sbsa-linux/lib"]


def nvcc_binary():
    env = os.environ.get("KERNELBENCH_NVCC")
    if env:
        return env
    found = shutil.which("nvcc")
    if found:
        return found
    for cand in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc"):
        if os.path.isfile(cand):
            return cand
    return None


def arch_flags(device):
    env = os.environ.get("KERNELBENCH_NVCC_ARCH", "").strip()
    if env:
        return shlex.split(env)
    return ["-arch=native"] if device == "cuda" else ["-arch=sm_90"]


def compile_command(nvcc, src, out, arch):
    return [nvcc, "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", *arch, "-o", out, src]


def start_build(src, out, arch):
    """Start nvcc; returns a handle for finish_build (builds may run side by side)."""
    nvcc = nvcc_binary()
    if nvcc is None:
        return {"error": "nvcc not found (set KERNELBENCH_NVCC or put nvcc on PATH)", "out": out}
    cmd = compile_command(nvcc, src, out, arch)
    log = out + ".log"
    fh = open(log, "w", encoding="utf-8")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    return {"proc": proc, "fh": fh, "log": log, "out": out, "cmd": cmd}


def finish_build(handle, timeout=COMPILE_TIMEOUT_S):
    """(ok, message). message is the tail of nvcc's output when the build failed."""
    if "error" in handle:
        return False, handle["error"]
    proc = handle["proc"]
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        proc.wait()
        handle["fh"].close()
        return False, f"nvcc ran past {timeout} s and was stopped"
    handle["fh"].close()
    with open(handle["log"], "r", encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    if rc != 0 or not os.path.isfile(handle["out"]):
        return False, f"nvcc exited {rc}: " + text[-1500:]
    return True, text[-500:]


def _run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    if res.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {res.stderr.strip()[-300:]}")
    return res.stdout


def _needed(so):
    out = _run(["readelf", "-d", "-W", so])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _ldconfig_paths():
    paths = {}
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for m in re.finditer(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", out, re.M):
            name, tags, path = m.groups()
            if "x86-64" in tags or "AArch64" in tags or name not in paths:
                paths.setdefault(name, path)
        if paths:
            break
    return paths


def _resolve(lib, known):
    if lib in known and os.path.isfile(known[lib]):
        return known[lib]
    for d in ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
              "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", *_CUDA_LIB_DIRS]:
        p = os.path.join(d, lib)
        if os.path.isfile(p):
            return p
    return None


def _symbols(so, which):
    out = _run(["nm", "-D", which, so])
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if not parts:
            continue
        if which == "--undefined-only":
            # "U name@VER"; weak undefined ("w", "v") may stay unresolved by design
            if len(parts) >= 2 and parts[0] == "U":
                syms.append(parts[1].split("@")[0])
        else:
            if len(parts) >= 3:
                syms.append(parts[2].split("@")[0])
    return syms


def link_check(so):
    """Forbidden-pattern names for what the built library links or leaves unresolved."""
    hits = []
    needed = _needed(so)
    allowed_libs = []
    for lib in needed:
        if ALLOWED_NEEDED.match(lib):
            allowed_libs.append(lib)
        else:
            hits.append("links:" + re.sub(r"[^\w.+-]", "_", lib)[:60])
    known = _ldconfig_paths()
    defined = set()
    for lib in allowed_libs:
        path = _resolve(lib, known)
        if path is None:
            raise RuntimeError(f"cannot find {lib} to check the symbols it provides")
        defined.update(_symbols(path, "--defined-only"))
    missing = sorted(s for s in set(_symbols(so, "--undefined-only")) if s not in defined)
    for sym in missing[:5]:
        hits.append("unresolved_symbol:" + re.sub(r"[^\w.]", "_", sym)[:80])
    return hits, {"needed": needed, "unresolved": missing[:50]}
