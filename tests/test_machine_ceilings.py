"""The machine section of an engineer's prompt without torch (a README install): the CPU named
and measured with numpy, or with a plain buffer copy where numpy is missing too, cached once per
model; a GPU without torch falls back to the datasheet table. Real child interpreters."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evaluator import ceilings


def _without(tmp_path: Path, monkeypatch, *modules: str) -> None:
    """Child interpreters that cannot import `modules` (a README install has no torch)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    for m in modules:
        (shadow / f"{m}.py").write_text(f"raise ImportError('no {m} in this install')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))


def test_a_cpu_is_named_and_measured_without_torch(tmp_path, monkeypatch):
    _without(tmp_path, monkeypatch, "torch")
    f = ceilings.measure("cpu", small=True)
    assert f is not None and f["name"] == ceilings.cpu_model() and f["cores"] == os.cpu_count()
    assert f["bandwidth_gbs"] > 0 and f["bandwidth_one_thread_gbs"] > 0 and f["tflops"]["fp32"] > 0
    lines = ceilings.describe(f)
    assert lines[0] == f"{ceilings.cpu_model()} ({os.cpu_count()} cores)"
    assert lines[1].startswith("memory bandwidth: ") and "measured by pesflow with numpy" in lines[1]
    assert lines[2].startswith("compute: fp32 ") and "FLOP/s" in lines[2]
    assert "could not be measured" not in "\n".join(lines)


def test_without_numpy_either_the_bandwidth_is_a_plain_copy_and_no_flops_are_claimed(tmp_path, monkeypatch):
    _without(tmp_path, monkeypatch, "torch", "numpy")
    f = ceilings.measure("cpu", small=True)
    assert f is not None and f["bandwidth_gbs"] > 0 and "tflops" not in f and f["bandwidth_threads"] == 1
    lines = ceilings.describe(f)
    assert "on one thread" in lines[1] and lines[2].startswith("no FLOP/s figure (measured by pesflow with a plain buffer copy")


def test_the_cpu_is_measured_once_and_named_even_where_measuring_fails(tmp_path, monkeypatch):
    _without(tmp_path, monkeypatch, "torch")
    first = ceilings.facts("cpu", tmp_path / "cache", small=True)
    cached = list((tmp_path / "cache" / "machine").glob("cpu-*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text()) == first
    cached[0].write_text(json.dumps({**first, "bandwidth_gbs": 1.5}))
    assert ceilings.facts("cpu", tmp_path / "cache", small=True)["bandwidth_gbs"] == 1.5  # read, not measured again
    monkeypatch.setattr(ceilings, "measure", lambda *a, **k: None)
    named = ceilings.facts("cpu", tmp_path / "other", small=True)
    assert named["name"] == ceilings.cpu_model() and named["cores"] == os.cpu_count() and "named only" in named["source"]
    assert ceilings.describe(named)[0].endswith(" cores)")


def test_a_gpu_without_torch_is_not_measured_here(tmp_path, monkeypatch):
    _without(tmp_path, monkeypatch, "torch")
    assert ceilings.measure("cuda", small=True) is None
    assert ceilings.known("NVIDIA H100 80GB HBM3")["bandwidth_gbs"] == 3350


@pytest.mark.parametrize("v,shown", [(989.0, "989 TFLOP/s"), (0.03077, "30.8 GFLOP/s")])
def test_flops_read_in_the_unit_that_fits(v, shown):
    assert ceilings._flops(v) == shown
