"""What the grader knows about this task: inputs, checks, error probes, cost model.

The generic harness (harness.py) and GPU timer (gpu_timing.py) call into this module;
it never imports candidate code itself.
"""

import math

import torch

TASK_ID = "flash-online-softmax-prefill"
SCOPE = ["attn/prefill.py"]
CANDIDATE_MODULE = "attn.prefill"
ENTRY = "causal_attention"
BASELINE_FILE = "prefill.py"
REFERENCE_NAME = "_attn_grader_reference"

# Library attention kernels: banned in the text of the scope and stubbed to raise at run time.
FORBIDDEN_CALLS = [
    ("scaled_dot_product_attention", r"scaled_dot_product"),
    ("flash_attn", r"\bflash_attn\b"),
    ("xformers", r"\bxformers\b"),
    ("torch_attention_kernels", r"_flash_attention|_efficient_attention|_cudnn_attention|flex_attention"),
]
STUB_MODULES = ["flash_attn", "flash_attn_2_cuda", "xformers"]
STUB_ATTRS = [
    "torch.nn.functional.scaled_dot_product_attention",
    "torch._C._nn.scaled_dot_product_attention",
    "torch.ops.aten.scaled_dot_product_attention",
    "torch.ops.aten._scaled_dot_product_flash_attention",
    "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.ops.aten._scaled_dot_product_cudnn_attention",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.nn.attention.flex_attention.flex_attention",
]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# |out - ref| <= ATOL + RTOL * |ref|, elementwise, per input dtype (ref: float64).
TOLERANCE = {
    torch.float32: (5e-3, 5e-3),
    torch.float16: (5e-3, 5e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


# ----------------------------------------------------------------------------- inputs
def _gen(device, seed):
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def make_inputs(spec, device, seed):
    """(q, k, v) in the spec's dtype and layout, on `device`, from `seed`."""
    g = _gen(device, seed)
    b, h, s, d = int(spec["b"]), int(spec["h"]), int(spec["s"]), int(spec["d"])
    q, k, v = (torch.randn(b, h, s, d, generator=g, device=device) for _ in range(3))
    kind = spec.get("kind", "normal")
    if kind == "peaky":
        # logits with a standard deviation of ~16: near one-hot rows, huge exp ranges
        q *= 4.0
        k *= 4.0
    elif kind == "rising":
        # a score ramp along the keys: every new key block raises the running maximum
        q[..., 0] = 1.0
        k[..., 0] = torch.linspace(0.0, 10.0 * math.sqrt(d), s, device=device)
    elif kind == "sink":
        # the first key dominates every row: the maximum is set by the first block
        q[..., 0] = 3.0
        k[:, :, 0, 0] = 3.0 * math.sqrt(d)
    elif kind != "normal":
        raise ValueError(f"unknown input kind {kind!r}")
    dt = DTYPES[spec.get("dtype", "float16")]
    out = []
    for t in (q, k, v):
        t = t.to(dt)
        if spec.get("layout") == "bshd":
            # the (batch, seq, heads, head_dim) buffer of a fused projection, viewed as bhsd
            t = t.transpose(1, 2).contiguous().transpose(1, 2)
        out.append(t)
    return tuple(out)


def build(spec, device, seed=None):
    args = make_inputs(spec, device, spec["seed"] if seed is None else seed)
    kwargs = {"scale": float(spec["scale"])} if "scale" in spec else {}
    return {"args": args, "kwargs": kwargs}


def refresh_(case, spec, device, seed):
    """New contents for the same tensor objects (defeats caches keyed on identity)."""
    for dst, src in zip(case["args"], make_inputs(spec, device, seed)):
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
def _scale_of(case):
    s = case["kwargs"].get("scale")
    return float(s) if s is not None else 1.0 / math.sqrt(case["args"][0].shape[-1])


def compare(got, want, dtype, label="out"):
    """None if got is within tolerance of want (both float64 tensors), else a message."""
    atol, rtol = TOLERANCE[dtype]
    if tuple(got.shape) != tuple(want.shape):
        return f"{label}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if want.numel() == 0:
        return None
    finite = torch.isfinite(got)
    if not bool(finite.all()):
        i = tuple(int(x) for x in torch.nonzero(~finite)[0])
        return f"{label}: non-finite value at (b, h, i, d)={i}"
    err = (got - want).abs()
    bad = err > atol + rtol * want.abs()
    if bool(bad.any()):
        i = tuple(int(x) for x in torch.nonzero(bad)[0])
        return (f"{label}: {int(bad.sum())} of {bad.numel()} values out of tolerance; first at (b, h, i, d)={i}: "
                f"got {float(got[i]):.6g}, expected {float(want[i]):.6g} (max |err| {float(err.max()):.3g})")
    return None


def check_output(out, case, reference, want=None):
    """None when `out` is a correct answer for `case`, else a short message."""
    q, k, v = case["args"]
    if not isinstance(out, torch.Tensor):
        return f"expected a torch.Tensor, got {type(out).__name__}"
    if out.dtype != q.dtype:
        return f"out has dtype {out.dtype}, expected {q.dtype} (q's dtype)"
    if out.device.type != q.device.type:
        return f"out is on {out.device}, expected {q.device}"
    if tuple(out.shape) != tuple(q.shape):
        return f"out has shape {tuple(out.shape)}, expected {tuple(q.shape)}"
    if want is None:
        want = reference.reference_attention(q, k, v, _scale_of(case))
    return compare(out.detach().double(), want, q.dtype)


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
    dtype = case["args"][0].dtype
    if kind == "causality":
        t0 = int(spec["t0"])
        other = make_inputs(spec, device, int(spec["seed"]) + 7919)
        pert = {"args": tuple(torch.cat([a[:, :, :t0], o[:, :, t0:]], dim=2).contiguous()
                              for a, o in zip(case["args"], other)), "kwargs": dict(case["kwargs"])}
        out2, err = call(fn, clone_case(pert))
        if err:
            return "perturbed run: " + err
        msg = check_output(out2, pert, reference)
        if msg:
            return "perturbed run: " + msg
        return compare(out2[:, :, :t0].detach().double(), out1[:, :, :t0].detach().double(), dtype,
                       label=f"rows before position {t0} changed when only positions >= {t0} changed")
    if kind == "prefix":
        p = int(spec["prefix"])
        pre = {"args": tuple(a[:, :, :p].contiguous() for a in case["args"]), "kwargs": dict(case["kwargs"])}
        out2, err = call(fn, clone_case(pre))
        if err:
            return "prefix run: " + err
        msg = check_output(out2, pre, reference)
        if msg:
            return "prefix run: " + msg
        return compare(out2.detach().double(), out1[:, :, :p].detach().double(), dtype,
                       label=f"attention over the first {p} positions differs from the first {p} rows of the full run")
    raise ValueError(f"unknown special case {kind!r}")


# ----------------------------------------------------------------------------- error contract
def error_cases(device):
    """(name, args, expected exception type) for each probe."""
    g = _gen(device, 4242)

    def r(*shape, dtype=torch.float16):
        return torch.randn(*shape, generator=g, device=device).to(dtype)

    b, h, s, d = 1, 2, 24, 32
    q, k, v = r(b, h, s, d), r(b, h, s, d), r(b, h, s, d)
    return [
        ("integer_dtype", (q.to(torch.int32), k.to(torch.int32), v.to(torch.int32)), TypeError),
        ("float64_inputs", (q.double(), k.double(), v.double()), TypeError),
        ("mixed_dtypes", (q, k.float(), v), TypeError),
        ("not_a_tensor", (q, k.tolist(), v), TypeError),
        ("scale_not_a_number", (q, k, v, "0.1"), TypeError),
        ("q_rank_3", (q[0], k[0], v[0]), ValueError),
        ("k_seq_mismatch", (q, r(b, h, s + 3, d), v), ValueError),
        ("v_head_dim_mismatch", (q, k, r(b, h, s, 64)), ValueError),
        ("heads_mismatch", (q, r(b, h + 1, s, d), r(b, h + 1, s, d)), ValueError),
        ("head_dim_48", (r(b, h, s, 48), r(b, h, s, 48), r(b, h, s, 48)), ValueError),
        ("head_dim_256", (r(b, h, 4, 256), r(b, h, 4, 256), r(b, h, 4, 256)), ValueError),
        ("empty_sequence", (r(b, h, 0, d), r(b, h, 0, d), r(b, h, 0, d)), ValueError),
        ("negative_scale", (q, k, v, -0.5), ValueError),
        ("zero_scale", (q, k, v, 0.0), ValueError),
        ("nan_scale", (q, k, v, float("nan")), ValueError),
    ]


# ----------------------------------------------------------------------------- cost model
def roofline(spec):
    """(bytes that must move, flops that must be done, peak kind) for one call."""
    b, h, s, d = int(spec["b"]), int(spec["h"]), int(spec["s"]), int(spec["d"])
    dt = DTYPES[spec.get("dtype", "float16")]
    es = torch.empty(0, dtype=dt).element_size()
    nbytes = es * 4 * b * h * s * d  # read q, k, v once, write out once
    flops = 4 * b * h * d * (s * (s + 1) // 2)  # q k^T and p v over the causal half
    return nbytes, flops, ("tf32" if dt == torch.float32 else "half")
