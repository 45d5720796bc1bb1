"""Plausible on the package's own scale (issue 39): a figure at which the benchmark's reward
reaches its cap (a speedup of the anchor squared) needs a person's review even under the
plausibility ratio's line; the package's reference never does. Pure: the screen's decision alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evaluator.config import TrustConfig
from evaluator.trust.findings import AT_REWARD_CAP, REVIEW
from evaluator.trust.screen import Graded, TrustScreen


def judge(tmp_path, speedup, anchor=2.8, mode="candidate"):
    screen = TrustScreen(TrustConfig(), tmp_path)
    return screen.judge(Graded(mode=mode, task_key="k", files={}, baseline={}, log_dir=tmp_path, correct=True,
                               speedup=speedup, anchor=anchor))


@pytest.mark.parametrize("speedup,review", [(7.9, AT_REWARD_CAP), (7.8, None), (8.3, AT_REWARD_CAP), (8.5, REVIEW)])
def test_a_speedup_at_the_reward_cap_needs_review_under_the_ratio_s_line(tmp_path, speedup, review):
    # anchor 2.8: the reward caps at 7.84, the ratio's line is 3 x 2.8 = 8.4
    t = judge(tmp_path, speedup)
    assert t.needs_review == (review is not None) and not t.suspect
    if review:
        assert t.reasons[0].startswith(f"{review}: ")
    assert t.checks["plausibility"]["at_reward_cap"] == (review == AT_REWARD_CAP)


def test_the_reference_and_a_package_without_an_anchor_are_never_held_for_it(tmp_path):
    assert not judge(tmp_path, 9.0, mode="oracle").needs_review
    assert not judge(tmp_path, 9.0, anchor=None).needs_review
    assert not judge(tmp_path, 1.5, anchor=1.0).needs_review  # an anchor at or below 1 is none


# The figure reproduced (screen.not_reproduced): the grader's speedup against the largest of
# pesflow's own ratios (baseline's seconds over the candidate's, each timed with pesflow's clock);
# past 10x that ratio not a result, past 3x for a person.
@pytest.mark.parametrize("speedup,rows,said,mine", [
    (12.0, [["f", 8, 0.01, 0.0099, 5]], "suspect", 0.99),  # the baseline no slower than the candidate here
    (5.0, [["f", 8, 0.01, 0.0099, 5]], "review", 0.99),
    (10.0, [["f", 8, 0.01, 0.02, 5], ["f", 4, 0.001, 0.004, 5]], None, 4.0),  # the best case's ratio reaches it
    (2.9, [["f", 8, 0.01, 0.005, 5]], None, 0.5),  # under the line itself: a slow candidate's 2.9 is not called out
    (45.0, [["f", 8, 0.01, 0.04, 5]], "suspect", 4.0),
    (10.0, [], None, None),  # nothing timed: no conclusion
    (10.0, [["f", 8, 0.0, 0.01, 5], "junk"], None, None),
    (12.0, [["f", 8, 0.01, 0.0099, 5, True, "baseline"]], "suspect", 0.99),
    # against a stub baseline's stand-in, the package's reference: its scale is the package's own
    (12.0, [["f", 8, 0.01, 0.0099, 5, True, "reference"]], None, None),
])
def test_a_figure_far_above_pesflow_s_own_timing_is_not_reproduced(speedup, rows, said, mine):
    from evaluator.trust.findings import NOT_REPRODUCED
    from evaluator.trust.screen import not_reproduced

    got, review, ratio = not_reproduced(rows, speedup, 3.0, 10.0)
    assert ratio == mine
    assert (got is not None) == (said == "suspect") and (review is not None) == (said == "review")
    if got is not None:
        assert got.family == "speed_not_reproduced" and f"{speedup:.4g}" in got.evidence
    if review is not None:
        assert review.startswith(NOT_REPRODUCED) and f"{speedup:.4g}" in review


# The band is the reference's own: how far the grader's figure sits above pesflow's timing of the
# package's reference, measured when the oracle is graded here, widens the lines for a package whose
# harness pesflow's clock always comes short of (never under 1: an unmeasured package keeps 3x/10x).
def test_the_reproduce_lines_stand_on_the_gap_measured_on_the_reference(tmp_path):
    from evaluator.trust.screen_cache import ScreenCache

    seen = ScreenCache(tmp_path)
    assert seen.reference_gap("k") == 1.0
    seen.keep_oracle("k", 120.0, 3.2)
    assert seen.reference_gap("k") == 3.2 and seen.reference_speedup("k", 100.0) == 120.0
    seen.keep_oracle("k", 118.0)  # graded again without timing it: the measured gap stays
    assert seen.reference_gap("k") == 3.2 and seen.reference_speedup("k", 100.0) == 118.0
    seen.keep_oracle("j", 5.0, 0.7)  # pesflow's clock above the grader's: the lines stay where they were
    assert seen.reference_gap("j") == 1.0 and seen.measured_gap("j") == 0.7 and seen.measured_gap("x") is None

    screen = TrustScreen(TrustConfig(), tmp_path)
    graded = Graded(mode="candidate", task_key="k", files={}, baseline={}, log_dir=tmp_path, correct=True,
                    speedup=9.0, anchor=100.0, timed=True, baseline_scale=True)
    assert screen._gap(graded) == 3.2  # a 9x figure on this package is not timed again (3 x 3.2 = 9.6)
    assert screen._gap(replace(graded, mode="oracle")) == 1.0
    assert screen._gap(replace(graded, timed=False)) is None  # a count: no clock reproduces it


# Deferred (issue 39's cost): in a search, a correct figure at or under the best so far could not
# become a result when graded, so its probes wait until the search picks it; a figure held for a
# person (implausible, at the reward's cap) is never deferred.
ON = TrustConfig(defer_below_best="always")


def deferring(tmp_path, speedup, bar, **kw):
    return Graded(mode="candidate", task_key="k", files={}, baseline={}, log_dir=tmp_path, correct=kw.pop("correct", True),
                  speedup=speedup, anchor=2.8, bar=bar, **kw)


@pytest.mark.parametrize("speedup,bar,defers", [
    (1.5, 2.0, True), (2.0, 2.0, True), (2.01, 2.0, False), (1.5, None, False),
    (7.9, 9.0, False),  # at the reward's cap (2.8 squared): every probe, for a person
    (8.5, 9.0, False),  # over 3x the anchor
    (None, 2.0, False),  # a figure of unknown size always could
])
def test_a_figure_that_cannot_pass_the_search_s_best_waits_for_its_probes(tmp_path, speedup, bar, defers):
    assert TrustScreen(ON, tmp_path).defers(deferring(tmp_path, speedup, bar)) is defers


def test_a_deferred_grading_asks_no_probe_and_says_so(tmp_path):
    from evaluator.backends.base import GradeRun

    asked = []

    def prober(*args):
        asked.append(args)
        raise AssertionError("a deferred grading's probes must not run")
    run = GradeRun(reward={}, returncode=0, timed_out=False, seconds=1.0, output="")
    t = TrustScreen(ON, tmp_path).judge(deferring(tmp_path, 1.5, 2.0, run=run), prober)
    assert t.deferred and not t.suspect and not t.needs_review and not asked
    assert t.checks["probes"]["deferred"] and "2" in t.checks["probes"]["why"]
    # the default (always) defers; never; not correct: not deferred
    assert TrustScreen(TrustConfig(), tmp_path).defers(deferring(tmp_path, 1.5, 2.0))
    assert not TrustScreen(TrustConfig(defer_below_best="never"), tmp_path).defers(deferring(tmp_path, 1.5, 2.0))
    assert not TrustScreen(ON, tmp_path).judge(deferring(tmp_path, 1.5, 2.0, run=run, correct=False), prober).deferred
