"""Paraphrase mining: find the most similar pairs among sentence embeddings.

Given one embedding per sentence, every sentence nominates its ``top_k``
nearest neighbours by cosine similarity; the nominated pairs are merged,
de-duplicated and returned best first.

Rules (they define the output exactly):

* Cosine similarity of rows ``i != j`` is ``dot(x_i, x_j) / (|x_i| * |x_j|)``
  evaluated in float64 (the float32 inputs are widened first). If either row
  has norm zero, the similarity is ``0.0``.
* The score of a pair is that similarity rounded to 6 decimals
  (``round(c, 6)``). All comparisons below use the rounded score.
* Row ``i`` nominates the ``min(top_k, n - 1)`` columns ``j != i`` with the
  highest score; equal scores prefer the smaller ``j``.
* A nomination ``(i, j)`` becomes the pair ``(min(i, j), max(i, j))``; a pair
  nominated from both ends appears once.
* Pairs are ordered by score descending, then ``i`` ascending, then ``j``
  ascending, and the first ``max_pairs`` are returned.
* Fewer than two rows, ``top_k <= 0`` or ``max_pairs <= 0`` give ``[]``.
"""

import math

from sbert_mini.util.checks import as_embedding_matrix


def _row_norms(rows):
    norms = []
    for row in rows:
        total = 0.0
        for v in row:
            total += v * v
        norms.append(math.sqrt(total))
    return norms


def _similarity_table(rows, norms):
    """Full n x n table of rounded cosine scores (diagonal left at 0.0)."""
    n = len(rows)
    width = len(rows[0]) if n else 0
    table = [[0.0] * n for _ in range(n)]
    for i in range(n):
        a = rows[i]
        na = norms[i]
        for j in range(i + 1, n):
            b = rows[j]
            nb = norms[j]
            if na == 0.0 or nb == 0.0:
                score = 0.0
            else:
                dot = 0.0
                for k in range(width):
                    dot += a[k] * b[k]
                score = round(dot / (na * nb), 6)
            table[i][j] = score
            table[j][i] = score
    return table


def _nominate(scores, i, count):
    """Indices of the ``count`` best columns of row ``i`` (ties: smaller j)."""
    n = len(scores)
    taken = [False] * n
    taken[i] = True
    picked = []
    for _ in range(count):
        best_j = -1
        best_score = 0.0
        for j in range(n):
            if taken[j]:
                continue
            if best_j < 0 or scores[j] > best_score:
                best_j = j
                best_score = scores[j]
        taken[best_j] = True
        picked.append(best_j)
    return picked


def paraphrase_mining_embeddings(embeddings, top_k=100, max_pairs=500000):
    """Mine the most similar sentence pairs.

    Args:
        embeddings: ``(n, d)`` float32 array, one sentence embedding per row.
            It is not modified.
        top_k: neighbours nominated per sentence.
        max_pairs: upper bound on the number of returned pairs.

    Returns:
        A list of ``[score, i, j]`` lists (``float``, ``int``, ``int``) with
        ``i < j``, ordered as described in the module docstring.

    Raises:
        ValueError: if ``embeddings`` is not two-dimensional.
    """
    matrix = as_embedding_matrix(embeddings)
    n = matrix.shape[0]
    top_k = int(top_k)
    max_pairs = int(max_pairs)
    if n < 2 or top_k <= 0 or max_pairs <= 0:
        return []

    rows = [[float(v) for v in row] for row in matrix.tolist()]
    norms = _row_norms(rows)
    table = _similarity_table(rows, norms)

    count = min(top_k, n - 1)
    seen = set()
    pairs = []
    for i in range(n):
        for j in _nominate(table[i], i, count):
            a, b = (i, j) if i < j else (j, i)
            if (a, b) in seen:
                continue
            seen.add((a, b))
            pairs.append([table[a][b], a, b])

    pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
    return pairs[:max_pairs]
