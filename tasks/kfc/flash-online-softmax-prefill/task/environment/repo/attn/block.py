"""The self-attention layer of the prefill path, around causal_attention."""

import torch
from torch import nn

from attn.prefill import causal_attention


class PrefillSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        """x: (batch, seq, hidden) -> (batch, seq, hidden)."""
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).unbind(dim=2)
        # (batch, seq, heads, head_dim) -> (batch, heads, seq, head_dim), as strided views
        o = causal_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return self.out(o.transpose(1, 2).reshape(b, s, -1))
