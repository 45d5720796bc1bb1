"""The figure reproduced (evaluator/trust/inside/pesflow_probe_pace.py), in this process: the
frozen baseline timed on a kept call before any candidate code gives its answer there too, so
the probe compares the candidate's with it and calls the baseline no more (on a fast
candidate the baseline's calls are most of a probe's time)."""

from __future__ import annotations

import sys

from evaluator.trust.instrument import INSIDE

sys.path.insert(0, str(INSIDE))
import pesflow_probe_pace as pace  # noqa: E402

HELPERS = {"sync": lambda: None, "on_gpu": lambda: False, "nbytes": lambda v: 64, "plain": lambda v: [int(x) for x in v]}


def test_the_baselines_timed_call_gives_its_answer_once_per_kept_call():
    calls = []

    def base(xs, scale=1):
        calls.append(list(xs))
        return [x * 2 * scale for x in xs]

    chosen = [(4, {"fn": "base"}, ([1, 2, 3],), {"scale": 1}), (9, {"fn": "base"}, ([5],), {"scale": 10})]
    answers: dict[int, object] = {}
    times = pace.baseline_first(chosen, lambda rec: base, HELPERS, 2.0, answers)
    assert answers == {4: [2, 4, 6], 9: [100]}
    assert sorted(times) == [4, 9] and all(t[0] > 0 and t[1] == pace._ROUNDS for t in times.values()), times
    assert chosen[0][2] == ([1, 2, 3],), "each call had its own copy of the kept input"


def test_an_answer_with_no_plain_form_is_left_to_the_probe():
    def base(xs):
        return object()  # the probe's plain() refuses it: the probe calls the baseline itself

    answers: dict[int, object] = {}
    times = pace.baseline_first([(0, {"fn": "base"}, ([1],), {})], lambda rec: base,
                                {**HELPERS, "plain": lambda v: (_ for _ in ()).throw(TypeError("not plain"))}, 2.0, answers)
    assert answers == {} and list(times) == [0]


def test_without_a_place_for_answers_the_timing_is_as_before():
    times = pace.baseline_first([(1, {"fn": "f"}, ([1, 2],), {})], lambda rec: (lambda xs: sum(xs)), HELPERS, 2.0)
    assert list(times) == [1] and times[1][1] == pace._ROUNDS
