"""Plausible on the package's own scale (issue 39): a figure at which the benchmark's reward
reaches its cap (a speedup of the anchor squared) needs a person's review even under the
plausibility ratio's line; the package's reference never does. Pure: the screen's decision alone."""

from __future__ import annotations

import pytest

from evaluator.config import TrustConfig
from evaluator.trust.findings import AT_REWARD_CAP, REVIEW
from evaluator.trust.screen import TrustScreen


def judge(tmp_path, speedup, anchor=2.8, mode="candidate"):
    screen = TrustScreen(TrustConfig(), tmp_path)
    return screen.judge(mode=mode, task_key="k", run=None, files={}, baseline={}, references={}, correct=True,
                        speedup=speedup, anchor=anchor, prober=None, log_dir=tmp_path)


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
