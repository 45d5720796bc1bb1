"""What a dev grading's engine tells the model (evaluator/feedback.py dev_details, candidate_diagnostics),
in each spelling the benchmark's dev engines write: their correctness_results.json suites and cases,
benchmark_results.json workloads, per-case log lines (CASE_FAIL, shape=... baseline_X= candidate_X=,
BENCH_FAIL), `<TOKEN>_RESULT {...}` verdict lines and reward.json's one pair. The products here are
synthetic, written as those engines write them (no package is read)."""

from __future__ import annotations

import json
from pathlib import Path

from evaluator.dev_details import dev_details
from evaluator.feedback import candidate_diagnostics, dev_output


def _dev(tmp_path: Path, where: str = "logs/loop/dev") -> Path:
    d = tmp_path / where
    d.mkdir(parents=True, exist_ok=True)
    return d


def _suite(expected: int, actual: int) -> dict:
    # as a kernelbench dev test.sh writes it: actual_case_count is the count of CASE_PASS lines
    return {"schema_version": "kernelbench_correctness_results_v1", "suites": [{
        "name": "hidden-identity-suite", "visibility_class": "hidden_supplement", "expected_case_count": expected,
        "actual_case_count": actual, "passed": actual, "failed": expected - actual,
        "hard_fail_reasons": ["hidden_correctness_failed"]}], "correctness_ok": False}


def test_a_suite_s_count_is_its_failed_cases_of_its_size(tmp_path):
    d = _dev(tmp_path)
    (d / "correctness_results.json").write_text(json.dumps(_suite(12, 9)))
    assert dev_details(tmp_path) == ["failed check hidden-identity-suite (3 of 12 cases failed): hidden_correctness_failed"]
    (d / "correctness_results.json").write_text(json.dumps(_suite(12, 2)))  # once read as "10 of 2"
    assert dev_details(tmp_path)[0].startswith("failed check hidden-identity-suite (10 of 12 cases failed)")
    # no size written: passed + failed; a size under the failed count is not one
    (d / "correctness_results.json").write_text(json.dumps({"suites": [{"name": "s", "passed": 2, "failed": 3, "total": 1}]}))
    assert dev_details(tmp_path) == ["failed check s (3 of 5 cases failed): failed"]
    (d / "correctness_results.json").write_text(json.dumps({"suites": [{"name": "s", "failed": 3, "total": 1}]}))
    assert dev_details(tmp_path) == ["failed check s (3 cases failed): failed"]


def test_a_figure_the_failed_candidate_left_at_zero_is_not_a_measurement(tmp_path):
    d = _dev(tmp_path)
    w = {"name": "signature-identity-count", "speedup": 1.0, "candidate_recompiles": 0, "baseline_recompiles": 0,
         "completion_counters": {"cases": "9/12"}}
    (d / "benchmark_results.json").write_text(json.dumps({"workloads": [w], "aggregate_speedup": 1.0, "ref_speedup": 2.75}))
    assert dev_details(tmp_path) == []  # neither measured: nothing said
    (d / "benchmark_results.json").write_text(json.dumps({"workloads": [{**w, "baseline_recompiles": 48}]}))
    assert dev_details(tmp_path) == ["workload signature-identity-count: baseline 48 recompiles, candidate not measured"]
    (d / "benchmark_results.json").write_text(json.dumps({"workloads": [{**w, "baseline_recompiles": 48, "candidate_recompiles": 12,
                                                                         "speedup": 4.0}]}))
    assert dev_details(tmp_path) == ["workload signature-identity-count: baseline 48 recompiles, candidate 12 recompiles (4x)"]


# A GPU dev engine's bench.log: the bench script run three times (stderr and stdout appended), one
# line per shape with its baseline and candidate medians, then the geomean.
BENCH_LOG = """\
shape=base B=4 L=1024 D=512 N=16 baseline_ms=48.2000 candidate_ms=2.1000 ratio=22.9524 seq_depth=1024 log_depth=10 state_elems=32768
shape=long_L B=2 L=4096 D=256 N=16 baseline_ms=95.1000 candidate_ms=3.0000 ratio=31.7000 seq_depth=4096 log_depth=12 state_elems=8192
shape=wide_state B=4 L=1024 D=256 N=64 baseline_ms=40.0000 candidate_ms=50.0000 ratio=0.8000 seq_depth=1024 log_depth=10 state_elems=65536
shape=many_batch B=16 L=512 D=256 N=16 baseline_ms=30.0000 candidate_ms=1.5000 ratio=20.0000 seq_depth=512 log_depth=9 state_elems=65536
speedup=9.1234
shape=base B=4 L=1024 D=512 N=16 baseline_ms=48.0000 candidate_ms=2.0000 ratio=24.0000 seq_depth=1024 log_depth=10 state_elems=32768
shape=long_L B=2 L=4096 D=256 N=16 baseline_ms=95.0000 candidate_ms=3.1000 ratio=30.6452 seq_depth=4096 log_depth=12 state_elems=8192
shape=wide_state B=4 L=1024 D=256 N=64 baseline_ms=40.2000 candidate_ms=50.1000 ratio=0.8024 seq_depth=1024 log_depth=10 state_elems=65536
shape=many_batch B=16 L=512 D=256 N=16 baseline_ms=30.1000 candidate_ms=1.6000 ratio=18.8125 seq_depth=512 log_depth=9 state_elems=65536
speedup=9.0001
shape=base B=4 L=1024 D=512 N=16 baseline_ms=47.9000 candidate_ms=2.2000 ratio=21.7727 seq_depth=1024 log_depth=10 state_elems=32768
shape=long_L B=2 L=4096 D=256 N=16 baseline_ms=95.3000 candidate_ms=2.9000 ratio=32.8621 seq_depth=4096 log_depth=12 state_elems=8192
shape=wide_state B=4 L=1024 D=256 N=64 baseline_ms=39.9000 candidate_ms=49.8000 ratio=0.8012 seq_depth=1024 log_depth=10 state_elems=65536
shape=many_batch B=16 L=512 D=256 N=16 baseline_ms=29.9000 candidate_ms=1.4000 ratio=21.3571 seq_depth=512 log_depth=9 state_elems=65536
speedup=9.2000
"""


def test_per_shape_figures_from_the_engine_s_bench_log(tmp_path):
    d = _dev(tmp_path)
    (d / "benchmark_results.json").write_text(json.dumps({"workloads": [{"name": "state-space-scan-geomean-4shapes", "speedup": 9.1234,
                                                                         "completion_counters": {"cases": "12/12"}}],
                                                          "aggregate_speedup": 9.1234, "ref_speedup": 103.1823}))
    (d / "bench.log").write_text(BENCH_LOG)
    got = dev_details(tmp_path)
    # of the three repeats, the one whose ratio is the median, its times and ratio together (never one
    # repeat's times beside another's ratio: a candidate faster in its times and "slower" in its ratio)
    assert got == ["workload base: baseline 48.2 ms, candidate 2.1 ms (22.952x)",
                   "workload long_L: baseline 95.1 ms, candidate 3 ms (31.7x)",
                   "workload wide_state: baseline 39.9 ms, candidate 49.8 ms (0.8012x, candidate slower)",
                   "workload many_batch: baseline 30 ms, candidate 1.5 ms (20x)"]
    assert not any("103" in ln for ln in got)


def test_other_per_case_spellings_of_the_logs(tmp_path):
    d = _dev(tmp_path)
    (d / "bench.log").write_text(
        "config=c0 n=8 rows=4096 D=1024 F=4096 baseline_ms=12.5000 candidate_ms=10.0000 ratio=1.2500 h2d_bytes=1\n"
        "shape=s0 N=4096 V=32000 dtype=torch.float16 baseline_peak=524288 candidate_peak=1048576 ratio=0.5000\n"
        "shape=g0 M=64 N=64 K=64 baseline_ms=1.0 candidate_ms=0.5 ratio=2.0 baseline_gflops=10.0 candidate_gflops=20.0\n"
        "BENCH_FAIL s1: 17 y elements disagree with baseline\nspeedup=0.0\n")
    got = dev_details(tmp_path)
    assert got == ["workload c0: baseline 12.5 ms, candidate 10 ms (1.25x)",
                   "workload s0: baseline 524288 peak, candidate 1048576 peak (0.5x, candidate worse)",
                   "workload g0: baseline 1 ms, candidate 0.5 ms (2x)",  # the time, not the throughput
                   "workload s1: candidate not measured (17 y elements disagree with baseline)"]


def test_failed_cases_named_with_their_messages_grouped(tmp_path):
    d = _dev(tmp_path)
    (d / "correctness_results.json").write_text(json.dumps(_suite(12, 8)))
    (d / "correctness.log").write_text(
        "CASE_PASS returns_string_for_various\n"
        "CASE_FAIL distinct_dtypes_distinct_keys: AssertionError: different operand dtypes collided\n"
        "Traceback (most recent call last):\n  File \"/opt/loop/private/dev_tests/t.py\", line 9, in main\n    fn(mod)\n"
        "AssertionError: different operand dtypes collided\n"
        "CASE_FAIL distinct_shapes_distinct_keys: AssertionError: different operand dtypes collided\n"
        "CASE_FAIL many_programs: AssertionError: expected 8 distinct identities, got 7\n"
        "CASE_FAIL empty_signature\n"
        "CASES_PASSED=8/12\n")
    assert dev_details(tmp_path) == [
        "failed check hidden-identity-suite (4 of 12 cases failed): hidden_correctness_failed",
        "failed cases distinct_dtypes_distinct_keys, distinct_shapes_distinct_keys: AssertionError: different operand dtypes collided",
        "failed case many_programs: AssertionError: expected 8 distinct identities, got 7",
        "failed case empty_signature: failed"]


def test_a_verifier_s_result_lines_and_its_whole_run_pair(tmp_path):
    ver = _dev(tmp_path, "logs/verifier")
    _dev(tmp_path)  # the engine's normalized files: a speedup alone
    (tmp_path / "logs/loop/dev/benchmark_results.json").write_text(json.dumps({"aggregate_speedup": 0.0}))
    (ver / "correctness.out").write_text(
        'WRO_RESULT {"correctness_ok": false, "correctness_frac": 0.5, "cases": 4, "passed": 2, '
        '"failures": ["units:ValueError: bad unit", "zero_rows:IndexError: out of range"]}\n')
    assert dev_details(tmp_path) == ["failed check correctness (2 of 4 cases failed): failed",
                                     "failed case units: ValueError: bad unit", "failed case zero_rows: IndexError: out of range"]
    (ver / "correctness.out").write_text(
        'WRO_CAUSAL_RESULT {"correctness_frac": 0.75, "n_cases": 8, "n_failed": 2, "failed": {"fifo_tie": "order differs"}}\n'
        'WRE_RESULT {"mode": "correctness", "correctness_ok": false, "detail": "cache-probe stream A wrong"}\n')
    assert dev_details(tmp_path) == ["failed check correctness (2 of 8 cases failed): failed",
                                     "failed check correctness: cache-probe stream A wrong", "failed case fifo_tie: order differs"]
    # no message: the invariants it says are false
    (ver / "correctness.out").write_text('WRO_RESULT {"correctness_ok": false, "pairs_exact": false, "nonempty": true, '
                                         '"n_pairs": 125, "mode": "correctness"}\n')
    assert dev_details(tmp_path) == ["failed check correctness: pairs_exact false"]
    # a correct run: the whole run's pair from reward.json, never the oracle's nor the anchor
    (ver / "correctness.out").write_text('WRO_RESULT {"mode": "correctness", "correctness_ok": true, "detail": "all passed"}\n')
    (ver / "reward.json").write_text(json.dumps({"reward": 1.31, "speedup": 1.31, "baseline_ms": 52.4, "candidate_ms": 40.0,
                                                 "oracle_ms": 32.68, "ref_speedup": 2.4, "hard_fails": []}))
    assert dev_details(tmp_path) == ["workload (the whole run): baseline 52.4 ms, candidate 40 ms (1.31x)"]
    (ver / "reward.json").write_text(json.dumps({"speedup": 0.0, "baseline_ms": -1, "candidate_ms": -1, "oracle_ms": 32.68}))
    assert dev_details(tmp_path) == []


def test_the_details_are_bounded(tmp_path):
    d = _dev(tmp_path)
    (d / "bench.log").write_text("".join(f"shape=s{i} baseline_ms=2.0 candidate_ms=1.0 ratio=2.0\n" for i in range(40)))
    (d / "correctness.log").write_text("".join(f"CASE_FAIL c{i}: E{i}\n" for i in range(20)))
    got = dev_details(tmp_path)
    assert len(got) == 16 and got[-1] == "... (33 more)" and sum(ln.startswith("failed case") for ln in got) == 8


def test_the_same_error_through_more_of_the_grader_s_frames_is_said_once():
    one = ('Traceback (most recent call last):\n  File "/opt/loop/private/dev_tests/t.py", line 3, in main\n    case(m)\n'
           '  File "/app/repo/toy/kernel.py", line 9, in f\n    raise ValueError("bad block")\nValueError: bad block\n')
    two = one.replace('  File "/app/repo', '  File "/opt/loop/private/dev_tests/h.py", line 7, in run\n    g()\n  File "/app/repo')
    got = candidate_diagnostics(one + "CASE_FAIL x\n" + two, ["toy/kernel.py"])
    assert got.count("ValueError: bad block") == 1 and "  ... 1 frame(s) outside the candidate's files" in got
    # another message through the same frame is another error
    other = candidate_diagnostics(one + two.replace("bad block", "bad grid"), ["toy/kernel.py"])
    assert other.count("ValueError: bad block") == 1 and other.count("ValueError: bad grid") == 1


def test_a_verifier_s_out_files_are_part_of_what_the_grading_printed(tmp_path):
    ver = _dev(tmp_path, "logs/verifier")
    (ver / "correctness.out").write_text('Traceback (most recent call last):\n  File "/app/repo/toy/kernel.py", line 2, in f\n'
                                         '    return 1/0\nZeroDivisionError: division by zero\n')
    assert candidate_diagnostics(dev_output(tmp_path), ["toy/kernel.py"])[-1] == "ZeroDivisionError: division by zero"
