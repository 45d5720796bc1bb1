"""A selective SSM sequence mixer built on `state_space_scan`.

The layer projects each step of the input to a step size `delta` and to the input and
output projections `B`, `C`; the decay is the zero-order-hold discretisation
`A = exp(delta * A_cont)` of a learned negative continuous-time matrix, so every track
forgets at its own, input-dependent rate.
"""

import math

import torch
from torch import nn

from state_space_scan import state_space_scan


class SelectiveSSM(nn.Module):
    def __init__(self, channels, state=16, dt_min=1e-3, dt_max=1e-1):
        super().__init__()
        self.channels, self.state = channels, state
        self.to_delta = nn.Linear(channels, channels)
        self.to_b = nn.Linear(channels, state, bias=False)
        self.to_c = nn.Linear(channels, state, bias=False)
        # S4D-real style initialisation: A_cont[d, n] = -(n + 1)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, state + 1, dtype=torch.float32)).repeat(channels, 1))
        dt = torch.exp(torch.rand(channels) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        with torch.no_grad():
            self.to_delta.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus

    def coefficients(self, u):
        """(A, B, C) for an input u of shape (batch, length, channels)."""
        delta = nn.functional.softplus(self.to_delta(u))            # (B, L, D)
        a_cont = -torch.exp(self.a_log.float())                      # (D, N)
        A = torch.exp(delta.float()[..., None] * a_cont).to(u.dtype)  # (B, L, D, N)
        return A, self.to_b(u), self.to_c(u)

    def forward(self, u):
        A, B, C = self.coefficients(u)
        delta = nn.functional.softplus(self.to_delta(u))
        return state_space_scan(A, B, C, u * delta)
