"""The bundled CPU packages, graded for real by the local backend (slow: each prepares once).

What every package must show: noop scores 0 with a speedup near 1, the oracle passes every
gate with a speedup near its calibrated anchor, the negative scores 0 with a named reason,
and a change outside the scope is refused before anything runs.
"""

import pytest

from evaluator.evaluation import CandidateSource
from evaluator.task import load_task
from evaluator.verdict import Status
from tests.conftest import needs_root

BUNDLED = [
    "kfc/wre-router-power-of-two-choices-loop16",
    "kfc/nativehist-merge",
    "kfc/wro-sbert-paraphrase-mining-loop16",
    "lh/wro-vllm-v1-priority-request-queue",
]
pytestmark = [needs_root, pytest.mark.slow]


@pytest.fixture(scope="module")
def bundled_evaluator(cache_dir, tmp_path_factory):
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator

    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), log_root=tmp_path_factory.mktemp("bundled"))
    yield ev
    ev.close()


@pytest.mark.parametrize("name", BUNDLED)
def test_package_is_complete_in_the_format(name):
    t = load_task(name)
    for rel in ("instruction.md", "task.toml", ".dockerignore", "pre_artifacts.sh", "environment/Dockerfile",
                "environment/loop/submit.sh", "environment/loop/score_engine.sh", "environment/loop/sanitize_feedback.py",
                "environment/loop/private/manifest.json", "tests/test.sh", "tests/compute_reward.py",
                "tests/ref_speedup.txt", "tests/ref_speedup.caveat.md", "solution/oracle.patch",
                "solution/negative.patch", "solution/solve.sh"):
        assert (t.root / rel).is_file(), rel
    assert "<<" not in t.dockerfile.read_text()  # no BuildKit heredocs in our own Dockerfiles
    assert "python:3.11-slim-bookworm" in t.dockerfile.read_text()
    assert t.scope and t.anchor.source == "tests/ref_speedup.txt" and t.anchor.value > 1
    assert (t.max_submissions == 16) == (t.bench == "lh")
    # the dev engine grades on its own workloads, not the hidden ones
    dev = sorted(p.name for p in (t.root / "environment/loop/private/dev_tests").iterdir())
    assert dev and "workloads.json" in dev
    assert (t.root / "environment/loop/private/dev_tests/workloads.json").read_text() != (t.root / "tests/workloads.json").read_text()
    assert str(t.anchor.value) not in t.instruction()


@pytest.mark.parametrize("name", BUNDLED)
def test_noop_oracle_negative_and_scope(bundled_evaluator, name):
    ev = bundled_evaluator
    task = ev.task(name)
    anchor = task.anchor.value

    noop = ev.evaluate(task, mode="noop", grader="hidden")
    assert noop.status in (Status.ok, Status.hard_fail), noop.message
    assert noop.reward == 0.0 and 0.6 < noop.speedup < 1.6, (noop.speedup, noop.hard_fail_reasons)
    assert set(noop.hard_fail_reasons) <= {"speedup_not_above_baseline"}

    oracle = ev.evaluate(task, mode="oracle", grader="hidden")
    assert oracle.status == Status.ok and oracle.hard_fail_reasons == [], oracle.message
    assert anchor / 2.5 < oracle.speedup < anchor * 2.5, (oracle.speedup, anchor)
    assert oracle.tests.total > 0 and oracle.tests.passed == oracle.tests.total
    assert oracle.hardware
    assert not oracle.trust.suspect, oracle.trust.reasons  # the package's reference: the honest ground truth

    negative = ev.evaluate(task, mode="negative", grader="hidden")
    assert negative.status == Status.hard_fail and negative.reward == 0.0
    assert any(r.startswith(("correctness_failed", "error_contract_failed")) for r in negative.hard_fail_reasons)

    outside = CandidateSource(diff="--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-x\n+y\n")
    refused = ev.evaluate(task, candidate=outside, grader="hidden")
    assert refused.status == Status.scope_violation and refused.hard_fail_reasons == ["out_of_scope:README.md"]
    assert refused.seconds < 5


@pytest.mark.parametrize("name", BUNDLED)
def test_dev_engine_grades_the_oracle_without_the_anchor(bundled_evaluator, name):
    v = bundled_evaluator.evaluate(name, mode="oracle", grader="dev")
    assert v.status == Status.ok and v.hard_fail_reasons == [] and v.speedup > 1.5, v.message
    assert not v.trust.suspect, v.trust.reasons
    # the dev engine never reveals the hidden anchor
    anchor = load_task(name).anchor.value
    assert v.raw.get("ref_speedup") in (None, "withheld") or v.raw.get("ref_speedup") != anchor
