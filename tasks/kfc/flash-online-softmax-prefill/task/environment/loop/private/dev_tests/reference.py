"""Independent float64 reference for causal attention (torch, on the inputs' device).

Written from the definition, not from the repository's code: scores = scale * q k^T,
positions after the query row get no weight, a max-subtracted softmax over the rest,
then the weighted sum of v. Computed a few heads at a time to bound memory.
"""

import torch


def reference_attention(q, k, v, scale, max_bytes=1 << 29):
    """q, k, v: (batch, heads, seq, head_dim) tensors of any float dtype -> float64 output."""
    batch, heads, seq, head_dim = q.shape
    q64, k64, v64 = q.double(), k.double(), v.double()
    pos = torch.arange(seq, device=q.device)
    future = pos[None, :] > pos[:, None]
    out = torch.empty(batch, heads, seq, head_dim, dtype=torch.float64, device=q.device)
    per_head = max(1, seq * seq * 8)
    step = max(1, min(heads, max_bytes // per_head))
    for b in range(batch):
        for h0 in range(0, heads, step):
            hs = slice(h0, min(heads, h0 + step))
            s = torch.matmul(q64[b, hs], k64[b, hs].transpose(-1, -2)) * scale
            s.masked_fill_(future, float("-inf"))
            s -= s.max(dim=-1, keepdim=True).values
            w = torch.exp(s)
            w /= w.sum(dim=-1, keepdim=True)
            out[b, hs] = torch.matmul(w, v64[b, hs])
    return out
