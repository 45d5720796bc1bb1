"""The bundled GPU packages, checked on the CPU path (slow: each package is prepared once).

With device="cpu" the grader runs correctness only, on small shapes and CPU tensors, with
Triton kernels in Triton's interpreter: the oracle must pass every case, the negative must
fail with a named reason, the untouched baseline (noop) must pass, and nothing is scored
(hardware "cpu", reward 0). Timing and its gates need the GPU and are not exercised here.
"""

import json
import tomllib
from pathlib import Path

import pytest

from evaluator.task import load_task
from evaluator.verdict import Status
from tests.conftest import needs_root

pytest.importorskip("torch", reason="the GPU packages' CPU path needs torch")
pytest.importorskip("triton", reason="the GPU packages' CPU path needs triton (its interpreter)")

GPU_TASKS = [
    "kfc/ssm-selective-scan-firstorder",
    "kfc/flash-online-softmax-prefill",
]
# The public catalog's anchors, measured on an H20; both stay placeholders until calibrated.
H20_ANCHORS = {"kfc/ssm-selective-scan-firstorder": 103.1823, "kfc/flash-online-softmax-prefill": 6.0}
pytestmark = [needs_root, pytest.mark.slow]


@pytest.fixture(scope="module")
def gpu_evaluator(cache_dir, tmp_path_factory):
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator

    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), log_root=tmp_path_factory.mktemp("gpu-cpu"))
    yield ev
    ev.close()


@pytest.mark.parametrize("name", GPU_TASKS)
def test_gpu_package_is_complete_in_the_format(name):
    t = load_task(name)
    for rel in ("instruction.md", "task.toml", ".dockerignore", "pre_artifacts.sh", "environment/Dockerfile",
                "environment/loop/submit.sh", "environment/loop/score_engine.sh", "environment/loop/sanitize_feedback.py",
                "environment/loop/private/manifest.json", "environment/loop/private/dev_tests/DEV_LANE",
                "tests/test.sh", "tests/compute_reward.py", "tests/harness.py", "tests/gpu_timing.py",
                "tests/reference.py", "tests/ref_speedup.txt", "tests/ref_speedup.caveat.md",
                "solution/oracle.patch", "solution/negative.patch", "solution/solve.sh"):
        assert (t.root / rel).is_file(), rel
    dockerfile = t.dockerfile.read_text()
    assert "<<" not in dockerfile and "FROM nvidia/cuda:12.6.2-devel-ubuntu22.04" in dockerfile
    assert t.gpus == 1 and t.toml.environment.gpu_types == ["H20", "H200"]
    assert t.toml.verifier.timeout_sec == 900 and len(t.scope) == 1
    # the public H20 anchor is kept beside ours, which `pesflow calibrate` measured on an H200
    raw = tomllib.loads((t.root / "task.toml").read_text())
    assert raw["primary_metric"]["ref_speedup_h20"] == H20_ANCHORS[name]
    assert raw["primary_metric"]["ref_speedup"] == t.anchor.value > 1
    assert "NVIDIA H200 (pesflow calibrate" in t.toml.primary_metric.calibrated_on
    caveat = (t.root / "tests/ref_speedup.caveat.md").read_text()
    assert "NVIDIA H200" in caveat and "runs: 5" in caveat
    assert str(t.anchor.value) not in t.instruction() and "ref_speedup" not in t.instruction()
    # the dev engine grades on its own workloads, with the hidden grader's code
    dev = t.root / "environment/loop/private/dev_tests"
    assert json.loads((dev / "workloads.json").read_text())["lane"] == "dev"
    assert (dev / "workloads.json").read_text() != (t.root / "tests/workloads.json").read_text()
    for rel in ("harness.py", "cases.py", "reference.py", "gpu_timing.py", "compute_reward.py", "test.sh"):
        assert (dev / rel).read_text() == (t.root / "tests" / rel).read_text(), rel


@pytest.mark.parametrize("name", GPU_TASKS)
def test_cpu_path_noop_oracle_negative(gpu_evaluator, name):
    ev = gpu_evaluator
    task = ev.task(name)

    oracle = ev.evaluate(task, mode="oracle", grader="hidden", device="cpu")
    assert oracle.status == Status.ok and oracle.hard_fail_reasons == [], (oracle.message, oracle.log_dir)
    assert oracle.tests.total >= 25 and oracle.tests.passed == oracle.tests.total
    assert oracle.hardware == "cpu" and oracle.reward == 0.0 and oracle.speedup is None
    results = Path(oracle.log_dir) / "logs" / "verifier" / "correctness_results.json"
    names = {c["name"] for c in json.loads(results.read_text())["cases"]}
    assert {"metamorphic_causality", "metamorphic_prefix_consistency"} <= names
    assert any(n.startswith("error:") for n in names) and any(n.startswith("cache_probe") for n in names)

    noop = ev.evaluate(task, mode="noop", grader="hidden", device="cpu")
    assert noop.status == Status.ok and noop.hard_fail_reasons == [], noop.message
    assert noop.tests.passed == noop.tests.total == oracle.tests.total
    assert noop.hardware == "cpu" and noop.reward == 0.0

    negative = ev.evaluate(task, mode="negative", grader="hidden", device="cpu")
    assert negative.status == Status.hard_fail and negative.reward == 0.0 and negative.hardware == "cpu"
    assert "correctness_failed" in negative.hard_fail_reasons, negative.hard_fail_reasons
    assert negative.tests.passed < negative.tests.total

