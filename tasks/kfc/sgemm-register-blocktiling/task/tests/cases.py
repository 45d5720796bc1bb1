"""Deterministic GEMM inputs for the grader (torch tensors on the GPU).

Correctness inputs live at the start of larger buffers whose tail (GUARD floats)
holds a NaN sentinel: a kernel that reads past the end of A, B or C and uses what it
read produces NaN, and one that writes past the end of D changes the sentinel.
D is filled with the sentinel before every call, so an output the kernel does not
write stays NaN.
"""

import torch

GUARD = 1024
SENTINEL_BITS = 0x7FC0DEAD  # a quiet NaN with a payload torch never produces itself


def sentinel_fill(t):
    """Fill a float32 tensor with the NaN sentinel (bit-exact)."""
    t.view(torch.int32).fill_(SENTINEL_BITS)
    return t


def is_sentinel(t):
    return bool((t.view(torch.int32) == SENTINEL_BITS).all().item()) if t.numel() else True


def _fill(view, dist, gen):
    shape = tuple(view.shape)
    dev = view.device
    if view.numel() == 0:
        return
    if dist == "normal":
        view.copy_(torch.randn(shape, generator=gen, device=dev))
    elif dist == "uniform":
        view.copy_(torch.rand(shape, generator=gen, device=dev) * 2.0 - 1.0)
    elif dist == "int":
        view.copy_(torch.randint(-3, 4, shape, generator=gen, device=dev).to(torch.float32))
    elif dist == "wide_range":
        # values whose magnitudes span 2**-10 .. 2**10 within one matrix
        mant = torch.randn(shape, generator=gen, device=dev)
        expo = torch.randint(-10, 11, shape, generator=gen, device=dev).to(torch.float32)
        view.copy_(mant * torch.pow(2.0, expo))
    elif dist == "nan":
        view.fill_(float("nan"))
    elif dist == "inf":
        view.copy_(torch.where(torch.rand(shape, generator=gen, device=dev) < 0.5,
                               torch.full(shape, float("inf"), device=dev),
                               torch.full(shape, float("-inf"), device=dev)))
    else:
        raise ValueError(f"unknown distribution {dist!r}")


class Inputs:
    """One GEMM problem: guarded buffers and the (M,K), (K,N), (M,N) views on them."""

    def __init__(self, spec, seed, device, guard=GUARD):
        self.M, self.N, self.K = int(spec["M"]), int(spec["N"]), int(spec["K"])
        self.alpha = float(spec.get("alpha", 1.0))
        self.beta = float(spec.get("beta", 0.0))
        self.guard = guard
        M, N, K = self.M, self.N, self.K
        gen = torch.Generator(device=device)
        gen.manual_seed(int(seed))
        self.bufs = {}
        for name, rows, cols in (("A", M, K), ("B", K, N), ("C", M, N), ("D", M, N)):
            buf = sentinel_fill(torch.empty(rows * cols + guard, dtype=torch.float32, device=device))
            self.bufs[name] = buf
        self.A = self.bufs["A"][: M * K].view(M, K)
        self.B = self.bufs["B"][: K * N].view(K, N)
        self.C = self.bufs["C"][: M * N].view(M, N)
        self.D = self.bufs["D"][: M * N].view(M, N)
        _fill(self.A, spec.get("a", "normal"), gen)
        _fill(self.B, spec.get("b", "normal"), gen)
        _fill(self.C, spec.get("c", "normal"), gen)

    def refill_from(self, other):
        """Overwrite A, B, C in place with another problem's values (same shapes)."""
        self.A.copy_(other.A)
        self.B.copy_(other.B)
        self.C.copy_(other.C)
        self.alpha, self.beta = other.alpha, other.beta

    def poison_output(self):
        sentinel_fill(self.bufs["D"])

    def guard_intact(self):
        n = self.M * self.N
        return is_sentinel(self.bufs["D"][n:])

    def snapshot(self):
        return {k: self.bufs[k].view(torch.int32).clone() for k in ("A", "B", "C")}

    def unchanged(self, snap):
        return all(torch.equal(self.bufs[k].view(torch.int32), snap[k]) for k in snap)

    def pointers(self):
        return (self.A.data_ptr(), self.B.data_ptr(), self.C.data_ptr(), self.D.data_ptr())
