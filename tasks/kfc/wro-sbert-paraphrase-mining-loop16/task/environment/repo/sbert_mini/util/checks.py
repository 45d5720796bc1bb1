"""Input validation shared by the embedding utilities."""

import numpy as np


def as_embedding_matrix(embeddings):
    """Return ``embeddings`` as a 2-D numpy array without copying it.

    Raises ``ValueError`` when the input is not two-dimensional; an
    ``(n, d)`` matrix holds one embedding of width ``d`` per row.
    """
    arr = np.asarray(embeddings)
    if arr.ndim != 2:
        raise ValueError(
            "embeddings must be a 2-D (n, d) array, got shape %r" % (arr.shape,)
        )
    return arr
