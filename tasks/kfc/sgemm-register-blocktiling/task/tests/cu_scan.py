"""Static anti-cheat scan of the CUDA scope file (no candidate code runs).

The source is read as the preprocessor would see it (backslash-newlines joined),
comments are blanked (string literals are kept and scanned), then:

- every #include must name an allowed CUDA-runtime or standard header, in <...>;
- a list of forbidden names and constructs (BLAS libraries, tensor cores, reduced
  precision, dynamic loading, processes, files, side streams, driver API, ...);
- inline asm is allowed, but its text may not call out or use tensor cores;
- the frozen baseline, the grader's reference and its folders must not be named
  (reported as the separate gate `baseline_called`).

scan_source(text) -> (forbidden_names, baseline_called: bool)
"""

import re

# Headers a register-tiled SGEMM can need: the CUDA runtime and its device-side
# helpers, and the C/C++ standard library. Nothing that links or wraps a BLAS.
ALLOWED_INCLUDES = {
    "cuda_runtime.h", "cuda_runtime_api.h", "device_launch_parameters.h", "device_functions.h",
    "vector_types.h", "vector_functions.h", "driver_types.h", "math_constants.h",
    "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_awbarrier.h",
    "cuda_awbarrier_primitives.h", "cooperative_groups.h", "cooperative_groups/memcpy_async.h",
    "cooperative_groups/reduce.h", "cuda/pipeline", "cuda/barrier", "cuda/std/cstdint",
    "cuda/std/cstddef", "cuda/std/type_traits", "cuda/std/utility", "cuda/std/array",
    "cuda/std/limits",
    "cstdint", "stdint.h", "cstddef", "stddef.h", "cstdio", "stdio.h", "cmath", "math.h",
    "cfloat", "float.h", "climits", "limits.h", "cassert", "assert.h", "cstring", "string.h",
    "algorithm", "type_traits", "utility", "array", "limits", "cstdlib", "stdlib.h",
    "initializer_list", "tuple", "new",
}

# (name, pattern, flags). Names end up as forbidden_pattern:<name>.
FORBIDDEN = [
    ("blas_library", r"cublas|cutlass|\bcute\b|cute::|cudnn|cusparse|cutensor|cublasdx|mathdx|magma|openblas|\bmkl_", re.I),
    ("tensor_cores", r"\bw?mma\b|mma_sync|mma\.sync|wgmma|tcgen05|nvcuda|__hmma|__imma|ldmatrix|load_matrix_sync|store_matrix_sync|fragment\s*<", 0),
    ("reduced_precision", r"tf32|\b__half2?\b|\bhalf2\b|__nv_bfloat|\bbf16|\bfp16|\bfp8|__float2half|__float2bfloat|__nv_fp8|cuda_fp16|cuda_bf16|cuda_fp8", re.I),
    ("dynamic_loading", r"\b(dlopen|dlsym|dlvsym|dlmopen|dlinfo|dladdr|dl_iterate_phdr|_r_debug|link_map|LD_PRELOAD|LD_LIBRARY_PATH)\b", 0),
    ("process_control", r"\b(system|popen|fork|vfork|clone|execl|execlp|execle|execv|execvp|execvpe|execve|fexecve|posix_spawnp?|ptrace|syscall|kill|raise)\s*\(", 0),
    ("process_exit", r"\b(atexit|at_quick_exit|quick_exit|_exit|_Exit|exit|abort)\s*\(", 0),
    ("file_or_env_access", r"\b(fopen|fopen64|freopen|open|open64|openat|creat|mmap|mmap64|getenv|secure_getenv|setenv|putenv|unsetenv|readlink|opendir)\s*\(|\b(ifstream|ofstream|fstream|filebuf)\b|/proc\b|\benviron\b", 0),
    ("host_threads", r"std::thread|std::async|std::jthread|pthread_\w+|\bomp\b", 0),
    ("signals", r"\b(signal|sigaction|setitimer|alarm)\s*\(|\bsigset_t\b", 0),
    ("load_time_code", r"\bconstructor\b|\bdestructor\b|init_priority|\.init_array|\.fini_array", 0),
    ("stream_or_device_control", r"cudaStreamCreate\w*|cudaStreamDestroy|cudaLaunchHostFunc|cudaStreamAddCallback|cudaGraph\w*|cudaStream(Begin|End)Capture|cudaStreamPerThread|cudaStreamLegacy|cudaDeviceReset|cudaSetDevice\b|cudaEvent\w*|cudaStreamWaitEvent|cudaThreadExit|cudaIpc\w*|cudaProfiler\w*|cudaStreamSetAttribute|accessPolicyWindow|PersistingL2|cudaCtxResetPersistingL2Cache", 0),
    ("driver_api", r"\bcu[A-Z]\w*\s*\(|\bCU(function|module|context|deviceptr|result|stream|library|kernel|event)\b|cudaGetDriverEntryPoint\w*", 0),
    ("runtime_compilation", r"nvrtc|nvJitLink|nvjitlink|cudaLibrary\w*|cudaModule\w*|cudaKernel_t|fatbin", re.I),
    ("python_c_api", r"\bPy[A-Z_][A-Za-z_]*\w*|Python\.h|pybind", 0),
    ("token_pasting", r"##", 0),
    ("digraph_or_trigraph", r"%:|\?\?=", 0),
    ("pragma", r"_Pragma\b", 0),
    ("reads_grader_output", r"/logs\b", 0),
    ("reads_loop_harness", r"/opt/loop|dev_tests", 0),
]

# Names and paths that lead to the frozen baseline or the grader's reference.
BASELINE_PATTERNS = [
    r"verifier-baseline", r"verifier_baseline", r"/tests\b", r"_sgemm_grader\w*",
    r"frozen_baseline", r"sgemm_baseline",
]

ASM_FORBIDDEN = r"\bcall\b|\bmma\b|wgmma|tcgen05|\bsyscall\b|\bsysenter\b|\bint\s+\$?0x80\b|\bvprintf\b"

_ALLOWED_PRAGMAS = re.compile(r"^\s*#\s*pragma\s+(unroll\b|nounroll\b|once\b|nv_diag_\w+|diag_suppress\b)")


def strip_comments(src):
    """Blank // and /* */ comments, keep string and character literals intact."""
    src = src.replace("\\\r\n", "").replace("\\\n", "")
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        nxt = src[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        elif c == "R" and nxt == '"' and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', src[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(src[i:j])
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(src[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _asm_bodies(text):
    """The parenthesised operand text of every asm statement."""
    bodies = []
    for m in re.finditer(r"\b(asm|__asm__|__asm)\b\s*(volatile|__volatile__)?\s*(goto\s*)?\(", text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            ch = text[j]
            if ch in "\"'":
                k = j + 1
                while k < len(text) and text[k] != ch:
                    k += 2 if text[k] == "\\" else 1
                j = k + 1
                continue
            depth += ch == "("
            depth -= ch == ")"
            j += 1
        bodies.append(text[m.end(): j])
    return bodies


def _safe(name):
    return re.sub(r"[^\w./-]", "_", name)[:60] or "empty"


def scan_source(src):
    text = strip_comments(src)
    hits = []
    for line in text.splitlines():
        s = line.strip()
        if re.match(r"#\s*include_next\b", s) or re.match(r"#\s*import\b", s):
            hits.append("include_next")
            continue
        m = re.match(r"#\s*include\b(.*)$", s)
        if m:
            arg = m.group(1).strip()
            inc = re.fullmatch(r"<\s*([\w./-]+)\s*>", arg)
            if not inc:
                hits.append("include:" + _safe(arg.strip('<>"')))
            elif inc.group(1) not in ALLOWED_INCLUDES:
                hits.append("include:" + _safe(inc.group(1)))
            continue
        if re.match(r"#\s*pragma\b", s) and not _ALLOWED_PRAGMAS.match(s):
            hits.append("pragma")
    for name, pattern, flags in FORBIDDEN:
        if re.search(pattern, text, flags):
            hits.append(name)
    for body in _asm_bodies(text):
        if re.search(ASM_FORBIDDEN, body):
            hits.append("asm_call_or_tensor_core")
            break
    baseline = any(re.search(p, text) for p in BASELINE_PATTERNS)
    return sorted(set(hits)), baseline
