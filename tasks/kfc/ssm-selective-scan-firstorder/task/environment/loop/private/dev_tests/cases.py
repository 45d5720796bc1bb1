"""What the grader knows about this task: inputs, checks, error probes, cost model.

The generic harness (harness.py) and GPU timer (gpu_timing.py) call into this module;
it never imports candidate code itself.
"""

import math

import numpy as np
import torch

TASK_ID = "ssm-selective-scan-firstorder"
SCOPE = ["state_space_scan.py"]
CANDIDATE_MODULE = "state_space_scan"
ENTRY = "state_space_scan"
BASELINE_FILE = "state_space_scan.py"
REFERENCE_NAME = "_ssm_grader_reference"

# Library scan primitives: banned in the text of the scope and stubbed to raise at run time.
FORBIDDEN_CALLS = [
    ("associative_scan", r"associative_scan"),
    ("selective_scan_fn", r"selective_scan_fn"),
    ("mamba_ssm", r"mamba_ssm"),
]
STUB_MODULES = ["mamba_ssm", "selective_scan_cuda"]
STUB_ATTRS = [
    "torch.associative_scan",
    "torch._higher_order_ops.associative_scan",
    "torch._higher_order_ops.associative_scan.associative_scan",
    # The public alias only: tl.cumsum / tl.cumprod are built on triton.language.core's
    # own copy and stay usable.
    "triton.language.associative_scan",
]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
# |y - ref| <= RTOL * |ref| + ATOL * rms(ref), elementwise, per input dtype.
TOLERANCE = {
    torch.float64: (1e-3, 1e-3),
    torch.float32: (1e-3, 1e-3),
    torch.float16: (5e-3, 5e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


# ----------------------------------------------------------------------------- inputs
def _gen(device, seed):
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def _coefficients(kind, shape, g, device, spec):
    """A of the given shape (float32) for one regime of the recurrence."""
    nb, length, channels, state = shape
    if kind == "zero":
        return torch.zeros(shape, device=device)
    if kind == "one":
        return torch.ones(shape, device=device)
    if kind == "amplify":
        # 1 <= A <= 1 + r with (1 + r)^L bounded by spec["growth"]: float32 stays finite.
        r = math.expm1(math.log(float(spec.get("growth", 1e3))) / max(length, 1))
        return 1.0 + r * torch.rand(shape, generator=g, device=device)
    if kind == "signed":
        return torch.rand(shape, generator=g, device=device) * 1.998 - 0.999
    # Discretised decays, A = exp(delta * a) with a < 0: "fast" forgets within a few
    # steps, "slow" remembers for hundreds of steps (so chunk carries matter).
    shift = -1.0 if kind == "fast" else -5.0
    delta = torch.nn.functional.softplus(torch.randn(nb, length, channels, 1, generator=g, device=device) * 0.7 + shift)
    a_cont = -torch.exp(torch.randn(1, 1, channels, state, generator=g, device=device) * 0.5)
    A = torch.exp(delta * a_cont)
    if kind == "slow_signed":
        sign = torch.where(torch.rand(shape, generator=g, device=device) < 0.5, -1.0, 1.0)
        A = A * sign
    return A


def make_inputs(spec, device, seed):
    """(A, B, C, x) in the spec's dtype, on `device`, from `seed`."""
    g = _gen(device, seed)
    nb, length, channels, state = int(spec["b"]), int(spec["L"]), int(spec["D"]), int(spec["N"])
    A = _coefficients(spec.get("A", "slow"), (nb, length, channels, state), g, device, spec)
    B = torch.randn(nb, length, state, generator=g, device=device)
    C = torch.randn(nb, length, state, generator=g, device=device)
    x = torch.randn(nb, length, channels, generator=g, device=device)
    dt = DTYPES[spec.get("dtype", "float32")]
    out = tuple(t.to(dt).contiguous() for t in (A, B, C, x))
    if spec.get("layout") == "strided":
        out = tuple(_strided(t) for t in out)
    return out


def _strided(t):
    """The same values in a non-contiguous layout (last two axes swapped in memory, or
    every other element of a wider buffer)."""
    if t.dim() == 4:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    wide = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    view = wide[..., ::2]
    view.copy_(t)
    return view


def build(spec, device, seed=None):
    return {"args": make_inputs(spec, device, spec["seed"] if seed is None else seed), "kwargs": {}}


def refresh_(case, spec, device, seed):
    """New contents for the same tensor objects (defeats caches keyed on identity)."""
    fresh = make_inputs(spec, device, seed)
    for dst, src in zip(case["args"], fresh):
        dst.copy_(src)


def _copy_keep_layout(t):
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def clone_case(case):
    """Independent copies, with the same strides (a strided case stays strided)."""
    return {"args": tuple(_copy_keep_layout(a) if isinstance(a, torch.Tensor) else a for a in case["args"]),
            "kwargs": dict(case["kwargs"])}


def tensors_of(case):
    return [a for a in case["args"] if isinstance(a, torch.Tensor)]


# ----------------------------------------------------------------------------- checks
def _reference(case, reference):
    return reference.reference_scan(*[a.detach().cpu().double().numpy() for a in case["args"]])


def compare(got, want, dtype, label="y"):
    """None if got (float64 array) is within tolerance of want, else a message."""
    rtol, atol = TOLERANCE[dtype]
    if got.shape != want.shape:
        return f"{label}: shape {got.shape}, expected {want.shape}"
    if want.size == 0:
        return None
    if not np.all(np.isfinite(got)):
        i = np.argwhere(~np.isfinite(got))[0]
        return f"{label}: non-finite value at {tuple(int(v) for v in i)}"
    scale = float(np.sqrt(np.mean(want * want))) or 1.0
    err = np.abs(got - want)
    bound = rtol * np.abs(want) + atol * scale
    bad = err > bound
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        return (f"{label}: {int(bad.sum())} of {bad.size} values out of tolerance; first at (b, t, d)={i}: "
                f"got {got[i]:.6g}, expected {want[i]:.6g} (max |err| / rms(ref) = {float(err.max()) / scale:.3g})")
    return None


def check_output(out, case, reference, want=None):
    """None when `out` is a correct answer for `case`, else a short message."""
    A, B, C, x = case["args"]
    if not isinstance(out, torch.Tensor):
        return f"expected a torch.Tensor, got {type(out).__name__}"
    if out.dtype != x.dtype:
        return f"y has dtype {out.dtype}, expected {x.dtype} (the input dtype)"
    if out.device.type != x.device.type:
        return f"y is on {out.device}, expected {x.device}"
    expect_shape = tuple(x.shape)
    if tuple(out.shape) != expect_shape:
        return f"y has shape {tuple(out.shape)}, expected {expect_shape}"
    if want is None:
        want = _reference(case, reference)
    return compare(out.detach().cpu().double().numpy(), want, x.dtype)


def run_special(spec, fn, call, device, reference):
    """Metamorphic checks; returns None or a message. `call(fn, case)` -> (out, error)."""
    kind = spec["special"]
    case = build(spec, device)
    out1, err = call(fn, clone_case(case))
    if err:
        return err
    msg = check_output(out1, case, reference)
    if msg:
        return "unperturbed run: " + msg
    dtype = case["args"][3].dtype
    if kind == "causality":
        t0 = int(spec["t0"])
        other = make_inputs(spec, device, int(spec["seed"]) + 7919)
        pert = {"args": tuple(torch.cat([a[:, :t0], o[:, t0:]], dim=1).contiguous()
                              for a, o in zip(case["args"], other)), "kwargs": {}}
        out2, err = call(fn, clone_case(pert))
        if err:
            return "perturbed run: " + err
        msg = check_output(out2, pert, reference)
        if msg:
            return "perturbed run: " + msg
        return compare(out2[:, :t0].detach().cpu().double().numpy(),
                       out1[:, :t0].detach().cpu().double().numpy(), dtype,
                       label=f"outputs before step {t0} changed when only steps >= {t0} changed")
    if kind == "prefix":
        lp = int(spec["prefix"])
        pre = {"args": tuple(a[:, :lp].contiguous() for a in case["args"]), "kwargs": {}}
        out2, err = call(fn, clone_case(pre))
        if err:
            return "prefix run: " + err
        msg = check_output(out2, pre, reference)
        if msg:
            return "prefix run: " + msg
        return compare(out2.detach().cpu().double().numpy(),
                       out1[:, :lp].detach().cpu().double().numpy(), dtype,
                       label=f"y of the first {lp} steps differs from the first {lp} steps of the full run")
    raise ValueError(f"unknown special case {kind!r}")


# ----------------------------------------------------------------------------- error contract
def error_cases(device):
    """(name, args, expected exception type) for each probe."""
    g = _gen(device, 4242)

    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g, device=device).to(dtype)

    b, L, D, N = 2, 9, 4, 3
    A, B, C, x = r(b, L, D, N).sigmoid(), r(b, L, N), r(b, L, N), r(b, L, D)
    return [
        ("integer_dtype", (A, B, C, torch.ones(b, L, D, dtype=torch.int32, device=device)), TypeError),
        ("all_integer", tuple(torch.ones_like(t, dtype=torch.int64) for t in (A, B, C, x)), TypeError),
        ("mixed_float_dtypes", (A, B, C, x.to(torch.float16)), TypeError),
        ("mixed_bf16_fp32", (A.to(torch.bfloat16), B, C, x), TypeError),
        ("not_a_tensor", (A, B.tolist(), C, x), TypeError),
        ("x_rank_2", (A, B, C, x[:, :, 0]), ValueError),
        ("A_rank_3", (A[..., 0], B, C, x), ValueError),
        ("B_rank_4", (A, B[..., None], C, x), ValueError),
        ("B_wrong_state_width", (A, r(b, L, N + 1), C, x), ValueError),
        ("C_wrong_length", (A, B, r(b, L - 1, N), x), ValueError),
        ("x_wrong_channels", (A, B, C, r(b, L, D + 2)), ValueError),
        ("batch_mismatch", (A, B, C, r(b + 1, L, D)), ValueError),
    ]


# ----------------------------------------------------------------------------- cost model
def roofline(spec):
    """(bytes that must move, flops that must be done, peak kind) for one call."""
    nb, length, channels, state = int(spec["b"]), int(spec["L"]), int(spec["D"]), int(spec["N"])
    es = torch.empty(0, dtype=DTYPES[spec.get("dtype", "float32")]).element_size()
    elems = nb * length * channels * state + 2 * nb * length * state + 2 * nb * length * channels
    flops = 5 * nb * length * channels * state
    return es * elems, flops, "fp32"
