"""Causally-masked scaled dot-product attention over a whole prompt (the prefill step).

    out[b, h, i] = sum over j <= i of softmax_j(scale * q[b, h, i] . k[b, h, j]) * v[b, h, j]

q, k, v: (batch, heads, seq, head_dim), one dtype (float16, bfloat16 or float32), one
device; head_dim in {32, 64, 128}; scale defaults to 1 / sqrt(head_dim). The output has
q's shape and dtype.
"""

import torch

from attn.contract import check_attention_inputs


def causal_attention(q, k, v, scale=None):
    _, _, seq, _, scale = check_attention_inputs(q, k, v, scale)
    # Everything in float32: the whole (seq x seq) score matrix of every head is built,
    # masked above the diagonal, normalised row by row, then multiplied with v.
    qf, kf, vf = q.float(), k.float(), v.float()
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, vf)
    return out.to(q.dtype)
