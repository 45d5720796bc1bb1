"""A wrong answer says how it is wrong (evaluator/mismatch.py, inside/pesflow_mismatch.py): after a
dev grading failed by a correctness gate, pesflow calls the candidate and the frozen baseline on the
calls the guard kept and tells where their answers part; a correct child, the reference and the
baseline get no comparison, and the grading's figures and status are the same with the stage off."""

from __future__ import annotations


import numpy as np
import pytest

from evaluator import mismatch
from evaluator.candidate import CandidateSource
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import Evaluator
from evaluator.verdict import Status
from tests.conftest import FIXTURES, REPO, inside_module, needs_root

KERNEL = "toy/kernel.py"
OFF_BY_SEVEN = "def sum_squares(n):\n    return sum(i * i for i in range(n)) + 7\n"
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"


@pytest.fixture(scope="module")
def inside():
    yield from inside_module("pesflow_mismatch")


def test_an_array_off_by_a_known_amount_names_the_error_the_index_and_the_share(inside):
    want = np.linspace(1.0, 2.0, 24, dtype=np.float32).reshape(2, 3, 4)
    got = want.copy()
    got[1, 2, 3] += 0.5
    got[1, 0, 1] -= 0.25
    lines = inside.lines_of(got, want, "output")
    assert lines[0] == "output: float32[2, 3, 4]"
    assert "max abs error 0.5 (at index [1, 2, 3]" in lines[1] and "max rel error 0.25" in lines[1]
    assert "first index off [1, 0, 1]" in lines[2] and "2 of 24 elements off (8.33%" in lines[2]
    assert "|x-y| <= 1e-05 + 0.001*|y|" in lines[2]
    assert "axis 0: 1..1 (1 of 2), axis 1: 0..2 (2 of 3), axis 2: 1..3 (2 of 4)" in lines[3]
    assert inside.lines_of(want.copy(), want, "output") == []


def test_tensors_shapes_dtypes_ints_and_nan_are_told_apart(inside):
    torch = pytest.importorskip("torch")
    a = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    b = a.clone()
    b[2, 1] = 99
    lines = inside.lines_of((a.float(), a), (a.float(), b), "output")
    assert lines[0] == "output[1]: int64[3, 4]"
    assert "max abs error 90" in lines[1] and "first index off [2, 1]: 9 vs the baseline's 99" in lines[2]
    assert "1 of 12 elements off" in lines[2] and "exact" in lines[2]
    assert inside.lines_of(a[:2], a, "output") == [
        "output: int64[2, 4] vs the baseline's int64[3, 4]: the shapes differ, no element compared"]
    assert inside.lines_of(a.double(), a, "output") == ["output: float64[3, 4] vs the baseline's int64[3, 4]: the same values"]
    n = a.double().clone()
    n[0, 0] = float("nan")
    assert any("NaN or infinite on one side only" in ln for ln in inside.lines_of(n, a.double(), "output"))
    half = torch.ones(8, dtype=torch.bfloat16)
    assert inside.lines_of(half * 1.01, half.float(), "output") == [
        "output: bfloat16[8] vs the baseline's float32[8]: the same values"]  # 16 bits: the loose tolerance


def test_other_values_give_the_first_differing_path_and_both_values(inside):
    got = {"ids": [1, 2, 3, 5], "name": "abcdefX", "meta": (1, 2.0), "extra": 1}
    want = {"ids": [1, 2, 3, 4], "name": "abcdefg", "meta": [1, 2.0]}
    lines = inside.lines_of(got, want, "output")
    assert lines[0] == "output: keys only in the candidate's: ['extra']; only in the baseline's: []"
    assert lines[1] == "output['ids'][3]: 5 vs the baseline's 4; 1 of 4 items off, max abs error 1"
    assert lines[2].startswith("output['name']: str differs at character 6")
    assert lines[3] == "output['meta']: a tuple of 2 vs the baseline's list of 2"
    assert inside.lines_of([1, 2], [1, 2, 3], "output")[0] == "output: a list of 2 vs the baseline's list of 3"
    assert inside.lines_of(0.5, 0.5 + 1e-9, "output") == [] and inside.lines_of(np.float32(2.0), 2.0, "output") == []
    assert inside.lines_of(None, 3, "output") == ["output: None vs the baseline's 3 (a NoneType vs a int)"]
    # a list one item short: where the two part; records: the first that differs in full, and how many do
    assert inside.lines_of(list(range(44)), list(range(45)), "output") == [
        "output: a list of 44 vs the baseline's list of 45", "output: the first 44 items agree; the baseline's next: 44"]
    rows = [(i, i + 1, 0.5) for i in range(10)]
    bad = rows[:3] + [(3, 9, 0.5)] + rows[4:8] + [(8, 9, 0.75), (9, 10, 0.5)]
    assert inside.lines_of(bad, rows, "output") == [
        "output[3][1]: 9 vs the baseline's 4; 1 of 3 items off, max abs error 5",
        "output: 2 of 10 items differ (compared by index), the first at [3]"]


def test_inputs_are_described_by_kind_and_shape_never_by_value(inside):
    def f(x, n, names):
        return x
    text = inside.describe_inputs(f, (np.zeros((2, 5), np.float16), 123456789, ["secret-token"]), {})
    assert text == "x: float16[2, 5] array; n: int; names: list of 1 (str of length 12)"
    assert "123456789" not in text and "secret" not in text


def test_only_a_dev_grading_failed_by_a_correctness_gate_is_compared():
    assert mismatch.wanted("dev", "hard_fail", ["correctness_failed"])
    assert mismatch.wanted("dev", "hard_fail", ["correctness_trace_mismatch", "speedup_not_above_baseline"])
    assert not mismatch.wanted("hidden", "hard_fail", ["correctness_failed"])  # the hidden grader's inputs are not the model's
    assert not mismatch.wanted("dev", "hard_fail", ["import_failed"])
    assert not mismatch.wanted("dev", "ok", [])
    assert not mismatch.wanted("dev", "timeout", ["timeout"])


def test_the_lines_show_the_differing_calls_or_say_all_matched():
    calls = [{"fn": "f", "n": 3, "argv": ["h.py"], "said": "same", "inputs": "x: int"},
             {"fn": "g", "n": 1, "argv": ["h.py"], "said": "differs", "inputs": "x: int", "lines": ["output: 1 vs the baseline's 0"]},
             {"fn": "k", "said": "baseline_raised", "why": "NotImplementedError: stub"}]
    m = mismatch.said(calls, 0.5)
    assert (m.compared, m.differ) == (2, 1) and m.lines[1:] == ["- g (call 1 of `h.py`; inputs x: int):",
                                                               "  output: 1 vs the baseline's 0"]
    same = mismatch.said(calls[:1], 0.1)
    assert same.differ == 0 and "every answer compared matches" in same.lines[-1]
    assert mismatch.said(calls[2:], 0.1).why.startswith("no kept call could be answered by both (k: NotImplementedError")


@pytest.fixture(scope="module")
def evaluators(cache_dir, tmp_path_factory):
    on = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[FIXTURES],
                   log_root=tmp_path_factory.mktemp("mismatch-on"))
    off = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir)), mismatch_sec=0), tasks_roots=[FIXTURES],
                    log_root=tmp_path_factory.mktemp("mismatch-off"))
    yield on, off
    on.close()
    off.close()


def figures(v) -> tuple:
    return v.status, v.hard_fail_reasons, v.reward, v.speedup, v.tests, v.trust.suspect, v.trust.reasons


@needs_root
def test_a_wrong_toy_child_is_told_its_error_and_its_figures_stay_the_grader_s(evaluators):
    on, off = evaluators
    v = on.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: OFF_BY_SEVEN}), grader="dev", explain=True)
    assert v.status == Status.hard_fail and v.hard_fail_reasons == ["correctness_failed"]
    assert v.mismatch is not None and v.mismatch.differ >= 1, v.mismatch
    assert any("output: " in ln and "(abs error 7" in ln for ln in v.mismatch.lines), v.mismatch.lines
    assert any("inputs n: int" in ln for ln in v.mismatch.lines)
    w = off.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: OFF_BY_SEVEN}), grader="dev", explain=True)
    assert figures(w) == figures(v) and w.mismatch is not None and w.mismatch.why.startswith("off")
    # not asked (a package's check, a test of a hostile candidate): not paid for, and the same figures
    u = on.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: OFF_BY_SEVEN}), grader="dev")
    assert u.mismatch is None and figures(u) == figures(v)


@needs_root
@pytest.mark.parametrize("how", ["oracle", "noop", "correct"])
def test_a_correct_child_the_reference_and_the_baseline_get_no_comparison(evaluators, how):
    on, _ = evaluators
    if how == "correct":
        v = on.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: FAST}), grader="dev", explain=True)
    else:
        v = on.evaluate("kfc/toy-sum", mode=how, grader="dev", explain=True)
    assert v.correct and v.mismatch is None


SSM = "kfc/ssm-selective-scan-firstorder"
SSM_FILE = "state_space_scan.py"


@needs_root
@pytest.mark.slow
def test_a_tensor_kernel_off_at_one_element_names_its_error_index_and_share(cache_dir, tmp_path):
    """The bundled GPU package on its CPU path: a candidate whose output is the baseline's with
    0.5 added at one element."""
    pytest.importorskip("torch")
    base = (REPO / "tasks" / SSM / "task" / "environment" / "repo" / SSM_FILE).read_text()
    tail = "    return torch.stack(outputs, dim=1).to(x.dtype)"
    assert tail in base
    wrong = base.replace(tail, "    y = torch.stack(outputs, dim=1).to(x.dtype)\n    y[0, 1, 2] += 0.5\n    return y")
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), log_root=tmp_path)
    try:
        v = ev.evaluate(SSM, candidate=CandidateSource(files={SSM_FILE: wrong}), grader="dev", device="cpu", explain=True)
    finally:
        ev.close()
    assert not v.correct and v.mismatch is not None and v.mismatch.differ >= 1, (v.hard_fail_reasons, v.mismatch)
    text = "\n".join(v.mismatch.lines)
    assert "max abs error 0.5 (at index [0, 1, 2]" in text and "first index off [0, 1, 2]" in text, text
    assert " 1 of " in text and "elements off" in text, text
