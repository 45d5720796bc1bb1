"""The first-order selective state-space recurrence (the sequence-mixing step of an SSM block).

For every batch b, channel d and state index n there is one scalar track, started at zero
and stepped forward in time:

    h[t] = A[t] * h[t-1] + x[t] * B[t]
    y[t] = sum over n of h[t] * C[t]

Shapes: A (B, L, D, N), B (B, L, N), C (B, L, N), x (B, L, D) -> y (B, L, D).
The state is kept in float32 (float64 for float64 inputs); y comes back in x's dtype.
"""

import torch

from ssm_contract import accumulation_dtype, check_scan_inputs


def state_space_scan(A, B, C, x):
    batch, length, channels, state = check_scan_inputs(A, B, C, x)
    acc = accumulation_dtype(x.dtype)

    h = torch.zeros(batch, channels, state, dtype=acc, device=x.device)
    outputs = []
    # One step at a time, in order: h[t] needs h[t-1].
    for t in range(length):
        a_t = A[:, t].to(acc)                      # (B, D, N)
        drive = x[:, t, :, None].to(acc) * B[:, t, None, :].to(acc)
        h = a_t * h + drive
        outputs.append((h * C[:, t, None, :].to(acc)).sum(dim=-1))
    if length == 0:
        return torch.zeros(batch, 0, channels, dtype=x.dtype, device=x.device)
    return torch.stack(outputs, dim=1).to(x.dtype)
