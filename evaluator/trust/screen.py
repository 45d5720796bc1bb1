"""The trust stage of a grading: one place that turns what every screen saw into `trust`.

The evaluator asks it twice: before grading, for the guard's config (what the backend puts
into the sandbox); after, with the grading's events, for the verdict's trust. In between it
may run the probes through the Prober it is given: fresh processes in the grading's own
sandbox once the grader is over (a backend that can follow up, the local one), else one more
grading of the same candidate through the same backend with the probe script instead of the
grader, so every backend that carries a GradeRequest's guard carries the probes too. It never
touches the grader's figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.grading_records import GradeRun
from evaluator.config import TrustConfig
from evaluator.trust import instrument, probe_run, runtime, static
from evaluator.trust.findings import AT_REWARD_CAP, NOT_REPRODUCED, REVIEW, Finding, Trust
from evaluator.trust.probe_run import Prober
from evaluator.trust.screen_cache import ScreenCache

SCREENED_MODES = ("candidate", "oracle", "negative")  # noop is the baseline: the reference point, not a result
WARM_MIN_IMPORT_SEC = 0.5  # what a probe's imports must cost for the warm probe to pay for its own start


@dataclass(frozen=True)
class Graded:
    """What the screen is told of one grading: the evaluator's facts, not its own.

    `references`: for a scope file, texts whose outputs the candidate's must match (the
    baseline's first, then the package's reference). `speedup` is over the baseline when
    `baseline_scale`, else the dev engine's own figure. `graders`: the grader's own scripts' text
    (written.grader_text), whose planted files are the grader's. `profile`: the probe also
    profiles the candidate ({"budget_sec"}: evaluator/profile.py), and a correct grading the
    probes would pass over is replayed for its profile alone. `timed`: the figure is a time
    (watch.figure_kind), which pesflow's own clock can reproduce; a count is not. `run`: the
    grading's run (None: a backend whose guard reports nothing). `bar`: a search's best figure so
    far: a correct figure at or under it could not become a result when graded, so its probes
    wait until the search picks it (deferred), unless it is held for a person anyway."""
    mode: str
    task_key: str
    files: dict[str, str | None]
    baseline: dict[str, str | None]
    log_dir: Path
    run: GradeRun | None = None
    references: dict[str, list[str]] | None = None
    correct: bool = False
    speedup: float | None = None
    anchor: float | None = None
    baseline_scale: bool = True
    warm_key: str = ""
    graders: str = ""
    profile: dict[str, Any] | None = None
    timed: bool = True
    bar: float | None = None


class TrustScreen:
    def __init__(self, config: TrustConfig, cache: Path):
        self.config = config
        self.seen = ScreenCache(cache)  # the oracle's speedup measured here, a probe's import cost

    def guard_config(self, mode: str, source_root: str, scope_texts: dict[str, str | None],
                     baseline: dict[str, str | None], env: dict[str, str], warm_key: str = "") -> dict[str, Any] | None:
        """The guard's config for one grading, with the warm probe's: the baseline's installed
        imports, done beside the grader where a probe of this package was seen to spend
        WARM_MIN_IMPORT_SEC importing them (torch: seconds), else once the grader is over (numpy's
        tenth of a second beside the grader cost it more than it saved: on a machine of two cores
        the imports slowed the grader), overlapping the host's reading of the grading."""
        if not (self.config.enabled and self.config.runtime) or mode not in SCREENED_MODES:
            return None
        cfg = instrument.guard_config(source_root, scope_texts, baseline, env, record=self.config.probes)
        cfg["draws"] = instrument.draw_secret()
        if self.config.probes and self.config.warm_probe:
            cfg["warm_modules"] = runtime.imported_packages(baseline)
            cfg["warm"] = "grader" if self.seen.import_seconds(warm_key) >= WARM_MIN_IMPORT_SEC else "after"
        return cfg

    def judge(self, g: Graded, prober: Prober | None = None) -> Trust:
        """The grading's trust: what the static read and the guard saw, the probes run through
        `prober` where the figure could become a result, and the plausibility of the figure."""
        mode, run, speedup, anchor, baseline, profile = g.mode, g.run, g.speedup, g.anchor, g.baseline, g.profile
        if not self.config.enabled or mode not in SCREENED_MODES:
            return Trust(checks={"screened": False})
        findings: list[Finding] = []
        checks: dict[str, Any] = {"screened": True}
        callables = runtime.baseline_callables(baseline)  # functions whose contract is to return one
        if self.config.static and g.files:
            found, checks["static"] = static.screen(g.files, baseline)
            findings += found
        if run is not None and self.config.runtime:
            found, checks["runtime"] = runtime.read(run.trust_events, runtime.baseline_classes(baseline), callables,
                                                    g.graders)
            findings += found
        reference, implausible, capped = self._plausibility(g)
        checks["plausibility"] = {"speedup": speedup, "reference": reference, "ratio": self.config.plausibility_ratio,
                                  "implausible": implausible,
                                  "reward_cap": anchor ** 2 if anchor and anchor > 1 else None, "at_reward_cap": capped}
        # Probes for what could become a result: correct, and faster than the baseline (or of
        # unknown speed); a grading no faster than the baseline gains nothing from a cheat.
        worth = self._gains(g, implausible or capped)
        deferred = bool(worth and run is not None and self.config.probes and prober is not None
                        and self._defers(g, implausible or capped))
        far = None  # a figure pesflow's own clock comes short of, for a person (not_reproduced)
        oracle_gap = None  # the oracle's figure over pesflow's own, where this is the oracle and it was timed
        # the baseline's profile beside the candidate's: only the frozen baseline's, never the package's reference's
        if profile:
            profile = {**profile, "baseline_texts": {t for t in baseline.values() if t}}
        if deferred:
            checks["probes"] = {"ran": False, "deferred": True,
                                "why": f"deferred: the figure {speedup:.4g} does not pass the "
                                       f"search's best so far, {g.bar:.4g}"}
        if run is not None and self.config.probes and g.correct and prober is not None and worth and not deferred:
            # every probe only for an implausible figure with nothing found yet: a grading already
            # suspect needs no more evidence than the quick probes give, nor their minute
            # the figure timed again with pesflow's clock, where it is large enough to be out of reach
            gap = self._gap(g)
            # the oracle at any gain: its gap is what is measured
            line = 1.0 if mode == "oracle" else self.config.reproduce_ratio * (gap or 1.0)
            reproduce = bool(gap is not None and speedup > line)
            full = (implausible or capped) and not findings
            found, checks["probes"] = probe_run.probe(
                run, g.references or {}, full, self._budget(full), prober, g.log_dir, callables, g.graders, profile,
                reproduce={"budget_sec": self.config.reproduce_sec,
                           "baseline_texts": {t for t in baseline.values() if t}}
                if reproduce else None)
            findings += found
            if reproduce and isinstance(checks["probes"].get("pace"), list):
                miss, far, mine = not_reproduced(checks["probes"]["pace"], float(speedup or 0),
                                                 self.config.reproduce_ratio * gap,
                                                 self.config.reproduce_suspect_ratio * gap,
                                                 ("baseline", "reference") if mode == "oracle"
                                                 or self.seen.measured_gap(g.task_key) is not None else ("baseline",))
                checks["probes"].update(reproduced=mine, gap=gap)
                if mode == "oracle":  # the reference's own gap, measured: never held against it
                    miss = far = None
                    oracle_gap = speedup / mine if mine else None
                findings += [miss] if miss else []
            if g.warm_key and checks["probes"].get("ran") and not checks["probes"].get("error"):
                self.seen.keep_import_cost(g.warm_key, checks["probes"])
        elif run is not None and prober is not None and profile:  # asked for a correct one only
            self.profile(g, prober)
        if mode == "oracle" and speedup and not findings:
            self.seen.keep_oracle(g.task_key, speedup, oracle_gap)
        trust = Trust.of(findings, checks, needs_review=bool(implausible or capped or far))
        trust.deferred = deferred and not findings
        if trust.needs_review and far:
            trust.reasons = [far]
        elif trust.needs_review and implausible:
            trust.reasons = [f"{REVIEW}: speedup {speedup:.4g} is over {self.config.plausibility_ratio:g}x the "
                             f"reference's {reference:.4g} and passed every probe; a person should look"]
        elif trust.needs_review:
            trust.reasons = [f"{AT_REWARD_CAP}: speedup {speedup:.4g} reaches the benchmark's "
                             "reward cap (the anchor squared) and passed every probe; a person should look"]
        return trust

    def profile(self, g: Graded, prober: Prober) -> None:
        """The candidate's profile alone, replaying a call the grading kept (evaluator/profile.py):
        for a grading that the screen does not judge (it keeps the calls only to say where the time goes)."""
        if g.run is None or not g.profile or not self.config.probes:
            return
        profile = {**g.profile, "baseline_texts": {t for t in g.baseline.values() if t}}
        probe_run.probe(g.run, g.references or {}, False, self._budget(False), prober, g.log_dir,
                        runtime.baseline_callables(g.baseline), g.graders, profile, only_profile=True)

    def _gap(self, g: Graded) -> float | None:
        """How far the grader's figure may sit above pesflow's own timing of the same calls before
        the reproduce lines' factors apply (None: the figure is not timed again): the gap measured
        on the package's reference here (the grader's figure over pesflow's, at least 1; 1 where
        never measured; the oracle's own, 1)."""
        if not (self.config.reproduce_ratio and g.timed and g.baseline_scale and g.speedup):
            return None
        return 1.0 if g.mode == "oracle" else self.seen.reference_gap(g.task_key)

    def _plausibility(self, g: Graded) -> tuple[float | None, bool, bool]:
        """(the reference's speedup, implausible, at the reward's cap) of the grading's figure."""
        speedup, anchor = g.speedup, g.anchor
        reference = self.seen.reference_speedup(g.task_key, anchor)
        # the oracle is the reference itself; an anchor at or below 1 is none (the format's own rule)
        implausible = bool(g.mode != "oracle" and speedup and reference and reference > 1
                           and speedup > self.config.plausibility_ratio * reference)
        # on the package's own scale: the benchmark's reward is capped at a speedup of the anchor
        # squared, which can lie under the ratio's line (an anchor under 3): a cheat would take the
        # whole reward there unflagged, so a figure there needs a person too
        capped = bool(self.config.review_at_reward_cap and g.mode != "oracle" and g.baseline_scale and speedup
                      and anchor and anchor > 1 and speedup >= anchor ** 2 and not implausible)
        return reference, implausible, capped

    def gains(self, g: Graded) -> bool:
        """Whether a correct grading's figure could be what a cheat gains: faster than the baseline
        on its scale, of unknown speed, or held for a person. One no faster gains nothing from a
        cheat: no probes, nor a watched grading (watch apart)."""
        _, implausible, capped = self._plausibility(g)
        return self._gains(g, implausible or capped)

    @staticmethod
    def _gains(g: Graded, held: bool) -> bool:
        return g.speedup is None or not g.baseline_scale or g.speedup > 1.0 or held

    def defers(self, g: Graded) -> bool:
        """Whether the probes of a correct grading wait (trust.deferred): its figure does not pass
        the search's best so far (`bar`), and nothing about it asks a person to look."""
        _, implausible, capped = self._plausibility(g)
        return self._defers(g, implausible or capped)

    def _defers(self, g: Graded, held: bool) -> bool:
        """defers, the plausibility already known (`held`: implausible or at the reward's cap)."""
        return bool(self.config.enabled and self.config.defer_below_best == "always" and g.correct
                    and g.mode in SCREENED_MODES and deferrable(g.speedup, g.bar) and not held)

    def _budget(self, full: bool) -> float:
        return self.config.full_probe_budget_sec if full else self.config.probe_budget_sec


def deferrable(figure: float | None, bar: float | None) -> bool:
    """Whether a correct figure could not become a result when graded: at or under the search's best
    so far (a figure of unknown size always could)."""
    return bar is not None and figure is not None and figure <= bar


def not_reproduced(rows: list[Any], speedup: float, review: float, suspect: float,
                   against: tuple[str, ...] = ("baseline",)) -> tuple[Finding | None, str | None, float | None]:
    """(a finding or None, a review reason or None, pesflow's own ratio): the grader's speedup over
    the baseline against pesflow's timing of the same calls given values the grading never passed
    (pesflow_probe_pace.py; a stub baseline's time is a reference's). A workload's
    figure is no larger than its best case's, so the largest of pesflow's ratios is the one to
    reach; the calls timed may miss the workload's best case, and a figure can be a count that a
    clock does not follow, so a figure past `suspect` times that ratio is not reproduced (not a
    result), one past `review` times needs a person. Both lines are also figures themselves: a
    candidate pesflow times slower than the baseline is not called out for a figure of 1.5. Only
    rows timed against a stand-in in `against` count: a stub baseline's figure is on a scale of
    the package's own (the format does not say which), so rows against its reference count only
    where the reference's gap was measured here."""
    timed = [r for r in rows if isinstance(r, list) and len(r) >= 5 and float(r[2]) > 0 and float(r[3]) > 0
             and (r[6] if len(r) > 6 else "baseline") in against]
    if not timed:
        return None, None, None
    mine = max(float(r[3]) / float(r[2]) for r in timed)
    new = sum(1 for r in timed if len(r) > 5 and r[5])
    said = (f"the grader's speedup {speedup:.4g}; pesflow's own clock, timing candidate and baseline on the timing "
            f"pass's inputs given new values ({new} of {len(timed)} calls), {mine:.4g} at most")
    if speedup > suspect * max(mine, 1.0):
        return Finding(rule="probe.speed_not_reproduced", screen="probe", evidence=said), None, round(mine, 4)
    if speedup > review * max(mine, 1.0):
        return None, f"{NOT_REPRODUCED}: {said}; a person should look", round(mine, 4)
    return None, None, round(mine, 4)


