"""A package check's evidence names the error itself: a traceback's exception line, wherever the
log puts the traceback (indented, prefixed, chained), never its header."""

from __future__ import annotations

import shutil

from evaluator import package_check
from evaluator.package_check import first_error
from evaluator.task import load_task
from evaluator.trust import instrument
from evaluator.verdict import Status, Verdict
from tests.conftest import FIXTURES

TRACE = ["Traceback (most recent call last):", '  File "gpu_bench.py", line 95, in <module>', "    main()",
         "FileNotFoundError: [Errno 2] No such file or directory: '/opt/verifier-baseline/sgemm_kernel.cu'"]


def verdict_with_log(tmp_path, text: str) -> Verdict:
    (tmp_path / "logs/verifier").mkdir(parents=True)
    (tmp_path / "grader_output.log").write_text("MODE=noop cases=4/4 speedup=-1\n")
    (tmp_path / "logs/verifier/bench.log").write_text(text)
    return Verdict(task="kfc/x", mode="noop", backend="local", grader="hidden", status=Status.hard_fail,
                   log_dir=str(tmp_path), message="hard fail")


def test_the_exception_line_of_a_plain_traceback(tmp_path):
    assert first_error(verdict_with_log(tmp_path, "\n".join(TRACE))) == TRACE[-1]


def test_an_indented_or_prefixed_traceback_gives_its_exception_line(tmp_path):
    indented = "\n".join("    " + ln for ln in TRACE)
    assert first_error(verdict_with_log(tmp_path / "a", indented)) == TRACE[-1]
    prefixed = "\n".join("[run 1] " + ln for ln in TRACE)
    assert first_error(verdict_with_log(tmp_path / "b", prefixed)) == TRACE[-1]


def test_a_cut_traceback_is_passed_over_for_the_next_error(tmp_path):
    cut = "\n".join(TRACE[:2]) + "\nBENCH_FAIL square_1k: D: 12/100 elements out of tolerance\n"
    assert first_error(verdict_with_log(tmp_path, cut)).startswith("BENCH_FAIL square_1k")


def test_a_grading_kept_by_an_earlier_trust_screen_is_not_this_ones(tmp_path, monkeypatch):
    """The check key holds the trust screen's code: a verdict kept from before a change to the
    screen (a false alarm since fixed, say) is graded again, not reused."""
    task = load_task("kfc/toy-sum", [FIXTURES])
    before = package_check.check_key(task, ("hidden",))
    assert before == package_check.check_key(task, ("hidden",))
    copy = tmp_path / "trust"
    shutil.copytree(instrument.INSIDE.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(instrument, "INSIDE", copy / "inside")
    assert package_check.check_key(task, ("hidden",)) == before  # the same code, wherever it lies
    (copy / "written.py").write_text((copy / "written.py").read_text() + "\n# a rule changed\n")
    assert package_check.check_key(task, ("hidden",)) != before


OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 79.18 GiB "
       "of which 14.47 GiB is free.")


def test_a_card_out_of_memory_is_the_environment_not_the_package(tmp_path):
    """The frozen baseline's timing runs out of the card's memory in every mode (a card smaller than
    the package's): the package is not at fault. The line is found whatever the log's name."""
    from evaluator.package_check import ModeResult, card_memory, classify

    v = verdict_with_log(tmp_path / "a", "")
    (tmp_path / "a/logs/verifier/base_timing.out").write_text("\n".join(TRACE[:3] + [OOM, ""]))
    assert card_memory(v) == OOM
    assert card_memory(verdict_with_log(tmp_path / "b", "\n".join(TRACE))) == ""
    task = load_task("kfc/toy-sum", [FIXTURES])
    timing = ["baseline_timing_failed", "timing_invalid", "speedup_not_above_baseline"]

    def results(line: str) -> list[ModeResult]:
        return [ModeResult(grader="hidden", mode="noop", status="hard_fail", reward=0.0, reasons=["candidate_timing_failed", *timing],
                           card_memory=line),
                ModeResult(grader="hidden", mode="oracle", status="hard_fail", reward=0.0, reasons=timing, card_memory=line),
                ModeResult(grader="hidden", mode="negative", status="hard_fail", reward=0.0, reasons=["correctness_incomplete"])]
    klass, evidence, _ = classify(task, results(OOM), None)
    assert klass == "environment_differs" and "ran out of memory" in evidence and "16.00 GiB" in evidence, evidence
    assert classify(task, results(""), None)[0] == "package_defect"  # the same failure without the card's word
