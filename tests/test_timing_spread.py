"""benchmarks/gpu/timing_spread.py: the spread of a GPU task's speedup across gradings, overall
and over the workloads whose kernels are long enough for the 2 % goal."""
import json
import statistics
import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
import timing_spread  # noqa: E402


def _grading(root, i, ratios, *, status="ok", hardware="NVIDIA H200", mode="oracle"):
    d = root / f"g{i}"
    (d / "logs").mkdir(parents=True)
    (d / "verdict.json").write_text(json.dumps({"task": "kfc/t", "mode": mode, "status": status,
                                                 "hardware": hardware, "candidate_hash": "abc"}))
    # one short kernel (10 us) whose ratio jumps around, one long one (200 us) that is steady
    report = {"workloads": [{"name": "short", "median_ratio": ratios[0], "candidate_ms_median": 0.010},
                            {"name": "long", "median_ratio": ratios[1], "candidate_ms_median": 0.200}]}
    (d / "logs" / "benchmark_results.json").write_text(json.dumps(report))


def test_spread_separates_long_kernels_and_skips_cpu_and_failed_gradings(tmp_path, capsys):
    runs = [(10.0, 5.00), (14.0, 5.05), (8.0, 4.95)]
    for i, r in enumerate(runs):
        _grading(tmp_path, i, r)
    _grading(tmp_path, 7, (99.0, 99.0), status="hard_fail")
    _grading(tmp_path, 8, (99.0, 99.0), hardware="cpu")
    _grading(tmp_path, 9, (1.0, 1.0), mode="noop")  # the same (empty) candidate hash, another mode
    _grading(tmp_path, 10, (1.0, 1.0), mode="noop")
    out = tmp_path / "spread.json"
    assert timing_spread.main([str(tmp_path), "--json", str(out)]) == 0
    both = json.loads(out.read_text())
    assert both["kfc/t noop@abc"]["speedups"] == [1.0, 1.0]
    s = both["kfc/t oracle@abc"]
    assert s["gradings"] == 3 and s["long_workloads"] == ["long"]
    longs = [r[1] for r in runs]
    assert abs(s["cv_long_speedup"] - statistics.stdev(longs) / statistics.fmean(longs)) < 1e-9
    assert s["cv_speedup"] > 0.1 > s["cv_long_speedup"]  # the short kernel's jitter stays out of the long figure
    assert "workloads >= 50 us (*): 1 of 2" in capsys.readouterr().out


def test_no_gradings_is_a_one_line_error(tmp_path, capsys):
    assert timing_spread.main([str(tmp_path)]) == 2
    assert "no GPU gradings" in capsys.readouterr().err
