"""A candidate's profile as the model reads it (evaluator/profile.py): the limiter each kind of
profile names, the roofline share loop.roofline_stop reads, Nsight Compute's CSV read, and the
probe's cProfile of real code telling its own Python from native calls. Pure, and fast."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from agent.search.fixes import stop_rule
from evaluator import profile
from evaluator.trust import instrument

sys.path.insert(0, str(instrument.INSIDE))
import pesflow_profile  # noqa: E402 - the probe's own module, as the sandbox loads it

H100 = {"name": "NVIDIA H100 80GB HBM3", "bandwidth_gbs": 3000.0, "tflops": {"fp32": 50.0, "bf16": 700.0}, "source": "measured by pesflow"}


def _gpu(**over):
    raw = {"how": "torch.profiler", "device": "cuda", "entry": "run", "calls": 10, "seconds_per_call": 110e-6,
           "device_seconds_per_call": 100e-6, "kernels_per_call": 1, "bytes_per_call": 0, "flops_per_call": 0,
           "dtype": "bf16", "kernels": [{"name": "k", "seconds": 100e-6, "count": 1}]}
    return {**raw, **over}


@pytest.mark.parametrize("raw,limiter", [
    (_gpu(bytes_per_call=int(0.8 * 3000e9 * 100e-6)), "memory"),  # 80 % of the bandwidth
    (_gpu(flops_per_call=int(0.7 * 700e12 * 100e-6)), "compute"),  # 70 % of bf16's FLOP/s
    (_gpu(seconds_per_call=1e-3), "host"),  # the GPU busy a tenth of the call
    (_gpu(kernels_per_call=40, kernels=[{"name": "k", "seconds": 100e-6, "count": 40}]), "launch"),
    (_gpu(bytes_per_call=int(0.1 * 3000e9 * 100e-6)), "latency"),
])
def test_a_gpu_profile_names_what_bounds_it_against_the_machine_s_ceilings(raw, limiter):
    got = profile.summary(raw, H100)
    assert got["limiter"] == limiter and got["lines"][-1].startswith(f"limiter: {limiter} (")
    if limiter == "memory":
        assert got["roofline"] == pytest.approx(0.8, rel=0.01) and any("80% of 3000 GB/s" in ln for ln in got["lines"])


NCU_CSV = '''==PROF== Connected to process 77
"ID","Process ID","Kernel Name","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active","dram__bytes.sum"
"","","","usecond","%","%","%","Mbyte"
"0","77","scan_kernel","90.5","85.2","20.1","45.0","250.3"
"1","77","tail_kernel(float*)","9.5","10.0","30.0","12.5","1.5"
"2","77","scan_kernel","89.5","84.8","19.9","44.0","249.7"
'''


def test_nsight_compute_s_rows_become_kernels_and_the_dominant_one_sets_the_limiter():
    kernels = pesflow_profile.parse_ncu_csv(NCU_CSV)
    assert [k["name"] for k in kernels] == ["scan_kernel", "tail_kernel(float*)"]
    scan = kernels[0]
    assert scan["launches"] == 2 and scan["seconds"] == pytest.approx(180e-6) and scan["dram_pct"] == pytest.approx(85.0, abs=0.1)
    assert scan["bytes"] == pytest.approx(500e6)
    got = profile.summary(_gpu(how="ncu", ncu_kernels=kernels), H100)
    assert got["limiter"] == "memory" and got["roofline"] == pytest.approx(0.85, abs=0.01)
    assert any("scan_kernel: 95% of GPU time" in ln and "occupancy 44%" in ln for ln in got["lines"])
    assert pesflow_profile.parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM") is None
    cmd = pesflow_profile.ncu_command("ncu", "python3", "/x/pesflow_profile.py", "/tmp/r.json")
    assert cmd[:3] == ["ncu", "--clock-control", "none"] and cmd[-2:] == ["replay", "/tmp/r.json"]


def test_no_profile_says_why_in_one_line():
    assert profile.summary(None, {}, "it did not pass (hard_fail): there is nothing to profile")["lines"] == \
        ["(no profile: it did not pass (hard_fail): there is nothing to profile)"]
    assert profile.summary({"why": "the profiled call raised ValueError"}, {})["limiter"] is None


def _module(tmp_path: Path, name: str, code: str):
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(code))
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(p)


@pytest.mark.parametrize("code,limiter", [
    ("def f(n):\n    t = 0\n    for i in range(n):\n        t += i * i\n    return t\n", "python"),
    ("def f(n):\n    return sum(sorted(range(n), key=abs))\n", "native"),
])
def test_cprofile_tells_the_candidate_s_own_python_from_native_calls(tmp_path, code, limiter):
    mod, path = _module(tmp_path, f"cand_{limiter}", code)
    raw = pesflow_profile.python_profile(mod.f, (20000,), {}, 0.5, [path])
    assert raw["calls"] >= 1 and raw["functions"]
    got = profile.summary({**raw, "entry": "f"}, {"cores": 2})
    assert got["limiter"] == limiter, got["lines"]


def test_the_roofline_stop_ends_the_search_once_the_best_is_near_a_ceiling():
    rounds = [{"round": 0, "best_id": "baseline", "speedup": 1.0}, {"round": 1, "best_id": "r01-c0", "speedup": 2.0, "roofline": 0.72}]
    assert stop_rule(rounds, None, None, 0.7) == "roofline_reached"
    assert stop_rule(rounds, None, None, 0.9) is None
    assert stop_rule(rounds[:1], None, None, 0.1) is None  # no profile (a CPU package, the benchmark protocol): never


def test_torch_profiler_s_path_counts_the_call_s_bytes_and_flops():
    """The GPU fallback's own code on the CPU (no kernels there): the FLOPs torch counts for a
    matmul and the bytes of its tensors, per call."""
    torch = pytest.importorskip("torch")
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    got = pesflow_profile.torch_profile(lambda a, b: a @ b, (x, y), {}, 0.2, lambda v: 3 * 64 * 64 * 4, lambda: None)
    assert got["flops_per_call"] == 2 * 64 ** 3 and got["bytes_per_call"] == 3 * 64 * 64 * 4 and got["dtype"] == "fp32"
    assert 1 <= got["calls"] <= pesflow_profile.MAX_CALLS


def test_the_planner_sees_the_parent_s_and_the_best_s_profile_and_benchmark_sees_neither():
    from agent.population.database import Solution
    from agent.search import roles
    from agent.search.protocol import BENCHMARK, ENGINEER

    def sol(i, limiter):
        return Solution(id=i, parent_id=None, island=0, round=1, files={"k.py": "x = 1\n"}, content_hash=i, status="ok",
                        profile={"limiter": limiter, "lines": [f"limiter: {limiter} (why)"]})
    parent, best = sol("r01-c0", "python"), sol("r02-c1", "native")
    ctx = roles.Context(instruction="Make it fast.", title="t", scope=["k.py"], protocol=ENGINEER)
    prompt = roles.planner_prompt(ctx, parent, [], [], [], best)
    assert "r01-c0:\n    limiter: python (why)" in prompt and "r02-c1 (the best so far):\n    limiter: native (why)" in prompt
    assert "limiter: python" in roles.executor_prompt(ctx, parent, "plan", 0, 1) and "limiter: native" not in roles.executor_prompt(ctx, parent, "plan", 0, 1)
    ctx.protocol = BENCHMARK
    assert "Where the time goes" not in roles.planner_prompt(ctx, parent, [], [], [], best)


def test_ncu_replays_only_the_kernels_torch_found_taking_the_time():
    assert pesflow_profile.kernel_base("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<(int)3> >(int, float*)") \
        == "elementwise_kernel"
    assert pesflow_profile.kernel_base("_chunk_output_kernel") == "_chunk_output_kernel"
    cmd = pesflow_profile.ncu_command("ncu", "python3", "/x/p.py", "/r.json", ["void a::scan_kernel<float>(float*)", "tail_kernel"])
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:^(scan_kernel|tail_kernel)$" and cmd[cmd.index("--launch-count") + 1] == "4"


def test_a_profile_costs_at_most_its_share_of_the_grading():
    b = profile.budget(3.0, 0.15, 50.0)  # a 50 s grading: 7.5 s in all, the candidate's calls a fifth of it
    assert b == {"budget_sec": 1.5, "total_sec": 7.5}
    assert profile.budget(3.0, 0.15, 400.0) == {"budget_sec": 3.0, "total_sec": 60.0}
    assert profile.budget(3.0, 0.15, 0.4)["total_sec"] == 1.0 and profile.budget(3.0, 0.15, None)["total_sec"] == 12.0


# ------------------------------------------------------------------ issue 49 item 7: a profile that fits the metric
@pytest.mark.parametrize("metric_kind,timing_metric,counted", [  # the benchmark's own spellings
    ("recompile_count", "recompile_count", True), ("instruction_count", "callgrind_ir", True),
    ("peak_memory", "peak_memory_bytes", True), (None, "peak_bytes", True), ("bytes_moved", "bytes_moved", True),
    ("op_count", "op_count", True), ("node_count", "node_count", True),
    ("wall_time", "wall_time_ms", False), (None, "speedup", False), (None, "paraphrase_mining_speedup", False), (None, None, False),
])
def test_the_package_s_declarations_say_whether_its_score_is_a_count(metric_kind, timing_metric, counted):
    m = profile.Metric.declared(metric_kind, timing_metric)
    assert m.counted is counted
    if counted:
        assert m.name == (metric_kind or timing_metric)


def _bench(tmp_path: Path, bench: dict, where: str = "logs/loop/dev") -> Path:
    d = tmp_path / where
    d.mkdir(parents=True)
    (d / "benchmark_results.json").write_text(__import__("json").dumps(bench))
    return tmp_path


def test_a_counted_metric_gets_one_line_of_counts_and_no_limiter(tmp_path):
    """The user's case: a count package's best, at the floor, read `limiter: python` and slower per
    call than the baseline. The timing profile is dropped; the dev engine's counts say it."""
    log = _bench(tmp_path, {"metric": "recompile_count", "aggregate_speedup": 4.0, "ref_speedup": 4.0,
                            "workloads": [{"name": "signature-identity-count", "speedup": 4.0, "candidate_recompiles": 12,
                                           "baseline_recompiles": 48, "ref_recompiles": 12}]})
    timing = {"how": "cProfile", "device": "cpu", "entry": "identity_key", "calls": 5, "seconds_per_call": 2e-3,
              "baseline": {"seconds_per_call": 1e-3}, "shares": {"own": 0.9, "native": 0.1, "other": 0.0}, "functions": []}
    got = profile.summary(timing, {}, "", metric=profile.Metric.declared("recompile_count", "recompile_count"), log_dir=log)
    assert got["limiter"] is None and got["roofline"] is None and len(got["lines"]) == 1
    line = got["lines"][0]
    assert "recompile_count" in line and "recompiles: baseline 48, candidate 12" in line and "4x" in line
    assert "limiter" not in line and "a call" not in line
    # a timed package still gets its timing profile from the same figures
    assert profile.summary(timing, {}, "", metric=profile.Metric.declared("wall_time", "wall_time_ms"), log_dir=log)["limiter"] == "python"


def test_a_count_line_sums_workloads_and_falls_back_to_the_engine_s_ratio(tmp_path):
    m = profile.Metric.declared("instruction_count", "callgrind_ir")
    two = _bench(tmp_path / "a", {"aggregate_speedup": 1.5, "workloads": [
        {"name": "w1", "candidate_ir": 100, "baseline_ir": 150}, {"name": "w2", "candidate_ir": 300, "baseline_ir": 450}]},
        where="logs/verifier")
    assert "ir over 2 workloads: baseline 600, candidate 400 (baseline/candidate 1.5x)" in profile.summary(None, {}, metric=m, log_dir=two)["lines"][0]
    ratio = _bench(tmp_path / "b", {"metric": "bytes_moved", "aggregate_speedup": 2.25, "ref_speedup": 3.0,
                                    "workloads": [{"name": "w", "speedup": 2.25}]})
    line = profile.summary(None, {}, metric=profile.Metric.declared("bytes_moved", None), log_dir=ratio)["lines"][0]
    assert "baseline/candidate bytes_moved 2.25x" in line and "3" not in line.split("2.25x")[1]
    none = profile.summary(None, {}, "it did not pass (hard_fail): there is nothing to profile", metric=m, log_dir=tmp_path / "c")
    assert none["limiter"] is None and "it did not pass" in none["lines"][0]


def test_a_bundled_count_package_is_read_as_counted():
    from evaluator.task import load_task
    root = Path(__file__).resolve().parents[1] / "tasks"
    assert profile.metric_of(load_task("kfc/nativehist-merge", [str(root)])).counted
    assert not profile.metric_of(load_task("kfc/ssm-selective-scan-firstorder", [str(root)])).counted


def _many(n: int, each: float, wall: float, **over):
    return _gpu(seconds_per_call=wall, device_seconds_per_call=n * each, kernels_per_call=n,
                kernels=[{"name": f"k{i}", "seconds": n / 4 * each, "count": n // 4} for i in range(4)], **over)


@pytest.mark.parametrize("raw,limiter", [
    (_many(1000, 3e-6, 20e-3), "launch"),  # the mission's baseline: a thousand 3 us kernels, 17 us of host a launch
    (_many(1000, 3e-6, 3.5e-3), "launch"),  # the same, the GPU busy most of the call
    (_many(1000, 3e-6, 200e-3), "host"),  # 197 us idle a launch: host work, not launches
    (_gpu(seconds_per_call=1e-3), "host"),  # one kernel and a long wait
    (_many(16, 100e-6, 1.7e-3), "latency"),  # long kernels back to back
    (_many(1000, 3e-6, 20e-3, bytes_per_call=int(0.9 * 3000e9 * 3e-3)), "launch"),  # fast kernels, an idle GPU
    (_many(1000, 3e-6, 3.3e-3, bytes_per_call=int(0.9 * 3000e9 * 3e-3)), "memory"),  # busy and at the bandwidth
])
def test_many_short_kernels_with_gaps_read_as_launch_and_only_other_waits_as_host(raw, limiter):
    got = profile.summary(raw, H100)
    assert got["limiter"] == limiter, got["lines"]
    if raw["seconds_per_call"] > 2 * raw["device_seconds_per_call"]:
        assert any(ln.startswith("the GPU idle ") for ln in got["lines"])


def test_an_idle_gpu_is_not_near_its_roofline_whatever_its_kernels_reach():
    kernels = [{"name": "tiny", "launches": 20, "seconds": 60e-6, "dram_pct": 80.0, "sm_pct": 10.0, "occupancy_pct": 30.0, "bytes": 1.0}]
    got = profile.summary(_many(1000, 3e-6, 20e-3, how="ncu", ncu_kernels=kernels), H100)
    assert got["limiter"] == "launch" and got["roofline"] == pytest.approx(0.8 * 3e-3 / 20e-3)
    busy = profile.summary(_gpu(how="ncu", ncu_kernels=kernels), H100)  # one kernel, busy: the counters' bound
    assert busy["limiter"] == "memory" and busy["roofline"] == pytest.approx(0.8)
    short = [{**kernels[0], "dram_pct": 20.0}]  # many short kernels, busy, no unit near its peak: their launches
    assert profile.summary(_many(1000, 3e-6, 3.3e-3, how="ncu", ncu_kernels=short), H100)["limiter"] == "launch"
