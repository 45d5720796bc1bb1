"""kfc/sgemm-register-blocktiling (a CUDA .cu scope) graded on a machine without a GPU.

With --device cpu the grader compiles the frozen baseline and the candidate with nvcc
(-arch=sm_90), scans the source, link-checks the library and loads it: nothing can run
on a GPU, so the reward is 0 and a numerically wrong kernel (the negative) still passes.
What must hold: noop, oracle and negative compile and pass those gates; a cuBLAS
candidate is stopped by the scan; one that does not compile is named; a library that
leaves a symbol for the host process to provide is stopped by the link check.
"""

import shutil

import pytest

from evaluator.evaluation import CandidateSource
from evaluator.task import load_task
from evaluator.verdict import Status
from tests.conftest import needs_root, scores_nothing

TASK = "kfc/sgemm-register-blocktiling"
SCOPE = "sgemm_kernel.cu"
pytestmark = [needs_root, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")]


@pytest.fixture(scope="module")
def ev(cache_dir, tmp_path_factory):
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator

    e = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), log_root=tmp_path_factory.mktemp("sgemm"))
    yield e
    e.close()


@pytest.fixture(scope="module")
def baseline() -> str:
    return (load_task(TASK).root / "environment" / "repo" / SCOPE).read_text()


def grade(ev, source: str):
    return ev.evaluate(TASK, candidate=CandidateSource(files={SCOPE: source}), grader="hidden", device="cpu")


@pytest.mark.parametrize("mode", ["noop", "oracle", "negative"])
def test_reviewer_modes_compile_and_pass_the_static_gates(ev, mode):
    v = ev.evaluate(TASK, mode=mode, grader="hidden", device="cpu")
    assert v.status == Status.ok and v.hard_fail_reasons == [], (v.message, v.raw.get("notes"))
    assert v.reward == 0.0 and v.speedup is None and v.hardware == "cpu"
    assert v.raw["device"] == "cpu" and v.raw["build"]["arch"] == ["-arch=sm_90"]
    assert v.tests.total >= 8 and v.tests.passed == v.tests.total
    gates = v.raw["gates"]
    for name in ("forbidden_pattern", "baseline_called", "compile_failed", "import_failed", "timer_patched",
                 "error_contract_failed"):
        assert gates[name] is True, name
    # correctness and timing never ran: a wrong kernel is only caught on a GPU, and the verdict says so
    assert gates["correctness_failed"] is None and gates["timing_failed"] is None
    assert any("only be checked on a GPU" in n for n in v.raw["notes"])
    assert v.raw["build"]["candidate_is_baseline"] == (mode == "noop")


def test_a_cublas_candidate_fails_the_scan(ev, baseline):
    with_include = "#include <cublas_v2.h>\n" + baseline
    v = grade(ev, with_include)
    assert v.status == Status.hard_fail and scores_nothing(v)
    assert "forbidden_pattern:include:cublas_v2.h" in v.hard_fail_reasons
    assert "forbidden_pattern:blas_library" in v.hard_fail_reasons
    assert v.raw["gates"]["compile_failed"] is None  # stopped before anything was built

    # no include at all: the call alone, declared by hand, is enough to be refused
    declared = baseline.replace(
        'extern "C" int sgemm_launch(',
        'extern "C" int cublasSgemm_v2(void*, int, int, int, int, int, const float*, const float*, int,\n'
        '                              const float*, int, const float*, float*, int);\n'
        'extern "C" int sgemm_launch(')
    assert declared != baseline
    v = grade(ev, declared)
    assert v.status == Status.hard_fail and v.hard_fail_reasons == ["forbidden_pattern:blas_library"]


def test_a_candidate_that_does_not_compile_is_named(ev, baseline):
    broken = baseline.replace("float acc = 0.0f;", "float acc = 0.0f")
    assert broken != baseline
    v = grade(ev, broken)
    assert v.status == Status.hard_fail and v.hard_fail_reasons == ["compile_failed"]
    assert any(n.startswith("nvcc:") and "error" in n for n in v.raw["notes"])
    assert v.tests.passed < v.tests.total


def test_the_compiler_s_message_is_what_the_model_is_shown(ev, baseline):
    """A dev grading's nvcc error, with its line, reaches the model (issue 38): in the package's
    own loop feedback and the dev engine's failed check (search.feedback engineer shows both)."""
    broken = baseline.replace("float acc = 0.0f;", "float acc = 0.0f")
    v = ev.evaluate(TASK, candidate=CandidateSource(files={SCOPE: broken}), grader="dev", device="cpu")
    assert v.hard_fail_reasons == ["compile_failed"]
    said = [d for d in v.dev_details if "nvcc" in d and f"{SCOPE}(" in d and "error" in d]
    assert said and 'expected a ";"' in said[0], v.dev_details
    assert v.feedback and 'expected a ";"' in v.feedback, v.feedback


def test_a_symbol_left_for_the_process_fails_the_link_check(ev, baseline):
    # Declared but not defined: it would be resolved at load time from whatever the host
    # process holds (libtorch, cuBLAS, the baseline). The link check refuses that.
    sneaky = baseline.replace(
        'extern "C" int sgemm_launch(',
        'extern "C" int gemm_from_somewhere_else(int);\n'
        'extern "C" int sgemm_launch(').replace(
        "if (M == 0 || N == 0) return static_cast<int>(cudaSuccess);",
        "if (M == 0 || N == 0) return gemm_from_somewhere_else(K);")
    v = grade(ev, sneaky)
    assert v.status == Status.hard_fail
    assert v.hard_fail_reasons == ["forbidden_pattern:unresolved_symbol:gemm_from_somewhere_else"]
