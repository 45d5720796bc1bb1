"""The runtime guard and the probes, run for real in child interpreters (no sandbox): each case
is a harness script calling a candidate module, with the guard loaded as a grading loads it
(a site hook on the interpreter's path) and its config where pesflow's tests may put it.
The guard must name each way of cheating at the line that does it, stay silent on honest code
(the standard library reads frames too), and keep the harness's inputs even when the harness
ends with os._exit."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evaluator.trust import runtime
from evaluator.trust.findings import family as family_of
from evaluator.trust.instrument import INSIDE

HARNESS = """
import os, sys, time
sys.path.insert(0, {pkg!r})
import numpy as np
import submission.kernel as k
fn = k.entry
data = [np.arange(2000, dtype=np.int64) % 7 for _ in range(3)]
for i in range(8):
    t0 = time.perf_counter()
    out = fn(data[i % 3])
    t1 = time.perf_counter()
os._exit(0)
"""


def guarded(tmp_path: Path, kernel: str, harness: str = HARNESS, argv: tuple[str, ...] = ("timing",),
            limits: dict | None = None, env: dict[str, str] | None = None, image: dict[str, str] | None = None) -> list[dict]:
    """Run `harness` under the guard with `kernel` as the candidate; the guard's events. `image`:
    more files of the repository (relative path -> text), there before the grading began."""
    pkg = tmp_path / "repo"
    (pkg / "submission").mkdir(parents=True, exist_ok=True)
    (pkg / "submission" / "__init__.py").write_text("")
    (pkg / "submission" / "helpers.py").write_text("OFFSET = 0\n")
    for rel, text in (image or {}).items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    src = textwrap.dedent(kernel)
    (pkg / "submission" / "kernel.py").write_text(src)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    cfg = {"candidate_paths": {"submission/kernel.py": str(pkg / "submission" / "kernel.py")},
           "candidate_hashes": {hashlib.sha256(src.encode()).hexdigest(): "submission/kernel.py"},
           "baseline_hashes": {}, "mode_vars": ["KERNELBENCH_VERIFY_MODE"], "out_dir": str(out), "record": True,
           "source_root": str(pkg), **(limits or {})}
    if cfg.get("started") == "now":  # the grading began once the repository was in place
        cfg["started"] = time.time()
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "harness.py").write_text(harness.format(pkg=str(pkg)))
    env = {**os.environ, "PESFLOW_TRUST_TEST_CONFIG": str(tmp_path / "config.json"), "PYTHONPATH": str(INSIDE),
           "KERNELBENCH_VERIFY_MODE": "candidate", **(env or {})}
    # the .pth line is what site runs in a grading: `import pesflow_guard`
    r = subprocess.run([sys.executable, "-c", "import pesflow_guard, runpy, sys; sys.argv[:] = sys.argv[1:]; "
                        "runpy.run_path(sys.argv[0], run_name='__main__')", str(tmp_path / "harness.py"), *argv],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    events = []
    for p in out.glob("events-*.jsonl"):
        events += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return events


def families(events: list[dict]) -> dict[str, list[str]]:
    found, _ = runtime.read(events, set())
    out: dict[str, list[str]] = {}
    for f in found:
        out.setdefault(f.family, []).append(f.evidence)
    return out


HONEST = """
import functools, warnings, dataclasses, typing, logging, os, time
from submission import helpers  # the repository's own module beside the scope file: honest to read
import numpy as np
_cache = {}
N = int(os.environ.get("OMP_NUM_THREADS", "1"))
ENV = {**os.environ, "CC": "gcc"}  # the whole environment copied (for a compiler it would start): no read of a grader variable

@dataclasses.dataclass
class Cfg:
    block: int = 64

class Pair(typing.NamedTuple):
    a: int
    b: int

@functools.lru_cache(maxsize=None)
def plan(n):
    return Cfg(block=64 if n > 100 else 8)

def entry(x):
    cfg = plan(x.shape[0] + helpers.OFFSET)
    if x.shape not in _cache:
        _cache[x.shape] = np.empty_like(x)
        warnings.warn("first call for this shape")
        logging.getLogger("k").debug("compiled %s", cfg)
    buf = _cache[x.shape]
    np.cumsum(x, out=buf)
    t = time.perf_counter()  # its own budgeting: reading the clock is honest
    return buf.copy()
"""


def test_honest_code_is_not_flagged_and_the_inputs_are_kept(tmp_path):
    events = guarded(tmp_path, HONEST)
    assert families(events) == {}
    ends = [e for e in events if e["kind"] == "end"]
    assert ends and ends[0]["records"], "os._exit still hands over the kept inputs"
    recs = runtime.records(events, socket_used=False)
    assert {r["fn"] for r in recs} == {"entry"} and all(r["argv"][-1] == "timing" for r in recs)


@pytest.mark.parametrize("kernel,family,line", [
    ("import time\ntime.perf_counter = lambda: 0.0\ndef entry(x):\n    return x\n", "timer_replaced", "kernel.py:2"),
    ("import importlib\nm = importlib.import_module('ti' + 'me')\nr = getattr(m, 'perf_counter')\n"
     "def entry(x):\n    vars(m)['perf_' + 'counter'] = lambda: r() / 1000\n    return x\n", "timer_replaced", None),
    ("import builtins\ndef entry(x):\n    setattr(builtins, 'len', lambda s: 0)\n    return x\n", "harness_patched", "kernel.py:3"),
    ("import sys\ndef entry(x):\n    return x * 0 if 'timing' in sys.argv else x\n", "grader_sniffed", "kernel.py:3"),
    ("def entry(x):\n    return x if open('/proc/self/cmdline').read() else x\n", "grader_sniffed", "kernel.py:2"),
    ("import os\ndef entry(x):\n    return x * (os.environ.get('KERNELBENCH_VERIFY_MODE') != 'x')\n", "grader_sniffed", "kernel.py:3"),
    ("import sys\ndef entry(x):\n    f = sys._getframe(1)\n    return x\n", "caller_inspected", "kernel.py:3"),
    ("import inspect\ndef entry(x):\n    s = inspect.stack()\n    return x\n", "caller_inspected", "kernel.py:3"),
    ("import gc\ndef entry(x):\n    n = len(gc.get_objects())\n    return x\n", "gc_walked", "kernel.py:3"),
    ("import sys\ndef entry(x):\n    m = sys.modules['__main__']\n    m.fn = lambda y: y\n    return x\n", "harness_patched", "kernel.py:4"),
    ("import sys\ndef entry(x):\n    sys.modules['pesflow_guard'].x = 1\n    return x\n", "guard_evasion", "kernel.py:3"),
    ("import sys\ndef entry(x):\n    n = len(sys.modules['__main__'].data)\n    return x\n", "grader_sniffed", "kernel.py:3"),
    ("class Lazy:\n    def __init__(s, x):\n        s.x = x\n    def __array__(s, *a, **k):\n        return s.x\n"
     "def entry(x):\n    return Lazy(x)\n", "lazy_output", None),
])
def test_each_way_of_cheating_is_named_where_it_happens(tmp_path, kernel, family, line):
    found = families(guarded(tmp_path, kernel))
    assert family in found, found
    if line:
        assert any(line in ev for ev in found[family]), found[family]


LARGE_INPUTS = """
import gc, os, sys, weakref
sys.path.insert(0, {pkg!r})
import numpy as np
import submission.kernel as k
small = np.arange(100, dtype=np.int64)
k.entry(small)
big = np.zeros(1 << 18)  # 2 MiB: over the record limit below
held = weakref.ref(big)
out = k.entry(big)
del big, out
gc.collect()
os._exit(3 if held() is not None else 0)  # 3: the guard kept the large input alive
"""


def test_an_input_too_large_to_keep_is_neither_held_nor_pickled(tmp_path):
    # Found on the benchmark: a grader timed on 4 GB GPU tensors; the guard held them (memory the
    # grader measures) and pickled each at exit only to refuse it (50 s of a 338 s grading).
    events = guarded(tmp_path, "def entry(x):\n    return x * 2\n", LARGE_INPUTS, limits={"max_record_bytes": 1 << 20})
    skipped = [e for e in events if e["kind"] == "record_skipped"]
    assert [(e["fn"], e["why"]) for e in skipped] == [("entry", "too large")]
    end = [e for e in events if e["kind"] == "end"][0]
    assert [r["size"] < 1 << 20 for r in end["records"]] == [True], "the small input is still kept"


def test_threads_left_running_call_after_call_are_named_and_a_joined_pool_is_not(tmp_path):
    left = ("import threading, time\ndef entry(x):\n    out = x * 0\n"
            "    threading.Thread(target=lambda: (time.sleep(0.05), out.__setitem__(slice(None), x))).start()\n    return out\n")
    assert "unsynchronized_work" in families(guarded(tmp_path / "left", left))
    pool = ("from concurrent.futures import ThreadPoolExecutor\n_pool = ThreadPoolExecutor(2)\n"
            "def entry(x):\n    parts = list(_pool.map(lambda h: h.cumsum(), [x[:1000], x[1000:]]))\n    return parts[0]\n")
    assert families(guarded(tmp_path / "pool", pool)) == {}


# A file every later interpreter runs before the candidate's code (or instead of pesflow's
# probe), written under a name built at run time: where nothing would attribute what it does.
STARTUP_WRITES = {
    "pth_by_open": "open(os.path.join(site.getusersitepackages(), 'a' + '.pth'), 'w').write('import os')",
    "sitecustomize_by_replace": "t = os.path.join(D, 'tmp'); open(t, 'w').write('x = 1'); "
                                "os.replace(t, os.path.join(D, 'sitecust' + 'omize.py'))",
    "probe_by_pathlib": "pathlib.Path(D, base64.b64decode('cGVzZmxvd19wcm9iZS5weQ==').decode()).write_text('x = 1')",
    "usercustomize_by_os_open": "os.close(os.open(os.path.join(D, 'usercust' + 'omize.py'), os.O_WRONLY | os.O_CREAT))",
    "pth_by_shutil_copy": "shutil.copy(__file__, os.path.join(S, 'z.p' + 'th'))",
    "pth_by_symlink": "os.symlink(__file__, os.path.join(S, 'y.p' + 'th'))",
    "sitecustomize_as_a_package": "os.makedirs(os.path.join(D, 'sitecust' + 'omize'))",
    "guard_shadowed_by_a_package": "os.mkdir(os.path.join(D, 'pesflow' + '_guard'))",
}


@pytest.mark.parametrize("case", sorted(STARTUP_WRITES))
def test_a_file_interpreters_run_at_start_written_by_the_candidate_is_guard_evasion(tmp_path, case):
    d = tmp_path / "dest"
    d.mkdir()
    (d / "site-packages").mkdir()
    kernel = (f"import base64, os, pathlib, shutil, site\nD, S = {str(d)!r}, {str(d / 'site-packages')!r}; "
              f"os.makedirs(site.getusersitepackages(), exist_ok=True)\n{STARTUP_WRITES[case]}\ndef entry(x):\n    return x * 2\n")
    found = families(guarded(tmp_path, kernel, env={"HOME": str(tmp_path / "home")}))
    assert "guard_evasion" in found and any("kernel.py:3" in e for e in found["guard_evasion"]), found


# A module of the repository the candidate did not write (helpers.py beside the scope file): its
# inode's change time made new would pass it off as one the grading wrote, which the guard does
# not watch; rewriting it changes what the harness runs.
IMAGE_MODULE_WRITES = {
    "chmod": ("os.chmod(helpers.__file__, 0o644)", "guard_evasion"),
    "utime_by_pathlib_touch": ("pathlib.Path(helpers.__file__).touch()", "guard_evasion"),
    "chown": ("os.chown(helpers.__file__, os.getuid(), -1)", "guard_evasion"),
    "rewritten_by_append": ("open(helpers.__file__, 'a').write('OFFSET = 1\\n')", "harness_patched"),
    "rewritten_by_os_open": ("os.close(os.open(helpers.__file__, os.O_WRONLY | os.O_APPEND))", "harness_patched"),
}


@pytest.mark.parametrize("case", sorted(IMAGE_MODULE_WRITES))
def test_a_module_of_the_image_changed_by_the_candidate_is_named(tmp_path, case):
    code, family = IMAGE_MODULE_WRITES[case]
    kernel = f"import os, pathlib\nfrom submission import helpers\n{code}\ndef entry(x):\n    return x * 2\n"
    found = families(guarded(tmp_path, kernel, limits={"started": "now"}))
    assert family in found and any("helpers.py" in e and "kernel.py:3" in e for e in found[family]), found


def test_honest_files_a_kernel_writes_are_not_startup_files(tmp_path):
    # a JIT's generated module in a folder of its own, imported by path; an autotuning cache
    kernel = ("import importlib.util, json, os, tempfile\nD = tempfile.mkdtemp()\n"
              "open(os.path.join(D, 'gen_kernel.py'), 'w').write('def f(x):\\n    return x * 2\\n')\n"
              "spec = importlib.util.spec_from_file_location('gen_kernel', os.path.join(D, 'gen_kernel.py'))\n"
              "gen = importlib.util.module_from_spec(spec); spec.loader.exec_module(gen)\n"
              "json.dump({'block': 64}, open(os.path.join(D, 'autotune.json'), 'w'))\n"
              "open(os.path.join(D, 'model.pth'), 'wb').write(b'weights')  # a checkpoint's usual name, not in a site folder\n"
              "os.chmod(os.path.join(D, 'gen_kernel.py'), 0o755)  # its own module: new, not the image's\n"
              "from submission import helpers\nopen(helpers.__file__).read()  # the repository's module, read\n"
              "def entry(x):\n    return gen.f(x)\n")
    assert families(guarded(tmp_path, kernel, limits={"started": "now"})) == {}


PLANTED_FIRST = """
import os, sys, time
sys.path.insert(0, {pkg!r})
open({pkg!r} + "/planted.py", "w").write("import time, builtins\\n_pc = time.perf_counter\\n"
    "time.perf_counter = lambda: _pc() / 1000\\nbuiltins.len = lambda x, _l=len: _l(x)\\n")
import planted  # what a sitecustomize the candidate wrote would do, before the candidate's code
import numpy as np
import submission.kernel as k
k.entry(np.arange(10))
os._exit(0)
"""


def test_a_clock_replaced_before_the_candidate_ran_by_code_the_grading_wrote_is_named(tmp_path):
    found = families(guarded(tmp_path, "def entry(x):\n    return x * 2\n", PLANTED_FIRST, limits={"started": time.time()}))
    assert any("time.perf_counter was already replaced" in e and "planted.py" in e for e in found.get("timer_replaced", [])), found
    assert any("builtins.len was already replaced" in e for e in found.get("harness_patched", [])), found


def test_a_harness_whose_own_files_stand_in_a_clock_is_not_named(tmp_path):
    # a test harness freezing time for a scheduler under test: its files are the image's (older
    # than the grading: `started` after them), so the stand-in clock is the harness's business
    harness = HARNESS.replace("import numpy as np", "import numpy as np\ntime.time = lambda: 1000.0")
    assert families(guarded(tmp_path, "def entry(x):\n    return x * 2\n", harness, limits={"started": time.time() + 3600})) == {}


def test_a_harness_that_wraps_a_builtin_with_installed_code_is_not_named(tmp_path):
    harness = HARNESS.replace("import numpy as np", "import numpy as np, functools, builtins\n"
                              "builtins.print = functools.partial(print, flush=True)")
    assert families(guarded(tmp_path, "def entry(x):\n    return x * 2\n", harness, limits={"started": time.time()})) == {}


def test_without_a_config_the_guard_does_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PESFLOW_TRUST_TEST_CONFIG"}
    env["PYTHONPATH"] = str(INSIDE)
    r = subprocess.run([sys.executable, "-c", "import pesflow_guard, sys; print(pesflow_guard._guard, type(sys.argv).__name__)"],
                       env=env, capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.split() == ["None", "list"]


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


LEFT_RUNNING = {  # kernel, named
    # the thread running before the first call returns (else it may not have begun as the harness ends)
    "raw_thread": ("import _thread, time\n_on = []\ndef _spin(lock):\n    lock.release()\n    while True:\n        time.sleep(0.001)\n"
                   "def entry(x):\n    if not _on:\n        lock = _thread.allocate_lock()\n        lock.acquire()\n"
                   "        _on.append(_thread.start_new_thread(_spin, (lock,)))\n        lock.acquire()\n    return x.cumsum()\n", True),
    "interval_timer": ("import signal\ndef _tick(sig, frame):\n    sum(range(1000))\n"
                       "def entry(x):\n    signal.signal(signal.SIGPROF, _tick)\n    signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)\n"
                       "    return x.cumsum()\n", True),
    "idle_pool_left_open": ("from concurrent.futures import ThreadPoolExecutor\n_pool = ThreadPoolExecutor(2)\n"
                            "def _part(x):\n    return x.cumsum()\n"
                            "def entry(x):\n    return _pool.submit(_part, x).result()\n", False),
}


@pytest.mark.parametrize("case", sorted(LEFT_RUNNING))
def test_work_the_candidate_left_running_as_the_process_ends_is_named(tmp_path, case):
    """A thread however started (a raw one that threading does not count) with the candidate's code
    on its stack, or an interval timer whose handler is the candidate's, still running at the end:
    what it does lands in whatever the harness times next. A pool left open, idle, is not."""
    kernel, named = LEFT_RUNNING[case]
    found = families(guarded(tmp_path, kernel))
    assert ("unsynchronized_work" in found) == named, found
