"""Independent reference for D = alpha * A @ B + beta * C, in float64 (torch).

Not the baseline kernel: the product is computed by torch in double precision and
the candidate is judged element by element against it with an error budget that an
fp32 multiply-add chain meets with a wide margin and reduced-precision arithmetic
(tf32, fp16, bf16 inputs) does not:

    |D - ref| <= TOL * (|alpha| * (|A| @ |B|) + |beta| * |C|) + TINY

TOL = 2**-19 (32 units of fp32 rounding). An fp32 dot product of random data stays
within a few units of |A| @ |B| whatever the summation order; rounding the inputs to
tf32 already costs hundreds of units for the K used here. beta == 0 means C is not
read: it drops out of both the reference and the budget, whatever C holds.
"""

import torch

TOL = 2.0 ** -19
TINY = 1e-37


def reference_parts(A, B, alpha):
    """(alpha * A @ B, |alpha| * |A| @ |B|), both float64, shape (M, N)."""
    a64 = A.to(torch.float64)
    b64 = B.to(torch.float64)
    prod = torch.matmul(a64, b64) * float(alpha)
    budget = torch.matmul(a64.abs(), b64.abs()) * abs(float(alpha))
    return prod, budget


def expected(prod, budget, C, beta, scale=1.0):
    """Reference output and per-element error budget for inputs whose A was scaled by `scale`."""
    ref = prod * scale
    bound = budget * abs(scale)
    if beta != 0.0:
        c64 = C.to(torch.float64)
        ref = ref + float(beta) * c64
        bound = bound + abs(float(beta)) * c64.abs()
    return ref, bound * TOL + TINY


def compare(D, ref, bound):
    """None when D matches, else a short message about the first mismatch."""
    if tuple(D.shape) != tuple(ref.shape):
        return f"output shape {tuple(D.shape)}, expected {tuple(ref.shape)}"
    if D.numel() == 0:
        return None
    err = (D.to(torch.float64) - ref).abs()
    bad = ~(err <= bound)  # NaN counts as a mismatch
    nbad = int(bad.sum().item())
    if nbad == 0:
        return None
    idx = int(torch.nonzero(bad.reshape(-1))[0].item())
    n = D.shape[1]
    r, c = divmod(idx, n)
    got = float(D.reshape(-1)[idx].item())
    want = float(ref.reshape(-1)[idx].item())
    lim = float(bound.reshape(-1)[idx].item())
    return (f"{nbad} of {D.numel()} outputs outside the fp32 error budget; first at "
            f"(row {r}, col {c}): got {got!r}, expected {want!r} (allowed error {lim:.3g})")
