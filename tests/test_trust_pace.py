"""The figure reproduced (evaluator/trust/inside/pesflow_probe_pace.py), in this process: the
frozen baseline timed on a kept call before any candidate code gives its answer there too, so
the probe compares the candidate's with it and calls the baseline no more (on a fast
candidate the baseline's calls are most of a probe's time)."""

from __future__ import annotations

import sys

from evaluator.trust.instrument import INSIDE

sys.path.insert(0, str(INSIDE))
import pesflow_probe_pace as pace  # noqa: E402
import pesflow_probe_values as values  # noqa: E402

HELPERS = {"sync": lambda: None, "on_gpu": lambda: False, "nbytes": lambda v: 64,
           "plain": lambda v: [int(x) for x in v], "rolled": values.rolled, "far_shifts": values.far_shifts,
           "left_changed": values.left_changed}


def only(fn):
    return lambda rec: [("baseline", fn)]


def test_the_baselines_timed_call_gives_its_answer_once_per_kept_call():
    calls = []

    def base(xs, scale=1):
        calls.append(list(xs))
        return [x * 2 * scale for x in xs]

    chosen = [(4, {"fn": "base"}, ([1, 2, 3],), {"scale": 1}), (9, {"fn": "base"}, ([5],), {"scale": 10})]
    answers: dict[int, object] = {}
    times = pace.baseline_first(chosen, only(base), HELPERS, 2.0, answers)
    assert answers == {4: [2, 4, 6], 9: [100]}
    assert sorted(times) == [4, 9] and all(t[0] > 0 and t[1] >= 1 for t in times.values()), times
    assert times[9][2] is False, "a one-item list has no new values (rolled): copies"
    assert times[4][2] is True and times[4][1] == 1, "a three-item list has one new value: a round of one call"
    assert chosen[0][2] == ([1, 2, 3],), "each call had its own copy of the kept input"


def test_an_answer_with_no_plain_form_is_left_to_the_probe():
    def base(xs):
        return object()  # the probe's plain() refuses it: the probe calls the baseline itself

    answers: dict[int, object] = {}
    times = pace.baseline_first([(0, {"fn": "base"}, ([1],), {})], only(base),
                                {**HELPERS, "plain": lambda v: (_ for _ in ()).throw(TypeError("not plain"))}, 2.0, answers)
    assert answers == {} and list(times) == [0]


def test_without_a_place_for_answers_the_timing_is_as_before():
    times = pace.baseline_first([(1, {"fn": "f"}, ([1, 2],), {})], only(lambda xs: sum(xs)), HELPERS, 2.0)
    assert list(times) == [1] and times[1][1] == pace._ROUNDS


def test_every_timed_call_is_on_values_the_grading_never_passed():
    kept = list(range(200))
    seen = []

    def base(xs):
        seen.append(tuple(xs))
        return [x + 1 for x in xs]

    chosen = [(0, {"fn": "f", "n": 3}, (kept,), {})]
    times = pace.baseline_first(chosen, only(base), HELPERS, 2.0)
    assert times[0][2] is True and times[0][3] == "baseline", times
    assert seen[0] == tuple(kept), "the untimed first call is on the kept input: the answer compared"
    timed = seen[1:]
    assert timed and len(set(timed)) == len(timed), "each timed call its own values"
    assert all(t != tuple(kept) and sorted(t) == kept for t in timed), "new values of the same kind and range"
    # far from the shifts the other probes take (pesflow_probe_values.shifts, first ones)
    others = {tuple(values.rolled(([*kept],), k)[0]) for k in values.shifts(([*kept],), 48)}
    assert not others & set(timed)


def test_an_answer_kept_by_value_is_timed_as_slow_as_it_is():
    # a memo keyed by the inputs' values: fast on the values it saw, as slow as the baseline on new
    memo = {}

    def slow(xs):
        t = 0
        for _ in range(200):
            t += sum(xs)
        return [t]

    def cand(xs):
        key = tuple(xs)
        if key not in memo:
            memo[key] = slow(xs)
        return memo[key]

    chosen = [(0, {"fn": "f", "n": 1}, (list(range(300)),), {})]
    base = pace.baseline_first(chosen, only(slow), HELPERS, 2.0)
    rows = pace.candidate_after(chosen, base, lambda rec: cand, HELPERS, 2.0)
    assert rows and rows[0][5] is True, rows
    assert rows[0][3] / rows[0][2] < 2, f"pesflow's ratio {rows[0][3] / rows[0][2]:.3g}: the memo did not hit"


def test_a_baseline_that_refuses_new_values_is_timed_on_copies_and_the_candidate_too():
    def strict(xs):
        if list(xs) != sorted(xs):
            raise ValueError("sorted input only")
        return [len(xs)]

    chosen = [(0, {"fn": "f", "n": 1}, (list(range(50)),), {})]
    base = pace.baseline_first(chosen, only(strict), HELPERS, 2.0)
    assert base[0][2] is False and base[0][1] >= 1, base
    rows = pace.candidate_after(chosen, base, lambda rec: strict, HELPERS, 2.0)
    assert rows and rows[0][5] is False


def test_a_stub_baseline_is_timed_as_the_package_s_reference():
    def stub(xs):
        raise NotImplementedError

    def reference(xs):
        return [sum(xs)]

    chosen = [(0, {"fn": "f", "n": 1}, (list(range(50)),), {})]
    answers: dict[int, object] = {}
    base = pace.baseline_first(chosen, lambda rec: [("baseline", stub), ("reference", reference)], HELPERS, 2.0,
                               answers)
    assert base[0][3] == "reference" and base[0][1] >= 1 and answers == {0: [sum(range(50))]}, base
    rows = pace.candidate_after(chosen, base, lambda rec: reference, HELPERS, 2.0)
    assert rows and rows[0][6] == "reference"


def test_a_baseline_that_answers_in_place_gives_what_it_changed_to_compare():
    # the answer of a function that writes into its caller's buffer is that buffer: the probe
    # compares what the candidate left of its inputs with what the baseline left (pesflow_probe.py)
    def in_place(xs, out):
        out[:] = [x * 2 for x in xs]

    def pure(xs, out):
        return [x * 2 for x in xs]

    answers: dict[int, object] = {}
    changes: dict[int, object] = {}
    pace.baseline_first([(0, {"fn": "f"}, ([1, 2, 3], [0, 0, 0]), {}), (1, {"fn": "g"}, ([4, 5], [0, 0]), {})],
                        lambda rec: [("baseline", in_place if rec["fn"] == "f" else pure)],
                        {**HELPERS, "plain": values.plain}, 2.0, answers, changes)
    assert changes == {0: [[[1, 2, 3], [2, 4, 6]], {}], 1: None}, changes  # plain values: tuples as lists
    assert answers == {0: None, 1: [8, 10]}


def test_a_candidate_that_refuses_new_values_the_baseline_takes_is_timed_on_copies():
    # a table of the inputs it has seen, raising on any other: its figure is still checked (on copies)
    seen = {tuple(range(40))}

    def table(xs):
        if tuple(xs) not in seen:
            raise KeyError("never seen")
        return [1]

    chosen = [(0, {"fn": "f", "n": 1}, (list(range(40)),), {})]
    base = pace.baseline_first(chosen, only(lambda xs: [sum(xs)]), HELPERS, 2.0)
    assert base[0][2] is True
    rows = pace.candidate_after(chosen, base, lambda rec: table, HELPERS, 2.0)
    assert rows and rows[0][5] is False and rows[0][4] >= 1, rows
