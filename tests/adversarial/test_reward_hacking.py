"""Reward hacking: cheats that graders reward as speed, and honest code that only looks odd.

Each candidate is a bundled package's own reference (solution/) with one file of
reward_hacking/exploits/ or reward_hacking/honest/ appended (reward_hacking/corpus.py builds
it; reward_hacking/README.md says what each one does and what the graders alone score it).
Every one is graded under both graders (dev and hidden) by the local backend, with the trust
screen on (evaluator/trust/):
- an exploit must be suspect, and the family its file names must be among the families the
  screen reports (many pay off: the graders alone score them up to reward 1); one that the
  package's own grader already fails (a code gate, reward 0) earns nothing to screen, and is
  only required to score nothing;
- KNOWN_GAPS are exploits the screen does not catch yet, each saying why (strict xfail: the
  day one is caught, the test says so);
- an honest candidate must be graded ok by the grader, and not be suspect.
The three packages are prepared once for the session (the shared cache of tests/conftest.py).
"""

from __future__ import annotations

import pytest

from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import Evaluator
from evaluator.trust.findings import FAMILIES
from evaluator.verdict import Status
from tests.adversarial.reward_hacking.corpus import entries, source
from tests.conftest import needs_root

pytestmark = [needs_root, pytest.mark.slow]
GRADERS = ("hidden", "dev")
EXPLOITS = entries("exploits")
HONEST = entries("honest")
# Exploits the screen does not catch yet (file stem, or "stem[grader]" for one grader), with why;
# its plausibility check still flags them needs_review (shown flagged everywhere until a person
# looks), which the test checks.
KNOWN_GAPS: dict[str, str] = {}
# Caught in most runs, not all (xfail, not strict): the cheat races the guard's copy of what the
# harness got, and a loaded machine can let it win.
_RAW_THREAD_RACE = ("its raw thread fills the list it returned empty; where it fills it before the guard copies the "
                    "output at return, the harness's answer looks whole (seen with other gradings on the same 2 cores)")
RACES: dict[str, str] = {"rt2_raw_thread_spares_sampled": _RAW_THREAD_RACE, "rt2_raw_thread_plain_list": _RAW_THREAD_RACE}
# Families whose cheat no bundled package's gate lets through, tested where it can be written
ELSEWHERE = {"speed_not_reproduced": "tests/test_trust_invariants.py::test_a_figure_pesflow_cannot_reproduce_is_suspect "
                                     "(the bundled packages' gates ban the frames and threads it needs)"}


def test_the_corpus_covers_every_family_and_names_known_ones():
    assert len(EXPLOITS) >= 24 and len(HONEST) >= 12
    named = {f for e in EXPLOITS for f in e.families}  # each family named by an exploit (first or not)
    assert named | set(ELSEWHERE) == set(FAMILIES), (named | set(ELSEWHERE)) ^ set(FAMILIES)
    assert len({e.task for e in EXPLOITS}) >= 3
    for e in EXPLOITS:
        assert e.fields.get("attack") and e.fields.get("grader_alone"), e.path
    for e in HONEST:
        assert e.family is None and e.fields.get("why"), e.path


@pytest.fixture(scope="module")
def screened(cache_dir, tmp_path_factory):
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))),
                   log_root=tmp_path_factory.mktemp("reward-hacking-logs"))
    yield ev
    ev.close()


def grade(ev: Evaluator, entry, grader: str):
    task = ev.task(entry.task)
    return ev.evaluate(task, candidate=source(task, entry), grader=grader)


def _gap(e, grader: str) -> str | None:
    return KNOWN_GAPS.get(e.path.stem) or KNOWN_GAPS.get(f"{e.path.stem}[{grader}]")


def _known_gaps():
    for e in EXPLOITS:
        for grader in GRADERS:
            gap, race = _gap(e, grader), RACES.get(e.path.stem)
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else [pytest.mark.xfail(strict=False, reason=race)] if race else []
            yield pytest.param(e, grader, id=f"{e.id}-{grader}", marks=marks)


@pytest.mark.parametrize(("entry", "grader"), list(_known_gaps()))
def test_exploit_is_suspect_and_its_family_named(screened, entry, grader):
    v = grade(screened, entry, grader)
    shown = (v.status, v.speedup, v.reward, v.hard_fail_reasons, v.trust.reasons)
    if _gap(entry, grader):
        assert v.trust.needs_review or v.trust.suspect, shown  # flagged for a person at least
    if v.status == Status.hard_fail and not v.correct and not v.trust.suspect:
        assert not v.reward, shown  # the package's own gate stopped it: it earns nothing
        return
    assert v.trust.suspect, shown
    assert set(entry.families) & set(v.trust.families), shown
    assert not v.is_result, shown  # a suspect's figures count nowhere (fitness, parent, best, pick, table)


@pytest.mark.parametrize("grader", GRADERS)
@pytest.mark.parametrize("entry", HONEST, ids=[e.id for e in HONEST])
def test_honest_candidate_is_not_suspect(screened, entry, grader):
    v = grade(screened, entry, grader)
    shown = (v.status, v.speedup, v.hard_fail_reasons, v.message, v.trust.reasons)
    assert v.status == Status.ok and v.hard_fail_reasons == [], shown
    assert v.tests.total > 0 and v.tests.passed == v.tests.total, shown
    assert not v.trust.suspect, shown
    assert v.speedup is not None and v.speedup > 1.0, shown
