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


@pytest.mark.parametrize("entry", [
    "import functools\ndef _impl(x, scale):\n    return x * scale\nentry = functools.partial(_impl, scale=1)\n",
    "class _K:\n    def run(self, x):\n        return x + 0\nentry = _K().run\n",
    "import functools\nclass _K:\n    def run(self, x, s):\n        return x * s\nentry = functools.partial(_K().run, s=1)\n",
    "class _K:\n    scale = 1\n    def __call__(self, x):\n        return x * self.scale\nentry = _K()\n",
], ids=["partial", "bound_method", "partial_of_a_bound_method", "callable_instance"])
def test_an_entry_point_that_is_not_a_plain_function_is_watched_by_its_name(tmp_path, entry):
    """The harness's k.entry sampled and kept whatever kind of callable it is, under the name the
    harness took it by (what the probe looks up again, in the candidate's module and the baseline's)."""
    events = guarded(tmp_path, entry)
    assert families(events) == {}
    recs = runtime.records(events, socket_used=False)
    assert recs and {r["fn"] for r in recs} == {"entry"} and all(r["argv"][-1] == "timing" for r in recs)
    assert {e["fn"] for e in events if e["kind"] == "call"} == {"submission.kernel:entry"}


def test_a_callable_instance_s_stand_in_is_the_instance_to_the_harness_but_for_the_call():
    """A harness that reads or sets the instance's other attributes, or asks its class, sees the
    instance; only the call goes through the guard."""
    from evaluator.trust.inside.pesflow_guard_calls import StandIn, code_behind, stand_in

    class K:
        scale = 2

        def __call__(self, x):
            return x * self.scale
    k, calls = K(), []

    def call(*a):
        calls.append(a)
        return k(*a)
    s = stand_in(k, call)
    assert isinstance(s, StandIn) and isinstance(s, K) and s.__class__ is K and s.__wrapped__ is k
    assert s(3) == 6 and calls == [(3,)]
    s.scale = 5
    assert k.scale == 5 and s.scale == 5 and s(1) == 5
    assert code_behind(k) is K.__call__ and code_behind(K) is None and code_behind(len) is None
    assert stand_in(len, call) is call and stand_in(call, call) is call


def test_a_child_python_that_keeps_site_is_not_guard_evasion(tmp_path):
    kernel = ("import subprocess, sys\ndef entry(x):\n"
              "    subprocess.run([sys.executable, '-I', '-c', 'pass'], check=True)\n"
              "    subprocess.run([sys.executable, '-E', '-c', 'pass'], check=True)\n    return x\n")
    assert families(guarded(tmp_path, kernel)) == {}


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
    ("import subprocess, sys\ndef entry(x):\n    subprocess.run([sys.executable, '-uS', '-c', 'pass'])\n    return x\n",
     "guard_evasion", "kernel.py:3"),  # without site: no guard in the child (pesflow_rules.skips_site)
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


LONG_INPUTS = """
import gc, os, sys, weakref
sys.path.insert(0, {pkg!r})
import numpy as np
import submission.kernel as k
k.entry([np.arange(128, dtype=np.int64) for _ in range(300)])  # 300 KiB in all: kept
many = [np.zeros(1024) for _ in range(300)]  # 2.4 MiB in all, in small pieces: over the limit
held = weakref.ref(many[150])
out = k.entry(many)
del many, out
gc.collect()
os._exit(3 if held() is not None else 0)
"""


def test_a_long_list_of_small_arrays_is_sized_by_its_whole_length(tmp_path):
    # the size is estimated from items spread over a long list (walking each item cost a
    # millisecond inside every sampled call): still the whole list's bytes, kept or refused as one
    events = guarded(tmp_path, "def entry(x):\n    return len(x)\n", LONG_INPUTS, limits={"max_record_bytes": 1 << 20})
    assert [(e["fn"], e["why"]) for e in events if e["kind"] == "record_skipped"] == [("entry", "too large")]
    end = [e for e in events if e["kind"] == "end"][0]
    assert [(200 << 10) < r["size"] < 1 << 20 for r in end["records"]] == [True], end["records"]


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
