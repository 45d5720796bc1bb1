"""The screen never changes the figure it screens (evaluator/trust/watch.py).

A grader that counts what its process does counts the guard's work too, and a timed one times
it, so the score always comes from a grading with nothing of the screen in it and the guard
watches a second one. The toy package's traced-events grader is a count: with the guard inside
its process the figure moves; the official figure is the screen-off figure exactly, whether the
package declares its metric a count or declares nothing (which the format reads as a time).
"""

import shutil
from pathlib import Path

import pytest

from evaluator.evaluation import CandidateSource
from evaluator.trust import watch
from evaluator.verdict import Status
from tests.conftest import needs_root, toy_tasks_root

FASTER = """def sum_squares(n):
    total = 0
    i = 0
    while i < n:
        total += i * i + (i + 1) * (i + 1)
        i += 2
    if n % 2 == 1:
        total -= n * n
    return total
"""
# Knows when it is watched: pesflow's modules are in the process only then.
WATCHED = "import sys\n\ndef _watched():\n    return any(m.startswith('pesflow') for m in list(sys.modules))\n\n"
FAST_UNWATCHED = WATCHED + """def sum_squares(n):
    if not _watched():
        return (n - 1) * n * (2 * n - 1) // 6
    total = 0
    for i in range(n):
        total += i * i
    return total
"""
WRONG_WHEN_WATCHED = WATCHED + FASTER.replace("    return total\n", "    return total + _watched()\n")


# ------------------------------------------------------------------ the pure rules
@pytest.mark.parametrize("metric_kind, timing_metric, kind", [
    (None, None, "timed"), ("wall_time", None, "timed"), (None, "wall_time_ms", "timed"), (None, "speedup", "timed"),
    (None, "paraphrase_mining_speedup", "timed"), ("latency_us", None, "timed"),
    ("instruction_count", "callgrind_ir", "counted"), ("peak_memory", "peak_memory", "counted"),
    ("bytes_moved", None, "counted"), (None, "recompile_count", "counted"), ("op_count", None, "counted"),
    ("peak_usage", None, "counted"),  # "us" only as a unit of its own, never inside a word
    ("wall_time", "callgrind_ir", "counted"),  # either declaration naming a count makes it one
])
def test_a_declared_metric_that_names_no_time_is_a_count(metric_kind, timing_metric, kind):
    assert watch.figure_kind(metric_kind, timing_metric)[0] == kind


def test_what_the_watched_grading_must_reproduce():
    ok = {"correct": True, "figure": 2.0}
    assert watch.compare(ok, {"correct": True, "figure": 1.2, "status": "ok"}, 2.0) == []
    assert watch.compare(ok, {"correct": True, "figure": 3.0, "status": "ok"}, 2.0) == []  # higher watched: no gain
    far = watch.compare(ok, {"correct": True, "figure": 0.9, "status": "ok"}, 2.0)
    assert len(far) == 1 and far[0].startswith(watch.WATCHED_DIFFERS) and "2.22x" in far[0]
    # a time: the guard inside the timed window moves an honest figure more than that, so only correctness counts
    assert watch.compare(ok, {"correct": True, "figure": 0.9, "status": "ok"}, 2.0, timed=True) == []
    failed = watch.compare(ok, {"correct": False, "figure": None, "status": "hard_fail", "reasons": ["correctness_failed"]}, 2.0)
    assert watch.compare(ok, {"correct": False, "figure": None, "status": "hard_fail"}, 2.0, timed=True)
    assert failed and "correctness_failed" in failed[0]


# ------------------------------------------------------------------ graded for real
@pytest.fixture(scope="module")
def counted(tmp_path_factory, cache_dir):
    """The toy package with a deterministic grader that declares its metric a count, and an
    evaluator for each setting: screen off, on (auto), on without the static read (unread), on
    in a search that defers (deferring); and the same package declaring no metric (a time, as
    the format reads it), screen off and on (undeclared-off, undeclared)."""
    from evaluator.config import EvaluatorConfig, LocalConfig, TrustConfig
    from evaluator.evaluation import Evaluator

    root, plain = tmp_path_factory.mktemp("counted"), tmp_path_factory.mktemp("undeclared")
    pkg = toy_tasks_root(root)
    toy_tasks_root(plain)
    toml = pkg / "task.toml"
    toml.write_text(toml.read_text().replace('name = "speedup"\n', 'name = "speedup"\nmetric_kind = "traced_events"\n'))
    evs = {name: Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir)), trust=TrustConfig(**kw)),
                           tasks_roots=[plain if name.startswith("undeclared") else root],
                           log_root=tmp_path_factory.mktemp(name))
           for name, kw in (("off", {"enabled": False}), ("auto", {}), ("unread", {"static": False}),
                            ("deferring", {"defer_below_best": "always"}), ("undeclared-off", {"enabled": False}),
                            ("undeclared", {}))}
    yield evs
    for ev in evs.values():
        ev.close()
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(plain, ignore_errors=True)


def grade(ev, code: str, grader: str = "hidden"):
    return ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": code}), grader=grader)


@needs_root
@pytest.mark.parametrize("grader", ["hidden", "dev"])
@pytest.mark.parametrize("declared", ["", "undeclared"])
def test_the_official_figure_is_the_screen_off_figure_exactly(counted, grader, declared):
    off = grade(counted["off" if not declared else "undeclared-off"], FASTER, grader)
    on = grade(counted["auto" if not declared else "undeclared"], FASTER, grader)
    assert off.status == on.status == Status.ok and off.speedup > 1, off.message
    assert on.speedup == off.speedup and on.reward == off.reward and on.dev == off.dev
    # the guard inside the counted process moves the count: why the official grading never has it
    w = on.trust.checks["watch"]
    assert w["how"] == "apart" and w["watched"] and w["figure"] != off.speedup and w["why"] == watch.WHY
    assert on.trust.checks["screened"] and "runtime" in on.trust.checks  # the watch happened, in the second grading
    assert not on.trust.suspect and not on.trust.needs_review, on.trust.reasons


@needs_root
def test_a_failing_candidate_is_graded_once(counted):
    v = grade(counted["auto"], "def sum_squares(n):\n    return 0\n")
    assert v.status == Status.hard_fail and v.trust.checks["watch"]["watched"] is False


@needs_root
def test_a_figure_no_faster_than_the_baseline_is_never_watched(counted):
    # nothing a cheat gains there (the probes' own rule where the guard is inside): no second
    # grading now, and none later, since it is not deferred either (a search that picks it as a
    # parent makes no parent-check)
    same = "def sum_squares(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n_variant = 1\n"
    slower = "def sum_squares(n):\n    return sum(i * i for i in range(n))\n"
    for how, code, kwargs in (("the same", same, {}), ("slower", slower, {}), ("under a search's best", same, {"result_bar": 1e9})):
        v = counted["deferring"].evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": code}), grader="hidden",
                                          **kwargs)
        w = v.trust.checks["watch"]
        assert v.correct and v.speedup <= 1.0, (how, v.status, v.speedup, v.hard_fail_reasons)
        assert w["watched"] is False and "no faster" in w["because"] and not v.trust.deferred, (how, w)
        assert not (Path(v.log_dir) / "watched").exists()


@needs_root
def test_a_figure_under_the_search_s_best_is_watched_only_once_picked(counted):
    # a search's best so far over this figure: it could not become a result when graded, so the
    # second grading waits (trust.deferred) until the search picks it; its score is the same
    assert not grade(counted["auto"], FASTER).trust.deferred  # no bar (no search), no deferral
    v = counted["deferring"].evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FASTER}), grader="hidden",
                                      result_bar=1e9)
    w = v.trust.checks["watch"]
    assert v.status == Status.ok and v.trust.deferred and w["watched"] is False and w["deferred"], w
    assert not (Path(v.log_dir) / "watched").exists()
    assert v.speedup == grade(counted["off"], FASTER).speedup
    # picked (a parent-check): only the watched grading is made, the figure stays the scored one
    again = counted["deferring"].evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FASTER}),
                                          grader="hidden", scored=v)
    w = again.trust.checks["watch"]
    assert w["watched"] and w["scored"] == v.log_dir and not again.trust.deferred and not again.trust.suspect, w
    assert again.speedup == v.speedup and sorted(p.name for p in Path(again.log_dir).iterdir()) == ["candidate.diff", "verdict.json", "watched"]
    over = counted["deferring"].evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FASTER}),
                                         grader="hidden", result_bar=1.0)
    assert over.trust.checks["watch"]["watched"] and not over.trust.deferred
    # the static read still runs on a deferred grading: a spelling it knows is suspect, not deferred
    sniff = counted["deferring"].evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST_UNWATCHED}),
                                          grader="hidden", result_bar=1e9)
    assert sniff.trust.suspect and not sniff.trust.deferred


@needs_root
@pytest.mark.parametrize("code, says", [(FAST_UNWATCHED, "when scored"), (WRONG_WHEN_WATCHED, "correct when scored")])
def test_a_candidate_that_knows_it_is_watched_needs_review(counted, code, says):
    # the static read names the probe (it walks sys.modules for pesflow's names): off here, to
    # stand for a spelling it misses, so that what is left is the watched grading's evidence
    assert grade(counted["auto"], code).trust.suspect
    v = grade(counted["unread"], code)
    assert v.status == Status.ok, v.message
    assert v.trust.needs_review and v.trust.reasons[0].startswith(watch.WATCHED_DIFFERS), v.trust.reasons
    assert says in v.trust.reasons[0]


# ------------------------------------------------------------------ a bundled package that counts instructions
@pytest.fixture(scope="module")
def callgrind(tmp_path_factory, cache_dir):
    """The bundled kfc/nativehist-merge (callgrind's instruction count, its hash seed fixed), screen off and on."""
    from evaluator.config import EvaluatorConfig, LocalConfig, TrustConfig
    from evaluator.evaluation import Evaluator

    evs = {name: Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir)), trust=TrustConfig(**kw)),
                           log_root=tmp_path_factory.mktemp(name))
           for name, kw in (("off", {"enabled": False}), ("auto", {}))}
    yield evs
    for ev in evs.values():
        ev.close()


@needs_root
@pytest.mark.slow
@pytest.mark.parametrize("grader", ["hidden", "dev"])
def test_an_instruction_count_reads_the_same_with_the_screen_on(callgrind, grader):
    off = callgrind["off"].evaluate("kfc/nativehist-merge", mode="oracle", grader=grader)
    on = callgrind["auto"].evaluate("kfc/nativehist-merge", mode="oracle", grader=grader)
    assert off.status == on.status == Status.ok and off.speedup > 1.2, (off.message, on.message)
    # (the dev engine's own figure; its baseline is each evaluator's own noop grading, never screened)
    assert (on.speedup, on.reward, on.dev and on.dev.value) == (off.speedup, off.reward, off.dev and off.dev.value)
    w = on.trust.checks["watch"]
    assert w["how"] == "apart" and w["watched"] and w["status"] == "ok"
    # the guard inside the counted processes is counted with them: the watched figure moved
    assert w["figure"] != off.speedup
    assert not on.trust.suspect and not on.trust.needs_review, on.trust.reasons
