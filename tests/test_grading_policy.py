"""One grading policy for every backend (issue 41): what a broken limit does to the verdict and
how it is worded, whose an OOM kill was, what a leftover process costs; and no backend writes
its own copy of those decisions."""

from __future__ import annotations

import re

import pytest

from evaluator.grading_policy import BACKGROUND_PROCESS, WORDS, limit_verdict, machine_oom, stray_reasons
from tests.conftest import REPO


@pytest.mark.parametrize("peak_mb,limit_mb,machine", [(100, 1024, True), (1000, 1024, False), (None, 1024, False), (100, None, False)])
def test_an_oom_kill_is_the_machine_s_only_where_the_grading_stayed_well_under_its_own_limit(peak_mb, limit_mb, machine):
    assert machine_oom(None if peak_mb is None else peak_mb << 20, limit_mb) == machine


def test_a_broken_limit_comes_first_with_its_one_sentence_and_the_reward_is_zero():
    raw = limit_verdict({"reward": 0.9, "hard_fail_reasons": ["slow"]}, ["out_of_memory", BACKGROUND_PROCESS],
                        memory_mb=512, strays=["7:sleep"])
    assert raw["hard_fail_reasons"] == ["out_of_memory", BACKGROUND_PROCESS, "slow"] and raw["reward"] == 0.0
    assert raw["pesflow_limits"]["out_of_memory"] == WORDS["out_of_memory"].format(memory=512)
    assert stray_reasons(["7:sleep"], "fail") == [BACKGROUND_PROCESS] and stray_reasons(["7:sleep"], "kill") == []


def test_no_backend_decides_a_limit_s_verdict_itself():
    # the decisions' own spellings, anywhere under evaluator/backends/: a second copy of the policy
    copies = [r"stray_processes\s*==", r"0\.9\s*\*", r"\"hard_fail_reasons\"\]\s*=\s*reasons", r"_DETAIL\s*="]
    for path in sorted((REPO / "evaluator" / "backends").rglob("*.py")):
        text = path.read_text()
        for pattern in copies:
            assert not re.search(pattern, text), f"{path.relative_to(REPO)} decides {pattern} itself: use evaluator/grading_policy.py"
