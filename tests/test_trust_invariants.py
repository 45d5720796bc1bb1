"""The trust screen's invariants, tried with spellings it has no rule for (local backend, the
toy package graded for real, both graders).

Same answer whoever asks: the guard keeps the output the grader's call got, and the probe
makes the same call again, in a process that differs from the grader's in what an honest
function cannot notice; a candidate that answers the grader's timed calls otherwise than it
answers pesflow (and than the baseline) is suspect, however it tells the two apart. Each
cheat below answers right in the correctness pass and 0 (at no cost) in the timing pass,
told apart by a feature no rule of the screen names; an honest candidate whose answer varies
from process to process (a set's order) is left alone, as is one that changes its own
inputs."""

from __future__ import annotations

import pytest

from evaluator.candidate import CandidateSource
from tests.conftest import needs_root

pytestmark = needs_root

RIGHT = "    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
# the timing pass calls with n = 200000, the correctness pass with n <= 12345
TIMED = {
    "calls_counted": "_c = [0]\ndef sum_squares(n):\n    _c[0] += 1\n    if _c[0] > 5 and n > 100000:\n        return 0\n" + RIGHT,
    "caller_by_warnings": (  # the caller's file, found through the warnings machinery, past any wrapper
        "import warnings as _w\n"
        "def _askers():\n"
        "    with _w.catch_warnings(record=True) as got:\n"
        "        _w.simplefilter('always')\n"
        "        for level in range(3, 8):\n"
        "            _w.warn('x', stacklevel=level)\n"
        "    return ' '.join(g.filename for g in got)\n"
        "def sum_squares(n):\n"
        "    if n > 100000 and 'grade' in _askers():\n        return 0\n" + RIGHT),
    "time_since_first_call": (
        "import time as _t\n_first = []\n"
        "def sum_squares(n):\n"
        "    _first.append(_t.monotonic()) if not _first else None\n"
        "    if n > 100000 and len(_first) and _t.monotonic() - _first[0] > 0.0 and _seen[0]:\n        return 0\n"
        "    _seen[0] = _seen[0] or n <= 12345\n" + RIGHT + "_seen = [False]\n"),
    "parent_process": (
        "import os as _o\n"
        "def _parent():\n"
        "    try:\n        return _o.readlink('/'.join(['', 'pr' + 'oc', str(_o.getppid()), 'e' + 'xe']))\n"
        "    except OSError:\n        return ''\n"
        "_P = _parent()\n"
        "def sum_squares(n):\n"
        "    if n > 100000 and _P.endswith('sh'):\n        return 0\n" + RIGHT),
}


def grade(evaluator, code: str, grader: str):
    task = evaluator.task("kfc/toy-sum")
    return evaluator.evaluate(task, candidate=CandidateSource(files={"toy/kernel.py": code}), grader=grader)


# Where the probe shares the feature a cheat reads (in the hidden grader's own sandbox its
# parent is a shell too), the cheat answers pesflow as wrongly as the grader: that is the
# invariant "same answer as the baseline" (not built for single calls: an answer with many
# right forms, a random choice, would be called wrong), not this one.
GAPS = {("parent_process", "hidden"): "the probe's parent is a shell as the grader's is: wrong for pesflow too"}


def _cases():
    for spelling in sorted(TIMED):
        for grader in ("hidden", "dev"):
            gap = GAPS.get((spelling, grader))
            yield pytest.param(spelling, grader, id=f"{spelling}-{grader}",
                               marks=[pytest.mark.xfail(strict=True, reason=gap)] if gap else [])


@pytest.mark.parametrize(("spelling", "grader"), list(_cases()))
def test_an_answer_that_depends_on_who_asks_is_suspect(evaluator, spelling, grader):
    v = grade(evaluator, TIMED[spelling], grader)
    shown = (v.status, v.speedup, v.trust.reasons, (v.trust.checks.get("probes") or {}).get("asked"))
    assert v.correct and v.speedup and v.speedup > 10, shown  # the grader alone pays it
    assert v.trust.suspect, shown
    assert "knows_who_asks" in v.trust.families, shown


HONEST = {
    "closed_form": "def sum_squares(n):\n" + RIGHT,
    # gc paused around its own work, and put back as it was
    "gc_paused": ("import gc as _gc\ndef sum_squares(n):\n    was = _gc.isenabled()\n    _gc.disable()\n    try:\n"
                  "        return _f(n)\n    finally:\n        _gc.enable() if was else None\n"
                  "def _f(n):\n" + RIGHT),
    # the three factors made by a pool of threads, joined before it returns
    "joined_pool": ("from concurrent.futures import ThreadPoolExecutor as _P\n"
                    "def sum_squares(n):\n    n -= 1\n    if n <= 0:\n        return 0\n"
                    "    with _P(3) as p:\n        a, b, c = p.map(lambda f: f(n), (lambda m: m, lambda m: m + 1, lambda m: 2 * m + 1))\n"
                    "    return a * b * c // 6\n"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_answers_are_the_same_whoever_asks(evaluator, name):
    v = grade(evaluator, HONEST[name], "hidden")
    assert v.correct and not v.trust.suspect, (v.status, v.trust.reasons)
    assert (v.trust.checks.get("probes") or {}).get("asked", 0) >= 1, v.trust.checks.get("probes")


# The figure reproduced: the baseline's own code, which on its first call finds the harness's
# baseline module in its caller's globals and makes its function sleep 400 ms a call (rules name
# that too): a figure of 25x or more even on a loaded machine, far past the 10x line over pesflow's
# ratio (at 150 ms the figure fell to 11x under load, at the line). The figure pesflow reproduces
# is the baseline's, loaded by pesflow before any candidate code, against the candidate: no faster
# than it.
SLOWS_BASELINE = (
    "import sys as _s, time as _t\n"
    "def _slow(f):\n"
    "    def g(n):\n"
    "        _t.sleep(0.4)\n"
    "        return f(n)\n"
    "    return g\n"
    "def sum_squares(n):\n"
    "    f = _s._getframe(1)\n"
    "    while f is not None and 'base' not in f.f_globals:\n"
    "        f = f.f_back\n"
    "    m = f.f_globals['base'] if f is not None else None\n"
    "    if m is not None and not hasattr(m, '_pf'):\n"
    "        m._pf = m.sum_squares = _slow(m.sum_squares)\n"
    "    return sum(i * i for i in range(n))\n")


@pytest.mark.parametrize("grader", ("hidden", "dev"))
def test_a_figure_pesflow_cannot_reproduce_is_suspect(evaluator, grader):
    v = grade(evaluator, SLOWS_BASELINE, grader)
    probes = v.trust.checks.get("probes") or {}
    shown = (v.status, v.speedup, v.trust.reasons, probes.get("pace"), probes.get("reproduced"))
    assert v.correct and v.speedup and v.speedup > 3, shown  # the grader alone pays it
    assert v.trust.suspect and "speed_not_reproduced" in v.trust.families, shown
