"""The probes' one comparison of outputs (inside/pesflow_probe.py `close`): every element within
its tolerance, or 99 % of them (loose), counted, never read off a mean. On CUDA a mean multiplies
by 1/n: an honest output of 2244 elements compared with itself read 0.9999999999999999 there, and
the H200 called the oracle of kfc/mamba-zoh-discretize `unsynchronized_work` (results-h200/2026-12-04-trust)."""

from __future__ import annotations


import numpy as np
import pytest

from tests.conftest import inside_module


@pytest.fixture(scope="module")
def probe():
    yield from inside_module("pesflow_probe")


N = 2244  # 1 x 33 x 17 x 4: that package's correctness shape; 2244 * (1 / 2244) < 1 in doubles


def test_an_output_equals_itself_whatever_its_size(probe):
    assert N * (1.0 / N) < 1.0  # the arithmetic a reciprocal mean does
    for n in (1, 49, N, 98304):
        a = np.random.default_rng(n).standard_normal(n)
        assert probe.close(a, a.copy()) and probe.close(a, a.copy(), loose=True), n


def test_tensors_are_counted_not_averaged(probe, monkeypatch):
    torch = pytest.importorskip("torch")
    x = torch.rand(1, 33, 17, 4)
    # a device that averages as CUDA does (the sum times 1/n)
    monkeypatch.setattr(torch.Tensor, "mean", lambda self, *a, **k: self.sum(*a, **k) * (1.0 / self.numel()))
    assert probe.close(x, x.clone()) and probe.close(x, x.clone(), loose=True)
    assert probe.close([x, x.long()], [x.clone(), x.long().clone()], loose=True)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_the_loose_rule_holds_at_99_percent(probe, kind):
    base = np.linspace(1.0, 2.0, N)
    near, far = base.copy(), base.copy()
    near[:22] += 1.0  # 2222 of 2244 close: 99.02 %
    far[:23] += 1.0  # 2221 of 2244: 98.98 %
    if kind == "torch":
        torch = pytest.importorskip("torch")
        base, near, far = (torch.from_numpy(v) for v in (base, near, far))
    assert probe.close(near, base, loose=True) and not probe.close(far, base, loose=True)
    assert not probe.close(near, base)  # exact: every element
