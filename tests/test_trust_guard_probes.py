"""The probes after the guard, run for real in child interpreters (no sandbox): the guard keeps
the harness's inputs (tests/test_trust_guard.py `guarded`), then pesflow_probe calls the kept
inputs again, as graded, in a process of its own, and compares by value whatever the output is;
an answer that depends on which calls are kept, or on who asks, is caught all the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.trust import runtime
from evaluator.trust.findings import family as family_of
from evaluator.trust.instrument import INSIDE
from tests.test_trust_guard import HARNESS, guarded


PROBE_CASES = {
    "honest": ("def entry(x):\n    return x.cumsum()\n", None),
    "identity_cache": ("_m = {}\ndef entry(x):\n    k = id(x)\n    if k not in _m:\n        _m[k] = x.cumsum()\n"
                       "    return _m[k]\n", "output_cached"),
    "late_thread": ("import threading, time, numpy as np\ndef entry(x):\n    out = np.zeros_like(x)\n"
                    "    def fill():\n        time.sleep(0.005)\n        out[:] = x.cumsum()\n"
                    "    threading.Thread(target=fill).start()\n    return out\n", "unsynchronized_work"),
    "generator": ("def entry(x):\n    return (v for v in x.cumsum())\n", "lazy_output"),
    # keyed on identity and on values an in-place rewrite changes: only the timings tell
    "sampled_key_cache": ("import numpy as np\n_m = {}\ndef entry(x):\n    k = (id(x), int(x[0]), int(x[-1]), int(x[len(x) // 2]))\n"
                          "    if k not in _m:\n        _m[k] = np.sort(np.tile(x, 200))[::200].copy()\n    return _m[k]\n", "output_cached"),
}


def _probe_kept(tmp_path: Path, events: list[dict], extra: dict) -> dict:
    """pesflow_probe run on the first two inputs the guard kept (config: the quick probes, `extra` over it)."""
    recs = runtime.records(events, socket_used=False)
    files = []
    for i, r in enumerate(recs[:extra.pop("kept", 2)]):
        data = Path(r["path"]).read_bytes()
        (tmp_path / f"input-{i}.pkl").write_bytes(data[r["offset"]:r["offset"] + r["size"]])
        outs = {}
        for key in ("got",):  # what the harness got, as the host carries it (screen._got)
            if isinstance(r.get(key), dict):
                (tmp_path / f"{key}-{i}.pkl").write_bytes(data[r[key]["offset"]:r[key]["offset"] + r[key]["size"]])
                outs[key] = {"name": f"{key}-{i}.pkl", "sha256": r[key]["sha256"]}
        files.append({**{k: r.get(k) for k in ("sha256", "fn", "module", "file", "n", "argv", "cwd", "sys_path")},
                      "name": f"input-{i}.pkl", **outs})
    cfg = {"records": files, "references": {}, "budget_sec": 20, "full": False, **extra,
           "varied": runtime.records(events, socket_used=False, field="varied")}
    (tmp_path / "config.json").write_text(json.dumps({"probe": cfg}))
    env = {**os.environ, "PESFLOW_TRUST_TEST_CONFIG": str(tmp_path / "config.json"), "PESFLOW_TRUST_TEST_OUT": str(tmp_path / "probe.json"),
           "PYTHONPATH": str(INSIDE)}
    subprocess.run([sys.executable, str(INSIDE / "pesflow_probe.py")], env=env, check=True, timeout=120, capture_output=True)
    return json.loads((tmp_path / "probe.json").read_text())


@pytest.mark.parametrize("case", sorted(PROBE_CASES))
def test_the_probes_call_the_kept_inputs_again(tmp_path, case):
    kernel, family = PROBE_CASES[case]
    events = guarded(tmp_path, kernel)
    assert runtime.records(events, socket_used=False)
    got = _probe_kept(tmp_path, events, {"full": True})
    names = {family_of(f[0]) for f in got["findings"]}
    assert got["checks"]["calls"] >= 1
    assert names == set() if family is None else family in names, got


@pytest.mark.parametrize("restored", [True, False])
def test_the_probes_call_the_code_as_graded_not_as_it_left_itself(tmp_path, restored):
    """A probe in the grading's own sandbox finds the files as the grading left them: a cheat
    that rewrote itself honest before exiting is put back first (`restore`), and caught."""
    cheat, _ = PROBE_CASES["identity_cache"]
    events = guarded(tmp_path, cheat)
    kernel = tmp_path / "repo" / "submission" / "kernel.py"
    kernel.write_text("def entry(x):\n    return x.cumsum()\n")  # what it left behind
    (tmp_path / "restore-0.txt").write_text(textwrap.dedent(cheat))
    got = _probe_kept(tmp_path, events, {"restore": {str(kernel): "restore-0.txt"}} if restored else {})
    names = {family_of(f[0]) for f in got["findings"]}
    if restored:
        assert got["checks"]["restored"] == [str(kernel)] and kernel.read_text() == textwrap.dedent(cheat)
        assert "output_cached" in names, got
    else:  # what the probe would see without it: the honest code, nothing to find
        assert got["checks"]["restored"] == [] and names == set(), got


DECORATOR_FACTORY = """
import functools
def entry(x):
    return x
def skip_when(flag):
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*a, **k):
            return fn(*a, **k)
        return inner
    return wrap
"""
FACTORY_HARNESS = """
import os, sys
sys.path.insert(0, {pkg!r})
import submission.kernel as k
deco = k.skip_when(True)  # the repository applying the scope file's decorator factory: a function is its contract
f = deco(len)
out = k.entry([1, 2, 3])
os._exit(0)
"""


def test_a_function_returned_where_the_baseline_returns_one_is_the_contract_not_a_lazy_output(tmp_path):
    events = guarded(tmp_path, DECORATOR_FACTORY, harness=FACTORY_HARNESS)
    baseline = {"submission/kernel.py": DECORATOR_FACTORY}
    assert runtime.baseline_callables(baseline) == {"skip_when", "wrap"}
    found, _ = runtime.read(events, runtime.baseline_classes(baseline), runtime.baseline_callables(baseline))
    assert [f.family for f in found] == []
    # the same return where the baseline returns values is still named
    lazy, _ = runtime.read(events, set(), set())
    assert [f.family for f in lazy] == ["lazy_output"]


TORCH_HARNESS = """
import os, sys, time
sys.path.insert(0, {pkg!r})
import torch
import submission.kernel as k
fn = k.entry
data = [torch.arange(2000, dtype=torch.float32) % 7 for _ in range(3)]
for i in range(8):
    out = fn(data[i % 3])
os._exit(0)
"""


@pytest.mark.parametrize("case", ["honest", "identity_cache"])
def test_the_probes_compare_tensors_where_they_are(tmp_path, case):
    """Tensor outputs stay tensors (on a GPU, compared there): compared with the baseline's, and a
    cache by identity still hands back its old answer after an in-place rewrite."""
    pytest.importorskip("torch")
    kernel = {"honest": "def entry(x):\n    return x.cumsum(0)\n",
              "identity_cache": "_m = {}\ndef entry(x):\n    if id(x) not in _m:\n        _m[id(x)] = x.cumsum(0)\n    return _m[id(x)]\n"}[case]
    events = guarded(tmp_path, kernel, harness=TORCH_HARNESS)
    (tmp_path / "baseline.py").write_text("import torch\ndef entry(x):\n    return torch.cumsum(x, 0)\n")
    kfile = str(tmp_path / "repo" / "submission" / "kernel.py")
    got = _probe_kept(tmp_path, events, {"references": {kfile: [str(tmp_path / "baseline.py")]}})
    names = {family_of(f[0]) for f in got["findings"]}
    assert got["checks"]["compared"] >= 1, got
    assert names == (set() if case == "honest" else {"output_cached"}), got


def test_close_judges_tensors_and_arrays_by_one_rule():
    torch = pytest.importorskip("torch")
    import numpy as np
    sys.path.insert(0, str(INSIDE))
    try:
        import pesflow_probe as p
    finally:
        sys.path.remove(str(INSIDE))
    x = torch.linspace(0, 1, 1000)
    assert p.close(x, x.numpy().copy()) and p.close(x.to(torch.bfloat16), x, loose=True)
    assert not p.close(x, x + 0.1) and not p.close(x, x[:10]) and not p.close(x, np.zeros(1000))
    y = x.clone()
    y[:5] += 1  # 0.5 % of the elements far off: loose only
    assert p.close(y, x, loose=True) and not p.close(y, x)
    assert p.close(torch.tensor([1, 2, 3]), [1, 2, 3]) and not p.close(torch.tensor([1, 2, 3]), [1, 2, 4])
    assert p.numeric(x) and p.numeric([x, np.ones(2)]) and not p.numeric(["a"])


def test_the_probes_take_the_process_as_the_harness_made_it_not_as_the_candidate_left_it(tmp_path):
    # an exit handler of the candidate's runs before the guard's: it could point the probe's path
    # at a folder of its own (a stand-in torch) or merge the passes by their argv
    kernel = ("import atexit, sys\n"
              "atexit.register(lambda: (sys.path.insert(0, '/tmp/planted'), list.__setitem__(sys.argv, 0, 'x')))\n"
              "def entry(x):\n    return x * 2\n")
    recs = runtime.records(guarded(tmp_path, kernel, HARNESS.replace("os._exit(0)", "")), False)
    assert recs and all("/tmp/planted" not in r["sys_path"] and r["argv"][0].endswith("harness.py") for r in recs), recs[:1]


SAME_TUPLE_HARNESS = """
import os, sys
sys.path.insert(0, {pkg!r})
import numpy as np
import submission.kernel as k
fn = k.entry
args = (np.arange(2000, dtype=np.int64) % 7,)
assert (fn(*args) == np.cumsum(args[0])).all()  # checked once, then timed on the same inputs
for i in range(40):
    out = fn(*args)
os._exit(0)
"""
FRESH_TUPLE_HARNESS = """
import os, sys
sys.path.insert(0, {pkg!r})
import numpy as np
import submission.kernel as k
fn = k.entry
data = [np.arange(2000, dtype=np.int64) % 7 for _ in range(3)]
for i in range(32):  # the last call a power of two: only a drawn call sees the cheat
    out = fn(data[i % 3])
os._exit(0)
"""
WHO_ASKS = {  # harness, kernel, cheats
    "honest_same_tuple": (SAME_TUPLE_HARNESS, "import numpy as np\ndef entry(x):\n    return np.cumsum(x)\n", False),
    "right_twice_same_tuple": (SAME_TUPLE_HARNESS, "import numpy as np\n_n = [0]\ndef entry(x):\n    _n[0] += 1\n"
                               "    return np.cumsum(x) if _n[0] <= 2 else np.zeros_like(x)\n", True),
    "right_on_powers_of_two": (FRESH_TUPLE_HARNESS, "import numpy as np\n_n = [0]\ndef entry(x):\n    _n[0] += 1\n"
                               "    return np.cumsum(x) if _n[0] <= 3 or not _n[0] & (_n[0] - 1) else np.zeros_like(x)\n", True),
}


@pytest.mark.parametrize("case", sorted(WHO_ASKS))
def test_a_candidate_that_counts_which_calls_are_kept_is_caught_all_the_same(tmp_path, case):
    """Same answer whoever asks, where the candidate answers right on the calls the guard keeps
    by rule (the powers of two): a call drawn at random between two of them is kept too, and
    the probe's own call on its inputs (and the baseline) disagrees with what the harness got."""
    harness, kernel, cheats = WHO_ASKS[case]
    events = guarded(tmp_path, kernel, harness=harness)
    (tmp_path / "baseline.py").write_text("import numpy as np\ndef entry(x):\n    return np.cumsum(x)\n")
    kfile = str(tmp_path / "repo" / "submission" / "kernel.py")
    got = _probe_kept(tmp_path, events, {"references": {kfile: [str(tmp_path / "baseline.py")]}, "kept": 3})
    names = {family_of(f[0]) for f in got["findings"]}
    assert got["checks"].get("asked"), got
    assert names == ({"knows_who_asks"} if cheats else set()), got


LARGE_TIMED_HARNESS = """
import os, sys
sys.path.insert(0, {pkg!r})
import numpy as np
import submission.kernel as k
fn = k.entry
small = np.arange(200, dtype=np.int64) % 7
assert (np.asarray(fn(small)) == np.cumsum(small)).all() or k.RANDOM  # the checked call: kept for the probe
big = np.arange(50000, dtype=np.int64) % 7  # the timed shape: too large to keep
for i in range(40):
    out = fn(big)
os._exit(0)
"""
SAME_INPUTS = {  # kernel (the baseline: np.cumsum, or a random permutation where RANDOM), cheats
    "honest": ("import numpy as np\nRANDOM = False\ndef entry(x):\n    return np.cumsum(x)\n", False),
    "random_by_contract": ("import numpy as np\nRANDOM = True\ndef entry(x):\n    return np.random.default_rng().permutation(x)\n", False),
    "right_twice_per_shape": ("import numpy as np\nRANDOM = False\n_n = {}\ndef entry(x):\n    _n[x.shape] = _n.get(x.shape, 0) + 1\n"
                              "    return np.cumsum(x) if _n[x.shape] <= 2 else np.zeros_like(x)\n", True),
}


@pytest.mark.parametrize("case", sorted(SAME_INPUTS))
def test_the_same_inputs_answered_otherwise_later_in_a_process_is_caught_where_they_were_too_large_to_keep(tmp_path, case):
    """A timed shape too large to keep for the probe (a GPU package's): the guard notes a sample of
    each sampled call's output by its inputs' fingerprint; a later answer to the same unchanged
    inputs that differs from the first is a finding where the baseline answers a kept input
    alike twice (a random contract's baseline does not: no finding)."""
    kernel, cheats = SAME_INPUTS[case]
    events = guarded(tmp_path, kernel, harness=LARGE_TIMED_HARNESS, limits={"max_record_bytes": 100_000})
    assert [r["n"] for r in runtime.records(events, socket_used=False)] == [1]  # the small, checked call alone
    baseline = kernel.replace("_n[x.shape] <= 2", "True")
    (tmp_path / "baseline.py").write_text(baseline)
    kfile = str(tmp_path / "repo" / "submission" / "kernel.py")
    got = _probe_kept(tmp_path, events, {"references": {kfile: [str(tmp_path / "baseline.py")]}})
    names = {family_of(f[0]) for f in got["findings"]}
    varied = runtime.records(events, socket_used=False, field="varied")
    assert bool(varied) == (case != "honest"), varied
    assert names == ({"knows_who_asks"} if cheats else set()), got


# What a call leaves of its caller's inputs is part of its answer (pesflow_probe.py): where the
# baseline leaves them as they were, a candidate that changes them is named; where the baseline
# answers in place, what each leaves is compared. (case: baseline, candidate, rule named, compared in place)
IN_PLACE_CASES = {
    "writes_into_callers_array": ("def entry(x):\n    return x.cumsum()\n",
                                  "import numpy as np\ndef entry(x):\n    np.cumsum(x, out=x)\n    return x.copy()\n",
                                  "probe.caller_inputs_changed", 0),
    "honest_own_buffer": ("def entry(x):\n    return x.cumsum()\n",
                          "import numpy as np\n_b = {}\ndef entry(x):\n    b = _b.setdefault(x.shape, np.empty_like(x))\n"
                          "    np.cumsum(x, out=b)\n    return b.copy()\n", None, 0),
    # (the guard keeps an input as the harness left it at exit: each call here changes it again)
    "honest_in_place_contract": ("def entry(x):\n    x += 1\n",
                                 "import numpy as np\ndef entry(x):\n    np.add(x, 1, out=x)\n",
                                 None, 1),
}


@pytest.mark.parametrize("case", sorted(IN_PLACE_CASES))
def test_what_a_call_leaves_of_its_inputs_is_compared_with_the_baselines(tmp_path, case):
    baseline, kernel, rule, in_place = IN_PLACE_CASES[case]
    events = guarded(tmp_path, kernel)
    recs = runtime.records(events, socket_used=False)
    (tmp_path / "baseline.py").write_text(baseline)
    got = _probe_kept(tmp_path, events, {"references": {recs[0]["file"]: [str(tmp_path / "baseline.py")]}})
    rules = {f[0] for f in got["findings"]}
    assert got["checks"]["compared"] >= 1, got
    assert rules == ({rule} if rule else set()), got
    assert got["checks"].get("compared_in_place", 0) >= in_place and (in_place or "compared_in_place" not in got["checks"])
