"""The GPU graders' anti-cheat gates, exercised on the CPU path (what CI can run): each cheat
on the selective-scan task ends with a named hard fail. (Side-stream escape and the roofline
bound need a GPU: see benchmarks/gpu/.)"""

import pytest

from evaluator.evaluation import CandidateSource
from evaluator.task import load_task
from evaluator.verdict import Status
from tests.conftest import needs_root, scores_nothing

TASK = "kfc/ssm-selective-scan-firstorder"
SCOPE = "state_space_scan.py"
pytestmark = [needs_root, pytest.mark.slow]
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

CHEATS = {
    "timer_patched": "import time as _t\n_t.perf_counter = lambda: 0.0\n_t.perf_counter_ns = lambda: 0\n",
    "inputs_mutated": ("_honest = state_space_scan\n\ndef state_space_scan(A, B, C, x):\n"
                       "    y = _honest(A, B, C, x)\n    A.mul_(0.5)\n    return y\n"),
    "output_cached": ("_honest = state_space_scan\n_seen = {}\n\ndef state_space_scan(A, B, C, x):\n"
                      "    key = (tuple(A.shape), A.dtype)\n    if key not in _seen:\n"
                      "        _seen[key] = _honest(A, B, C, x)\n    return _seen[key].clone()\n"),
    "baseline_called": ("import importlib.util as _u\n_s = _u.spec_from_file_location('fb', '/opt/verifier-baseline/state_space_scan.py')\n"
                        "_m = _u.module_from_spec(_s)\n_s.loader.exec_module(_m)\nstate_space_scan = _m.state_space_scan\n"),
    "forbidden_pattern": "from torch._higher_order_ops.associative_scan import associative_scan  # noqa\n",
}
# What else a gate may be named when the same cheat trips an earlier, cheaper one.
ALSO = {"output_cached": ("correctness_failed",), "baseline_called": ("forbidden_pattern",),
        "timer_patched": ("forbidden_pattern",), "inputs_mutated": ("correctness_failed",)}


@pytest.fixture(scope="module")
def ev(cache_dir, tmp_path_factory):
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator

    e = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), log_root=tmp_path_factory.mktemp("gpu-cheats"))
    yield e
    e.close()


@pytest.mark.parametrize("gate", list(CHEATS))
def test_cheat_is_caught_by_name(ev, gate):
    base = (load_task(TASK).root / "environment" / "repo" / SCOPE).read_text()
    v = ev.evaluate(TASK, candidate=CandidateSource(files={SCOPE: base + "\n\n" + CHEATS[gate]}), grader="hidden", device="cpu")
    assert v.status == Status.hard_fail and scores_nothing(v), (v.status, v.message)
    names = (gate, *ALSO.get(gate, ()))
    assert any(r.startswith(names) for r in v.hard_fail_reasons), v.hard_fail_reasons
