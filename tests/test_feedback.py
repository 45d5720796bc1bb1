"""What a grading tells the model (evaluator/feedback.py, agent/search/prompts.py verdict_text):
the candidate's own errors, the dev engine's failed checks and workloads, and the two protocols'
renderings. Pure functions on texts and files; the gradings and searches that produce them are in
tests/test_feedback_search.py."""

from __future__ import annotations

import json

import pytest

from agent.population.database import Solution
from agent.search.prompts import verdict_text
from agent.search.protocol import BENCHMARK, ENGINEER, LINE
from evaluator.dev_details import dev_details
from evaluator.feedback import candidate_diagnostics, loop_env

SCOPE = ["toy/kernel.py", "csrc/*.cu"]

TRACEBACK = """\
running case 3
Traceback (most recent call last):
  File "/opt/loop/private/dev_tests/grade.py", line 21, in <module>
    if cand.sum_squares(n) == want(n):
  File "/app/repo/toy/kernel.py", line 4, in sum_squares
    return _table(n)[n]
  File "/usr/lib/python3.11/functools.py", line 9, in wrapper
    return f(*a)
  File "/app/repo/toy/kernel.py", line 9, in _table
    raise RuntimeError("the table must be built with BLOCK=64 (code K9Q)")
RuntimeError: the table must be built with BLOCK=64 (code K9Q)
done
"""

RAISED_IN_THE_GRADER = """\
Traceback (most recent call last):
  File "/app/repo/toy/kernel.py", line 4, in sum_squares
    return helper(n)
  File "/tests/grade.py", line 40, in helper
    assert got == 123456789, "hidden size 123456789 expected"
AssertionError: hidden size 123456789 expected
"""

COMPILER = """\
nvcc -O3 -c csrc/scan.cu -o scan.o
csrc/scan.cu(41): error: identifier "blockDimx" is undefined
      int i = blockIdx.x * blockDimx + threadIdx.x;
                           ^
/usr/include/cuda/other.h(3): error: something in a header that is not the candidate's
kernels/other.cpp:12:5: error: not in the scope either
"""


def test_a_traceback_keeps_the_candidate_s_frames_and_its_message():
    got = candidate_diagnostics(TRACEBACK, SCOPE)
    assert got[0] == "Traceback (most recent call last):"
    assert "  ... 1 frame(s) outside the candidate's files" in got  # the grader's frame, cut to one line
    assert sum("toy/kernel.py" in ln for ln in got) == 2 and "    raise RuntimeError(\"the table must be built with BLOCK=64 (code K9Q)\")" in got
    assert got[-1] == "RuntimeError: the table must be built with BLOCK=64 (code K9Q)"
    assert not any("grade.py" in ln or "functools" in ln or "want(n)" in ln for ln in got)


def test_a_message_raised_in_the_grader_s_files_is_withheld():
    got = candidate_diagnostics(RAISED_IN_THE_GRADER, SCOPE)
    assert any("toy/kernel.py" in ln for ln in got)
    assert not any("123456789" in ln for ln in got), got
    assert got[-1].startswith("AssertionError: (its message withheld")


def test_compiler_errors_that_name_the_candidate_s_files_with_their_context():
    got = candidate_diagnostics(COMPILER, SCOPE)
    assert got[0] == 'csrc/scan.cu(41): error: identifier "blockDimx" is undefined'
    assert "int i = blockIdx.x * blockDimx + threadIdx.x;" in got[1]
    assert not any("other.h" in ln or "other.cpp" in ln for ln in got)


def test_nothing_of_a_traceback_that_never_passes_through_the_candidate():
    text = 'Traceback (most recent call last):\n  File "/tests/grade.py", line 3, in <module>\n    x = 1\nKeyError: secret\n'
    assert candidate_diagnostics(text, SCOPE) == []


def test_diagnostics_are_bounded_and_said_once():
    got = candidate_diagnostics(TRACEBACK * 200, SCOPE)
    assert len(got) <= 41 and sum(len(x) for x in got) <= 3300
    assert got.count("RuntimeError: the table must be built with BLOCK=64 (code K9Q)") == 1


def test_dev_details_read_failed_checks_and_workloads_never_an_anchor(tmp_path):
    dev = tmp_path / "logs" / "loop" / "dev"
    dev.mkdir(parents=True)
    (dev / "correctness_results.json").write_text(json.dumps({"cases": [
        {"name": "dev_a", "passed": True, "message": None},
        *[{"name": f"dev_{i}", "passed": False, "message": "RuntimeError: boom"} for i in range(6)],
        {"name": "dev_z", "passed": False, "message": "ValueError: other"}]}))
    (dev / "benchmark_results.json").write_text(json.dumps({
        "workloads": [{"name": "w-ir", "speedup": 1.00042, "candidate_ir": 468894901, "baseline_ir": 469091229,
                       "ref_ir": 111}], "aggregate_speedup": 1.0, "ref_speedup": 4.125}))
    got = dev_details(tmp_path)
    assert got[0] == "failed checks dev_0, dev_1, dev_2, dev_3 and 2 more: RuntimeError: boom"
    assert got[1] == "failed check dev_z: ValueError: other"
    assert got[2] == "workload w-ir: baseline 469091229 ir, candidate 468894901 ir (1.0004x)"
    assert not any("4.125" in ln or "111" in ln for ln in got)
    # suites that count their failures (the benchmark's dev engines)
    (dev / "correctness_results.json").write_text(json.dumps({"suites": [
        {"name": "identity-suite", "actual_case_count": 12, "passed": 9, "failed": 3, "hard_fail_reasons": ["hidden_correctness_failed"]}]}))
    assert dev_details(tmp_path)[0] == "failed check identity-suite (3 of 12 cases failed): hidden_correctness_failed"


def test_the_search_s_count_and_best_travel_as_the_grading_s_environment():
    assert loop_env(None) == {}
    env = loop_env({"count": 3, "best": {"submission": 2, "reward": 0.5}})
    assert env["PESFLOW_LOOP_COUNT"] == "3" and json.loads(env["PESFLOW_LOOP_BEST"]) == {"submission": 2, "reward": 0.5}


def _sol(**k) -> Solution:
    base = dict(id="r01-c0", parent_id="baseline", island=0, round=1, files={"toy/kernel.py": "x"}, content_hash="h" * 16,
                status="hard_fail", hard_fail_reasons=["correctness_failed"], tests_passed=3, tests_total=5)
    return Solution(**{**base, **k})


def test_benchmark_shows_the_package_s_lines_alone_engineer_adds_what_an_engineer_reads():
    lines = "submission 2/16\ncorrectness: FAIL\nfailing_invariant: output_matches_reference"
    s = _sol(feedback=lines, diagnostics=["RuntimeError: K9Q"], dev_details=["failed check dev_1: RuntimeError: K9Q"])
    bench = verdict_text(s, BENCHMARK)
    assert bench == "the package's feedback:\n    submission 2/16\n    correctness: FAIL\n    failing_invariant: output_matches_reference"
    eng = verdict_text(s, ENGINEER)
    assert eng.startswith("FAILED (hard_fail): correctness_failed; 3/5 correctness cases passed\n")
    assert lines.splitlines()[2] in eng and "K9Q" in eng and "the dev engine's details" in eng
    # no package lines (a hidden grading, a package without a loop): pesflow's one line under either
    bare = _sol()
    assert verdict_text(bare, BENCHMARK) == verdict_text(bare, ENGINEER) == verdict_text(bare, LINE)
    # a grading whose figures do not count is said by why, whatever the protocol
    flagged = _sol(status="ok", hard_fail_reasons=[], speedup=9.0, feedback=lines,
                   trust={"suspect": True, "reasons": ["timer_replaced: perf_counter"], "families": ["timer_replaced"]})
    assert "NOT COUNTED" in verdict_text(flagged, BENCHMARK) and "9.0" not in verdict_text(flagged, BENCHMARK)



def test_a_run_s_protocol_is_the_one_its_config_names_and_line_is_no_run_s():
    """search.feedback's names (run.json keeps them) choose the protocol objects; the one default
    is the config's; `line` is a protocol lessons quote, not a choice."""
    from typing import get_args

    from agent.config import SearchConfig, load_config
    from agent.search.protocol import DEFAULT, PROTOCOLS, named
    from agent.search.roles import Context

    choices = get_args(SearchConfig.model_fields["feedback"].annotation)
    assert set(choices) == set(PROTOCOLS) - {"line"} and all(named(c).name == c for c in choices)
    assert DEFAULT is named(SearchConfig().feedback) is named(load_config().search.feedback)
    assert Context(instruction="i", title="t", scope=[]).protocol is DEFAULT
    with pytest.raises(ValueError, match="unknown feedback protocol"):
        named("verbose")

def test_stop_rules_read_the_best_of_each_round():
    from agent.search.fixes import stop_rule
    rounds = [{"round": 0, "best_id": "baseline", "speedup": 1.0}, {"round": 1, "best_id": "r01-c0", "speedup": 2.0},
              {"round": 2, "best_id": "r01-c0", "speedup": 2.0}, {"round": 3, "best_id": "r01-c0", "speedup": 2.0}]
    assert stop_rule(rounds, 2, None) == "patience" and stop_rule(rounds[:3], 2, None) is None
    assert stop_rule(rounds, 3, None) is None  # round 1 was a new best: two rounds without one, not three
    assert stop_rule(rounds, None, 1.5) == "target_reached" and stop_rule(rounds, None, 3.0) is None
    dev = [{"round": 0, "best_id": "baseline", "speedup": None, "dev": {"value": 0.4, "kind": "vs_oracle"}}]
    assert stop_rule(dev, None, 0.3) == "target_reached" and stop_rule(dev, None, 0.5) is None
    assert stop_rule([], 1, 1.0) is None


def test_the_executor_sees_the_inspirations_as_diffs_within_its_budget():
    from agent.search.roles import Context, executor_prompt
    ctx = Context(instruction="Make it fast.", title="t", scope=["toy/kernel.py"], inspiration_chars=300)
    parent = _sol(id="baseline", status="ok", hard_fail_reasons=[], files={"toy/kernel.py": "def f():\n    return 1\n"})
    insp = [_sol(id=f"r01-c{i}", status="ok", hard_fail_reasons=[], speedup=1.5 + i,
                 files={"toy/kernel.py": f"def f():\n    return {i} + 1  # variant {i}\n"}) for i in range(40)]
    got = executor_prompt(ctx, parent, "a plan", 0, 2, insp)
    assert "## r01-c0: correct; speedup 1.500x" in got and "+    return 0 + 1  # variant 0" in got
    assert "r01-c39" not in got and len(got) < 6000  # bounded, not one section per inspiration
    assert "(none)" in executor_prompt(ctx, parent, "a plan", 0, 2, [])


def test_the_machine_s_ceilings_are_measured_once_and_cached(tmp_path):
    from evaluator import ceilings
    got = ceilings.facts("cpu", tmp_path, small=True)
    assert got["source"] == "measured by pesflow" and got["cores"] >= 1 and got["bandwidth_gbs"] > 0 and got["tflops"]["fp32"] > 0
    cached = list((tmp_path / "machine").glob("cpu-*.json"))
    assert len(cached) == 1
    cached[0].write_text(json.dumps({**got, "bandwidth_gbs": 12345.0}))  # read back, not measured again
    assert ceilings.facts("cpu", tmp_path)["bandwidth_gbs"] == 12345.0
    lines = ceilings.describe(got)
    assert lines[0].endswith(f"({got['cores']} cores)") and lines[1].startswith("memory bandwidth: ")
    # a part pesflow cannot measure from here: the datasheet's figures, said so
    h200 = ceilings.describe(ceilings.known("NVIDIA H200"))
    assert h200[1] == "memory bandwidth: 4800 GB/s (datasheet (H200), not measured)" and "bf16 989 TFLOP/s" in h200[2]
    assert ceilings.known("NVIDIA H100 80GB HBM3")["bandwidth_gbs"] == 3350 and ceilings.known("Quadro K600") is None


def test_a_resumed_search_counts_the_dev_submissions_its_journal_holds():
    from agent.search.grading import Grading
    from evaluator.verdict import Verdict

    from evaluator.scoring import DevFigure

    def verdict(grader: str, ok: bool, reward: float, reused: bool = False) -> dict:
        # the loop keeps the dev engine's own figures (issue 49), here its reward.json's
        own = DevFigure(kind="vs_baseline", key="speedup", value=2.0 * (1 + reward), engine_reward=reward, engine_speedup=2.0 * (1 + reward))
        v = Verdict(task="t", mode="candidate", backend="local", grader=grader, status="ok" if ok else "hard_fail",
                    hard_fail_reasons=[] if ok else ["correctness_failed"], reward=reward, speedup=2.0 * (1 + reward), dev=own)
        return {"kind": "verdict", "data": {"grader": grader, "reused": reused, "verdict": v.model_dump(mode="json")}}

    g = Grading(None, None, None, "dev")  # type: ignore[arg-type]
    g.count_recorded([verdict("dev", True, 0.2), verdict("dev", False, 0.9), verdict("hidden", True, 0.5),
                      verdict("dev", True, 0.5), verdict("dev", True, 0.5, reused=True), verdict("dev", True, 0.4)])
    assert g.dev_submissions == 4  # the hidden grading and the one served again are not submissions
    assert g.dev_best == {"submission": 3, "reward": 0.5, "speedup": 3.0, "tree": ""}  # correct, strictly greater
    assert g._submission("dev") == {"count": 5, "best": g.dev_best} and g._submission("hidden") is None


def test_a_gpu_that_cannot_be_measured_gets_its_datasheet_by_its_driver_name(tmp_path, monkeypatch):
    from evaluator import ceilings
    monkeypatch.setattr(ceilings, "_name", lambda device: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(ceilings, "measure", lambda device, small=False: None)
    got = ceilings.facts("cuda", tmp_path)
    assert got["bandwidth_gbs"] == 3350 and got["source"] == "datasheet (H100 80GB HBM3), not measured"
    assert not (tmp_path / "machine").exists()  # a datasheet is not a measurement: nothing cached
