"""Independent reference for the paraphrase-mining contract.

Written from the contract text, not from the repository code: scores come
from one float64 matrix product divided by the outer product of the norms,
rounded with numpy; per-row nominations and the final order come from
Python's sort on explicit keys.
"""

import numpy as np


def mine(embeddings, top_k, max_pairs):
    x = np.asarray(embeddings)
    if x.ndim != 2:
        raise ValueError("embeddings must be 2-D")
    n = x.shape[0]
    top_k = int(top_k)
    max_pairs = int(max_pairs)
    if n < 2 or top_k <= 0 or max_pairs <= 0:
        return []
    xd = x.astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", xd, xd))
    dots = xd @ xd.T
    denom = np.outer(norms, norms)
    cos = np.zeros((n, n), dtype=np.float64)
    ok = denom > 0
    cos[ok] = dots[ok] / denom[ok]
    scores = np.round(cos, 6)
    # Use the (i<j) orientation for both ends so the table is symmetric.
    upper = np.triu(scores, 1)
    scores = upper + upper.T
    table = scores.tolist()

    per_row = min(top_k, n - 1)
    pairs = {}
    for i in range(n):
        row = table[i]
        ranked = sorted((j for j in range(n) if j != i), key=lambda j: (-row[j], j))
        for j in ranked[:per_row]:
            a, b = min(i, j), max(i, j)
            pairs[(a, b)] = table[a][b]
    ordered = sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1]))
    return [[float(s), int(a), int(b)] for (a, b), s in ordered[:max_pairs]]
