"""Independent float64 reference for the state-space scan (numpy, on the CPU).

Written from the definition, not from the repository's code:
    h[-1] = 0;  h[t] = A[t] * h[t-1] + x[t] (outer) B[t];  y[t] = sum_n h[t] * C[t]
"""

import numpy as np


def reference_scan(A, B, C, x):
    """A (b, L, D, N), B/C (b, L, N), x (b, L, D), any float arrays -> y (b, L, D) float64."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    nb, length, channels, state = A.shape
    y = np.empty((nb, length, channels), dtype=np.float64)
    h = np.zeros((nb, channels, state), dtype=np.float64)
    drive = np.empty_like(h)
    for t in range(length):
        np.multiply(x[:, t, :, None], B[:, t, None, :], out=drive)
        np.multiply(A[:, t], h, out=h)
        h += drive
        y[:, t] = np.einsum("bdn,bn->bd", h, C[:, t])
    return y
