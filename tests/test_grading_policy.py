"""One grading policy for every backend (issue 41): what a broken limit does to the verdict and
how it is worded, whose an OOM kill was, what a leftover process costs; and no backend writes
its own copy of those decisions."""

from __future__ import annotations

import re

import pytest

from evaluator.grading_policy import BACKGROUND_PROCESS, WORDS, GradingReport, grading_result, limit_verdict, machine_oom, stray_reasons
from tests.conftest import REPO, needs_root


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


def _report(**kw) -> GradingReport:
    return GradingReport(kw.pop("returncode", 0), kw.pop("output", "graded\n"), 1.0, **kw)


GRADERS = {"reward": 0.8, "speedup": 3.0, "hard_fail_reasons": []}


@pytest.mark.parametrize("report,want", [
    # (report's facts, (infra error?, timed out?, reasons, reward)) -- every backend fills the same report
    (dict(reward=GRADERS), (False, False, [], 0.8)),
    (dict(reward=GRADERS, timed_out=True, strays=["7:sleep"]), (False, True, None, 0.8)),  # after a timeout, nothing more
    (dict(reward=GRADERS, timed_out=True, breaches=["too_many_processes"]), (False, False, ["too_many_processes"], 0.0)),
    (dict(reward=GRADERS, oom_killed=True, memory_peak_bytes=1000 << 20, memory_mb=1024), (False, False, ["out_of_memory"], 0.0)),
    (dict(reward=GRADERS, oom_killed=True, memory_peak_bytes=100 << 20, memory_mb=1024), (True, False, None, None)),
    (dict(reward=GRADERS, oom_killed=True, memory_mb=1024), (False, False, ["out_of_memory"], 0.0)),  # no peak: the candidate's
    (dict(reward=GRADERS, strays=["7:sleep"], signalled=True, forged=True),
     (False, False, ["background_process", "sandbox_tampering", "result_forged_after_grader"], 0.0)),
    (dict(reward={"reward": 0.0, "hard_fail_reasons": ["import_failed"]}, fault="the stand-in lacks numpy"), (True, False, None, None)),
    (dict(reward=GRADERS, fault="the stand-in lacks numpy"), (False, False, [], 0.8)),  # a passing grading: no fault to blame
    (dict(infra_error="sandbox setup failed: x"), (True, False, None, None)),
])
def test_one_function_reads_every_backends_report(report, want):
    run = grading_result(_report(**report), "fail")
    infra, timed_out, reasons, reward = want
    assert bool(run.infra_error) == infra and run.timed_out == timed_out
    if not infra:
        assert run.reward["reward"] == reward
        if reasons is not None:
            assert run.reward.get("hard_fail_reasons", []) == reasons
    assert grading_result(_report(reward=GRADERS, strays=["7:sleep"]), "kill").reward == GRADERS  # killed, it stands


def test_the_policys_decisions_are_called_from_grading_policy_only():
    # the backends fill a report and call grading_result; none calls the decisions underneath it
    for path in sorted((REPO / "evaluator" / "backends").rglob("*.py")):
        text = path.read_text()
        for name in ("limit_verdict(", "machine_oom(", "machine_oom_error(", "stray_reasons("):
            assert name not in text, f"{path.relative_to(REPO)} calls {name[:-1]} itself: fill a GradingReport instead"
    # and one module decides whether a grading's figures are believed (evaluator/trust/findings.py)
    owners = [p.relative_to(REPO).as_posix() for p in sorted(REPO.glob("[ae][gv]*/**/*.py"))
              if re.search(r"^(def (is_result|untrusted_reasons|withhold_untrusted)\(|TAMPERING = )", p.read_text(), re.M)]
    assert owners == ["evaluator/trust/findings.py"], owners


@needs_root
def test_the_containers_script_waits_out_the_grace_then_names_strays_and_rewritten_results(tmp_path):
    # as the local backend's init: a helper that ends within the grace is no stray, but a result file
    # it rewrote after the grader returned is forged; one still running after the grace is a stray
    # (run in a pid namespace of its own: the script kills what the grader left)
    import subprocess

    from evaluator.backends.in_container import forged_results, grader_script, left_running

    result = tmp_path / "reward.json"
    command = (f"echo '{{}}' > {result}; (sleep 0.4; echo '{{\"reward\": 1}}' > {result}) & "
               "sleep 30 & true")
    script = grader_script(command, "", spare_existing=True, results=[str(result)])
    out = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                         capture_output=True, text=True, timeout=30).stdout
    assert forged_results(out) == [str(result)], out
    assert [s.split(":", 1)[1] for s in left_running(out)] == ["sleep"], out
