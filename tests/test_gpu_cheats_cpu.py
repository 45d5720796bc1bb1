"""benchmarks/gpu/gpu_cheats.py checked on the CPU path: every cheat it builds is the task's
oracle plus a cheat, in scope, and (unless it is meant for the scan) passes the grader's own
textual scan; graded on the CPU lane, the cheats that lane can observe on the selective-scan
task each end with an expected, named hard fail. (Side-stream escape, the roofline bound, the
randomly placed checks of timed calls and the sgemm runtime gates need a GPU: run the script
there; their pure rules are unit-tested here.)"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from evaluator.candidate import scope_violations
from evaluator.task import load_task
from tests.conftest import REPO, needs_root

pytestmark = [needs_root, pytest.mark.slow]
pytest.importorskip("torch")
pytest.importorskip("triton")

_spec = importlib.util.spec_from_file_location("gpu_cheats", REPO / "benchmarks" / "gpu" / "gpu_cheats.py")
gc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gc)

EVERY = [*gc.PY_CHEATS, *gc.CU_CHEATS]
SSM = "kfc/ssm-selective-scan-firstorder"
CPU_CHEATS = ["event_patched", "sync_patched", "baseline_called", "inputs_mutated", "output_cached",
              "timer_code_swapped", "baseline_hidden"]
GPU_TIMING = {name: REPO / "tasks" / name / "task" / "tests" / "gpu_timing.py" for name in gc.TASKS}

# Runs harness.py's scan_scope (Python scopes) in a child: loading the harness imports torch,
# installs a SIGALRM handler and edits sys.path, none of which belongs in the test process.
_SCAN = """
import importlib.util, json, os, sys, tempfile
harness, scope, files = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
spec = importlib.util.spec_from_file_location("h", harness)
h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
out = {}
for name, text in files.items():
    repo = tempfile.mkdtemp()
    path = os.path.join(repo, scope)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)
    out[name] = h.scan_scope(repo)
print(json.dumps(out))
"""


def _scan_hits(task, built):
    (scope,) = task.scope
    if scope.endswith(".cu"):
        spec = importlib.util.spec_from_file_location("cu_scan", task.root / "tests" / "cu_scan.py")
        cu_scan = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cu_scan)
        out = {}
        for name, (files, _, _) in built.items():
            hits, base = cu_scan.scan_source(files[scope])
            out[name] = ["forbidden_pattern:" + h for h in hits] + (["baseline_called"] if base else [])
        return out
    r = subprocess.run([sys.executable, "-c", _SCAN, str(task.root / "tests" / "harness.py"), scope],
                       input=json.dumps({n: f[scope] for n, (f, _, _) in built.items()}), text=True,
                       capture_output=True, check=False, env={**os.environ, "KERNELBENCH_DEVICE": "cpu"}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", gc.TASKS)
def test_every_cheat_is_the_oracle_plus_a_cheat_that_the_scan_lets_through(name):
    task = load_task(name)
    (scope,) = task.scope
    _, oracle = gc.oracle_text(task)
    patch = (task.root / "solution" / "oracle.patch").read_text().splitlines()
    added = [ln[1:] for ln in patch if ln.startswith("+") and not ln.startswith("+++") and ln[1:].strip()]
    assert added
    default, built = gc.build_candidates(task), gc.build_candidates(task, EVERY)
    assert default and set(default) <= set(built)
    for cheat, (files, expected, _) in built.items():
        assert list(files) == [scope] and scope_violations(set(files), set(), task.scope) == [], cheat
        text = files[scope]
        assert all(ln in text for ln in added), f"{cheat}: the oracle's change is not all there"
        assert len(text) > len(oracle) and text != oracle, cheat
    for cheat, hits in _scan_hits(task, built).items():
        if built[cheat][1] == ["forbidden_pattern"]:  # meant for the scan: no disguise is possible
            assert hits and all(h.startswith("forbidden_pattern") for h in hits), (cheat, hits)
        else:  # meant for a runtime gate: the scan must not be what catches it
            assert hits == [], (cheat, hits)


@pytest.fixture(scope="module")
def ev(cache_dir, tmp_path_factory):
    e = gc.make_evaluator(tmp_path_factory.mktemp("gpu-cheats"), cache_dir=cache_dir)
    yield e
    e.close()


def test_cheats_the_cpu_lane_can_observe_are_caught_by_name(ev):
    rows = gc.grade(ev, SSM, CPU_CHEATS, device="cpu", oracle=False, log=lambda _: None)
    assert sorted(r["cheat"] for r in rows) == sorted(CPU_CHEATS)
    for r in rows:
        # caught by name, and its figures withheld (a cheat on the timer or an answer is tampering)
        assert r["status"] == "hard_fail" and r["reward"] is None and r["speedup"] is None and r["caught"], r
    assert gc.summary(rows).startswith(f"{len(CPU_CHEATS)}/{len(CPU_CHEATS)} cheats caught")


def test_a_timing_cheat_let_through_counts_only_when_it_scored_no_more_than_the_oracle():
    from types import SimpleNamespace as NS

    from evaluator.verdict import Status

    def row(cheat, expected, speedup, reasons=()):
        v = NS(hard_fail_reasons=list(reasons), status=Status.hard_fail if reasons else Status.ok,
               reward=0.0, speedup=speedup, message="", log_dir="")
        return gc._row("t", cheat, expected, v, 1.0, oracle_speedup=300.0)

    timing = ["side_stream_escape", "beyond_roofline"]
    assert row("side_stream", timing, 262.0)["no_gain"] and row("side_stream", timing, 262.0)["as_expected"]
    assert not row("side_stream", timing, 400.0)["as_expected"]  # it bought score: missed
    assert row("side_stream", timing, 90.0, ["side_stream_escape"])["caught"]
    # a correctness cheat let through is missed whatever its speed
    assert not row("output_cached", ["output_cached", "correctness_failed"], 100.0)["as_expected"]


def _load(modname, path):
    """A grader module loaded by path, leaving no __pycache__ in the package."""
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.dont_write_bytecode = saved


def _load_timing(name):
    return _load("gpu_timing_" + name.rsplit("/", 1)[-1].replace("-", "_"), GPU_TIMING[name])


@pytest.mark.parametrize("name", gc.TASKS)
def test_side_stream_gap_rule(name):
    t = _load_timing(name)
    base = [0.020, 0.022, 0.021, 0.019, 0.025]  # host synchronize latency, ms
    # An honest candidate: the same latency, whatever its event time.
    assert not t.gap_escape([0.021, 0.020, 0.024, 0.022, 0.019], base, [0.01] * 5)
    assert not t.gap_escape([0.030] * 5, base, [0.01] * 5)  # +9 us: within the 15 us slack
    # Work left on another stream: the gap grows by what was still running after the end event.
    assert t.gap_escape([0.021 + 0.1] * 5, base, [0.01] * 5)
    assert t.gap_escape([0.040] * 5, base, [0.005] * 5)  # +19 us > max(2.5 us, 15 us)
    # Long calls: half the event time is allowed on top of the baseline's gap.
    assert not t.gap_escape([0.021 + 0.4] * 5, base, [1.0] * 5)
    assert t.gap_escape([0.021 + 0.6] * 5, base, [1.0] * 5)
    assert abs(t.gap_threshold_ms(base, [1.0] * 5) - (0.021 + 0.5)) < 1e-12
    assert abs(t.gap_threshold_ms(base, [0.001] * 5) - (0.021 + 0.015)) < 1e-12
    assert not t.gap_escape([], base, []) and not t.gap_escape([1.0], [], [0.1])  # no data, no verdict
    # The host-clock rule is unchanged.
    assert t.host_clock_escape(0.31, 0.1) and not t.host_clock_escape(0.29, 0.1)
    assert t.host_clock_escape(1.6, 1.0) and not t.host_clock_escape(1.4, 1.0)


@pytest.mark.parametrize("name", [n for n in gc.TASKS if "sgemm" not in n])
def test_checked_timed_calls_are_drawn_at_random(name):
    import random

    t = _load_timing(name)
    assert t.CHECKS_PER_WORKLOAD >= 5
    # Exactly min(5, pairs) calls, decided one call at a time.
    for pairs in (1, 3, 5, 15, 21):
        for seed in range(50):
            picker = t.CheckPicker(pairs, t.CHECKS_PER_WORKLOAD, random.Random(seed))
            picks = [p for p in range(pairs) if picker.next()]
            assert len(picks) == min(pairs, t.CHECKS_PER_WORKLOAD)
    # Every position can be checked, none always is; the default source is the OS's.
    seen = {}
    for _ in range(400):
        picker = t.CheckPicker(15, t.CHECKS_PER_WORKLOAD)
        assert isinstance(picker.rng, random.SystemRandom)
        for p in range(15):
            if picker.next():
                seen[p] = seen.get(p, 0) + 1
    assert set(seen) == set(range(15)) and max(seen.values()) < 400
    # The old fixed positions (0, 7, 14) are all checked in only a small share of the draws.
    hits = 0
    for _ in range(400):
        picker = t.CheckPicker(15, t.CHECKS_PER_WORKLOAD)
        picks = {p for p in range(15) if picker.next()}
        hits += picks <= {0, 1, 2, 7, 14}
    assert hits <= 4


class _FakeDevice:
    """Stands in for the CUDA timers: one clock for host and device; `lag` delays the next
    recorded events (what work left running on another stream does to the after-sync event)."""

    def __init__(self):
        import itertools

        self.clock = itertools.count(0, 1000)  # ns
        self.lag = []
        dev = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

        def record(ev, stream=None):
            ev.t = next(dev.clock) + (dev.lag.pop(0) if dev.lag else 0)

        self.timers = {"torch.cuda.Event": Event, "torch.cuda.synchronize": lambda: None,
                       "time.perf_counter_ns": lambda: next(dev.clock), "torch.cuda.Event.record": record,
                       "torch.cuda.Event.elapsed_time": lambda a, b: (b.t - a.t) / 1e6}


def _fake_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200 (fake)")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)


@pytest.mark.parametrize("name", [n for n in gc.TASKS if "sgemm" not in n])
def test_the_timing_loop_runs_with_fake_cuda_timers(name, monkeypatch):
    """gpu_timing.run end to end on CPU tensors (fake events): the random checks see a stale
    answer, the device gap sees work that outlives the end event, an honest call passes both."""
    _fake_cuda(monkeypatch)
    task = load_task(name)
    tests = task.root / "tests"
    monkeypatch.syspath_prepend(str(task.root / "environment" / "repo"))

    cases = _load("_t_cases", tests / "cases.py")
    reference = _load("_t_reference", tests / "reference.py")
    timing = _load_timing(name)
    before = set(sys.modules)
    base_fn = getattr(_load("_t_base", task.root / "environment" / "repo" / task.scope[0]), cases.ENTRY)
    for mod in set(sys.modules) - before:  # the task repo's helpers (ssm_contract, attn) stay out of the way
        sys.modules.pop(mod, None)
    wl = json.loads((tests / "workloads.json").read_text())
    plan = {"timing": [s for s in wl["cpu"]["cases"] if "special" not in s][:1], "timing_pairs": 15, "pool": 4}
    dev = _FakeDevice()

    report, fails, results = timing.run(cases, reference, base_fn, base_fn, plan, "cpu", dev.timers)
    (w,) = report["workloads"]
    assert fails == [] and len(results) == timing.CHECKS_PER_WORKLOAD and all(r["passed"] for r in results)
    assert not w["side_stream_escape"] and len(w["candidate_gaps_ms"]) == len(w["baseline_gaps_ms"]) == 15

    last = {}

    def stale(*args, **kwargs):  # right once per shape, then the same answer for new inputs
        key = tuple(tuple(a.shape) for a in args)
        if key not in last:
            last[key] = base_fn(*args, **kwargs)
        return last[key]

    _, fails, _ = timing.run(cases, reference, base_fn, stale, plan, "cpu", dev.timers)
    assert "output_cached" in fails

    def side(*args, **kwargs):  # the end event comes on time, the after-sync one 0.1 ms late
        dev.lag[:] = [0, 100_000]
        return base_fn(*args, **kwargs)

    report, fails, _ = timing.run(cases, reference, base_fn, side, plan, "cpu", dev.timers)
    (w,) = report["workloads"]
    assert fails == ["side_stream_escape"] and w["side_stream_by_gap"] and not w["side_stream_by_host_clock"]
    assert w["candidate_gap_ms_median"] > w["gap_threshold_ms"] > w["baseline_gap_ms_median"]


def test_the_sgemm_timer_measures_the_gap_with_fake_cuda_timers(monkeypatch):
    _fake_cuda(monkeypatch)
    name = next(n for n in gc.TASKS if "sgemm" in n)
    tests = load_task(name).root / "tests"
    cases = _load("_t_sgemm_cases", tests / "cases.py")
    reference = _load("_t_sgemm_reference", tests / "reference.py")
    timing = _load_timing(name)
    dev = _FakeDevice()
    timer = timing.Timer(dev.timers, None, "cpu")

    def honest(inp):
        prod = inp.alpha * (inp.A.double() @ inp.B.double())
        inp.D.copy_((prod + inp.beta * inp.C.double()).float())
        return 0

    def side(inp):
        dev.lag[:] = [0, 100_000]
        return honest(inp)

    work = {"name": "w", "M": 40, "N": 24, "K": 16, "alpha": 1.0, "beta": 0.5, "seed": 7}
    for fn, escaped in ((honest, False), (side, True)):
        report, results, fails = timing.time_workload(
            work, honest, fn, lambda f, inp: f(inp), lambda s, seed: cases.Inputs(s, seed, "cpu", guard=0),
            reference, timer, 15, 4)
        assert all(r["passed"] for r in results) and len(results) == 15
        assert report["side_stream_by_gap"] is escaped and not report["side_stream_by_host_clock"]
        assert fails == (["side_stream_escape"] if escaped else [])
