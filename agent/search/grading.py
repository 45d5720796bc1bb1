"""Grading in a search: each distinct candidate graded once, its verdict journaled; a verdict the
journal already holds (a resumed or replayed run) served again instead of grading twice; with
replay --regrade, graded again and compared. A person's decision on the code (pesflow review,
`reviews`) rides on every verdict handed back; the journal keeps the screens' own."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from agent.rundir.faults import writing
from agent.rundir.schema import Event
from agent.rundir.store import RunStore
from agent.search import faults
from evaluator.candidate import CandidateSource, candidate_hash
from evaluator.evaluation import Evaluator
from evaluator.scoring import loop_figures
from evaluator.task import Task
from evaluator.verdict import Status, Verdict


# the labels whose dev gradings carry a profile (a protocol that shows profiles): a deferred child's
# is made when it is picked (its watched grading)
PROFILED = ("", "baseline", "parent-check")


class RecordedVerdicts:
    """Verdicts already journaled, by (code hash, label, grader), each served once per occurrence."""

    def __init__(self, events: list[dict[str, Any]]):
        self._by_key: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for e in events:
            d = e["data"]
            if e["kind"] == Event.verdict and not d.get("reused"):
                self._by_key.setdefault((d["content_hash"], d.get("label", ""), d["grader"]), []).append(d["verdict"])
        self._served: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()  # graders take from it at once

    def take(self, h: str, label: str, grader: str) -> dict[str, Any] | None:
        key = (h, label, grader)
        with self._lock:
            n = self._served.get(key, 0)
            found = self._by_key.get(key, [])
            if n < len(found):
                self._served[key] = n + 1
                return found[n]
            return None


def compare_verdicts(h: str, label: str, grader: str, recorded: Verdict, new: Verdict) -> dict[str, Any]:
    """Correctness must agree exactly; speed within the grader's measured noise (its cv, at least 10%)."""
    same_correctness = (recorded.status == new.status
                        and sorted(recorded.hard_fail_reasons) == sorted(new.hard_fail_reasons)
                        and recorded.tests == new.tests)
    noise = 0.10
    for cv in (recorded.cv, new.cv):
        if isinstance(cv, (int, float)):
            noise = max(noise, 3 * float(cv))
    speed_agrees = None
    if recorded.speedup and new.speedup:
        speed_agrees = abs(math.log(new.speedup / recorded.speedup)) <= math.log1p(noise)
    return {"content_hash": h, "label": label, "grader": grader, "recorded_status": recorded.status.value,
            "new_status": new.status.value, "recorded_speedup": recorded.speedup, "new_speedup": new.speedup,
            "correctness_agrees": same_correctness, "speed_agrees": speed_agrees, "noise": round(noise, 4),
            # the screens must say the same of the same code: a suspect only now (or no longer) is news
            "trust_agrees": (recorded.trust.suspect, recorded.trust.needs_review)
                == (new.trust.suspect, new.trust.needs_review)}


class Grading:
    """The search's one way to grade: `grade(files)` -> a verdict, journaled once."""

    def __init__(self, ev: Evaluator, task: Task, store: RunStore, grader: str):
        self.ev, self.task, self.store, self.grader = ev, task, store, grader
        self.baseline_files: dict[str, str] = {}
        self.recorded = RecordedVerdicts([])
        self.regrade: list[dict[str, Any]] | None = None  # set by replay --regrade
        self.reviews: dict[str, dict[str, Any]] = {}  # code hash -> a person's decision (set by a resume)
        # the package's loop as a solver would have used it: the dev submissions so far (each dev
        # grading, in the order asked) and the best correctness-passing one, for its feedback
        # (evaluator/feedback.py)
        self.dev_submissions = 0
        self.dev_best: dict[str, Any] | None = None
        # where the run's protocol shows profiles (agent/search/protocol.py): dev gradings profile
        # their candidate, set against these machine facts (evaluator/ceilings.py; {} where none
        # are known); None: no profile
        self.profile_facts: dict[str, Any] | None = None
        self._loop_lock = threading.Lock()
        # the search's best figure so far, as the search last set it: a child's correct grading at
        # or under it could not become a result now, and its probes wait (trust.deferred)
        self.result_bar: float | None = None
        # code hash -> a child's grading whose probes wait (its parent-check reuses it)
        self._deferred: dict[str, Verdict] = {}

    def count_recorded(self, events: list[dict[str, Any]]) -> None:
        """A resumed or replayed run's loop as its journal left it: every dev grading recorded is a
        submission made (one served again from the record is not made twice), its best kept; and
        the children whose probes still wait, for their parent-checks to run on what they kept."""
        for e in events:
            d = e["data"]
            if e["kind"] != Event.verdict or d.get("reused"):
                continue
            waits = d.get("label") == "" and ((d.get("verdict") or {}).get("trust") or {}).get("deferred")
            v = Verdict.model_validate(d["verdict"]) if d.get("grader") == "dev" or waits else None
            if d.get("grader") == "dev":
                self._submitted(self._submission("dev"), v)
            if waits:
                self._deferred[d["content_hash"]] = v
            elif d.get("label") == "parent-check":
                self._deferred.pop(d["content_hash"], None)

    def _submission(self, grader: str) -> dict[str, Any] | None:
        if grader != "dev":
            return None
        with self._loop_lock:
            self.dev_submissions += 1
            return {"count": self.dev_submissions, "best": dict(self.dev_best) if self.dev_best else None}

    def _submitted(self, loop: dict[str, Any] | None, v: Verdict) -> None:
        """The best-so-far after a dev submission, as the package's submit.sh keeps it: correct,
        and a strictly greater dev reward; its figures the dev engine's own (reward.json's reward
        and speedup), never the verdict's `reward` (the benchmark's formula with the anchor, which
        the sanitizer would print to the model) nor its `speedup` (pesflow's reading of the engine)."""
        if loop is None or not v.correct:
            return
        reward, speedup = loop_figures(v.dev)  # journaled with the verdict: a resume keeps the same best
        with self._loop_lock:
            if self.dev_best is None or reward > float(self.dev_best.get("reward") or -1.0):
                self.dev_best = {"submission": loop["count"], "reward": reward, "speedup": speedup, "tree": ""}

    def _reviewed(self, h: str, v: Verdict) -> Verdict:
        if h in self.reviews:
            v.trust = v.trust.model_copy(update={"review": dict(self.reviews[h])})
        return v

    def _evaluate(self, files: dict[str, str], grader: str, out: Path, loop: dict[str, Any] | None = None,
                  profiled: bool = False, bar: float | None = None, scored: Verdict | None = None) -> Verdict:
        changed = {p: t for p, t in files.items() if t != self.baseline_files.get(p)}
        with writing(out, self.store.root):  # the backend copies the grader's logs into the run directory
            return self.ev.evaluate(self.task, candidate=CandidateSource(files=changed), grader=grader, out_dir=out,
                                    loop=loop, profile=self.profile_facts if profiled and grader == "dev" else None,
                                    result_bar=bar, scored=scored, explain=True)

    def grade(self, files: dict[str, str], *, label: str = "", grader: str | None = None, round_: int = 0) -> Verdict:
        """`round_`: the round the candidate belongs to (for the crash tests' fault points). Safe to
        call from several threads at once (the journal and the backend's slots are)."""
        grader = grader or self.grader
        h = candidate_hash(files, self.baseline_files)  # the verdict names it so too
        recorded = self.recorded.take(h, label, grader)
        if recorded is not None:  # graded before the crash (resume) or in the run replayed
            v = Verdict.model_validate(recorded)
            self.store.journal.append(Event.verdict, content_hash=h, label=label, grader=grader, verdict=recorded,
                                      reused=True)
            if self.regrade is not None:
                new = self._evaluate(files, grader, self.store.evaluation_dir(h, f"regrade-{label or 'search'}"))
                self.regrade.append(compare_verdicts(h, label, grader, v, new))
            return self._reviewed(h, v)
        loop = self._submission(grader)
        out = self.store.evaluation_dir(h, label)
        faults.pause("grading", round_, self.store.root)
        profiled = label in PROFILED  # once per code hash: the search's own grading, not the final pick's regrade
        # a child's grading only, where the screen defers (evaluator.trust.defer_below_best)
        bar = (self.result_bar if label == "" and grader == self.grader
               and self.ev.config.trust.defer_below_best != "never" else None)
        # a parent-check: the child's own grading, where only its watch waits (evaluator/trust/watch.py)
        scored = self._deferred.pop(h, None) if label == "parent-check" else None
        v = self._evaluate(files, grader, out, loop, profiled, bar, scored)
        if v.status == Status.infra_error:  # our trouble, not the candidate's: once more
            v = self._evaluate(files, grader, out / "retry", loop, profiled, bar, scored)
        if v.trust.deferred:
            self._deferred[h] = v
        self._submitted(loop, v)
        self.store.journal.append(Event.verdict, content_hash=h, label=label, grader=grader,
                                  verdict=v.model_dump(mode="json", exclude={"raw"}), grading_seconds=v.seconds,
                                  **({"result_bar": bar} if bar is not None else {}))
        return self._reviewed(h, v)
