"""One candidate -> one verdict, through a backend; the library behind `pesflow evaluate`.

Cheap refusals come first and never touch the backend: an unreadable candidate, a path
outside the scope, a symlink, .git. Then the package is prepared (cached), the candidate
is applied to a clean copy of the baseline, the task's own grader runs, and its
reward.json becomes a typed Verdict. Trouble in our machinery is `infra_error`, trouble in
the task's grader `grader_error`: neither is ever blamed on the candidate.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from evaluator.backends.base import Backend, GradeRequest, capabilities_of, GradeRun, InfraError, Prepared
from evaluator.candidate import Candidate, CandidateError, CandidateSource, apply_diff, candidate_hash
from evaluator import modes
from evaluator.backends import registry
from evaluator.config import EvaluatorConfig
from evaluator.modes import PackageLacks
from evaluator.parallel import ParallelBackend
from evaluator.scoring import benchmark_reward, dev_figure, speedup_from_dev
from evaluator.feedback import loop_env, said_to_the_model
from evaluator import profile as profiles
from evaluator import mismatch
from evaluator.device import check_device, device_env
from evaluator.task import OFFICIAL_URL, Task, grader_command, load_task, task_roots
from evaluator.trust import runtime, watch, written
from evaluator.trust.screen import Graded, Prober, TrustScreen
from evaluator.trust.findings import Trust, withhold_untrusted
from evaluator.planned import PlannedGrading, Refused, refuse_outside_scope, restore_files
from evaluator.verdict import (PackageRef, Status, Verdict, engine_state, from_reward_json, judged_figure,
                               read_reward_file, say_trust, with_engine_state)

Mode = Literal["candidate", "noop", "oracle", "negative"]


def make_backend(config: EvaluatorConfig, extra_hidden: list[Path] = ()) -> Backend:  # type: ignore[assignment]
    inner = registry.create(config, list(extra_hidden))  # found by name (evaluator/backends/registry.py)
    # worker slots, one grading per GPU at a time, infrastructure failures retried
    return ParallelBackend(inner, workers=config.workers, gpu_devices=config.gpu_devices, retries=config.infra_retries)


class Evaluator:
    def __init__(self, config: EvaluatorConfig | None = None, tasks_roots: list[str | Path] | None = None,
                 backend: Backend | None = None, log_root: Path | None = None, official_url: str = OFFICIAL_URL):
        self.config = config or EvaluatorConfig()
        self.official_url = official_url  # benchmark.url: what makes a package official
        self.tasks_roots = tasks_roots
        self.log_root = Path(log_root or "traces/evaluate").resolve()
        # Every task root and the logs are hidden from candidates, not only the graded package.
        self.backend = backend or make_backend(self.config, extra_hidden=[*task_roots(tasks_roots), self.log_root])
        self._prepared: dict[str, Prepared] = {}
        # the package's reference, read once (the probes compare to it)
        self._oracles: dict[str, dict[str, str | None]] = {}
        self._graders: dict[str, str] = {}  # the package's grader scripts' text, read once (the trust screen's)
        self.trust = TrustScreen(self.config.trust, Path(self.config.local.cache_dir).expanduser())
        self.dev_reference_dir = self.log_root / "dev-reference"  # a run keeps its own (agent/search.py)
        self._lock = threading.Lock()
        self._ref_locks: dict[Path, threading.Lock] = {}  # one dev reference grading at a time per package and device

    def task(self, name: str) -> Task:
        return load_task(name, self.tasks_roots, self.official_url)

    def prepare(self, task: Task) -> Prepared:
        if task.content_hash not in self._prepared:
            self._prepared[task.content_hash] = self.backend.prepare(task)
        return self._prepared[task.content_hash]

    def close(self) -> None:
        self.backend.close()

    def evaluate(self, task: Task | str, *, mode: Mode = "candidate", candidate: Path | CandidateSource | None = None,
                 grader: str | None = None, out_dir: Path | None = None, device: str | None = None,
                 artifact: Path | None = None, loop: dict[str, Any] | None = None,
                 profile: dict[str, Any] | None = None, result_bar: float | None = None,
                 scored: Verdict | None = None, explain: bool = False) -> Verdict:
        """`loop`: a search's dev submission count and best-so-far ({"count", "best"}), for the
        package's own loop feedback (evaluator/feedback.py); None: a lone submission. `profile`: a
        dev grading's candidate is profiled too, its figures set against these machine facts
        (evaluator/ceilings.py; {} where none are known): Verdict.profile (evaluator/profile.py).
        `result_bar`: a search's best figure so far; a correct grading at or under it has its probes
        and its watched grading deferred (trust.deferred, evaluator/trust/screen.py `defers`).
        `scored`: that deferred grading's verdict, when the search picks it: only the watched
        grading is made now (the figure stays the scored one).
        `explain`: a dev grading failed by a correctness gate says how its answers differ from the
        baseline's (Verdict.mismatch): asked by what shows it to a model or a person, never paid
        for where nobody reads it (a check of a package, a hostile candidate's test)."""
        task = self.task(task) if isinstance(task, str) else task
        grader = grader or self.config.grader
        # a backend whose gradings bring their own GPUs (Modal, Ray) needs none here
        device = check_device(task, device, gpus_here=capabilities_of(self.backend).gpus == "host")
        start = time.monotonic()
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%f")
        log_dir = Path(out_dir or self.log_root / task.name / f"{stamp}-{mode}-{grader}").resolve()
        log_dir.mkdir(parents=True, exist_ok=True)
        # the stages, in order: prepare, the dev reference, the grading (with the screen's), the verdict
        planned = self._planned(task, mode, grader, device, candidate, artifact, loop, log_dir)
        if isinstance(planned, PlannedGrading):
            g = replace(planned, bar=result_bar, explain=explain,
                        # a count metric gets its one line from the engine's figures, never a timing profile
                        profile=profile is not None and grader == "dev" and not profiles.metric_of(task).counted)
            try:
                self._dev_reference(g)
                planned = self._graded_verdict(g, scored)
            except InfraError as e:
                planned = Verdict(status=Status.infra_error, message=str(e), **g.base)
        return self._finished(planned, task, grader, log_dir, profile, start)

    def _finished(self, v: Verdict, task: Task, grader: str, log_dir: Path, profile: dict[str, Any] | None,
                  start: float) -> Verdict:
        """The last stage: what the model is told, the profile's summary, verdict.json."""
        v.seconds = round(time.monotonic() - start, 3)
        v.feedback, v.diagnostics, v.dev_details = said_to_the_model(log_dir, grader, task.scope)
        if profile is not None and grader == "dev":
            v.profile = profiles.summary(profiles.read(log_dir), profile, self._no_profile(v),
                                         metric=profiles.metric_of(task), log_dir=log_dir)
        (log_dir / "verdict.json").write_text(v.model_dump_json(indent=1))
        return v

    def _planned(self, task: Task, mode: Mode, grader: str, device: str | None,
                 candidate: Path | CandidateSource | None, artifact: Path | None, loop: dict[str, Any] | None,
                 log_dir: Path) -> PlannedGrading | Verdict:
        """The first stage: the grading planned (the package prepared, the candidate applied to its
        baseline, the screen's guard chosen), or a verdict refused before anything ran."""
        base = dict(task=task.name, mode=mode, backend=self.backend.name, grader=grader, log_dir=str(log_dir),
                    package=PackageRef(name=task.name, path=str(task.root), content_hash=task.content_hash,
                                       root=task.source.root, repo=task.source.repo, commit=task.source.commit,
                                       official=task.source.official),
                    ref_speedup=task.anchor.value, ref_speedup_source=task.anchor.describe())
        try:
            if candidate is not None and not isinstance(candidate, CandidateSource):
                candidate = CandidateSource.from_path(candidate)
            what = modes.request(task, mode, grader, candidate, artifact)
        except CandidateError as e:
            return Verdict(status=Status.hard_fail, hard_fail_reasons=[e.reason], message=str(e), **base)
        except PackageLacks as e:
            return Verdict(status=Status.grader_error, message=str(e), **base)
        source, env = what.source, {**what.env, **device_env(device), **loop_env(loop)}
        try:
            if source is not None:
                refuse_outside_scope(*source.paths(task.source_root), task.scope)
            prepared = self.prepare(task)
            files = self._materialize(prepared, source) if source is not None else {}
            refuse_outside_scope(set(files), set(), task.scope)  # git apply may create files the header parse missed
        except Refused as e:
            return Verdict(status=Status.scope_violation, hard_fail_reasons=e.violations,
                           message="refused before running: " + ", ".join(e.violations), **base)
        except CandidateError as e:
            return Verdict(status=Status.hard_fail, hard_fail_reasons=[e.reason], message=str(e), **base)
        except InfraError as e:  # preparing, or reading the baseline from a container engine, failed
            return Verdict(status=Status.infra_error, message=str(e), **base)
        was = {rel: self.backend.baseline_text(prepared, rel) for rel in files}
        if source is not None:
            (log_dir / "candidate.diff").write_text(Candidate(files=files).diff(was))
        base["candidate_hash"] = candidate_hash(files, was)  # the search's name for it too (evaluator/candidate.py)
        screened = self._screened_files(task, prepared, mode, files, artifact)
        baseline = {rel: self.backend.baseline_text(prepared, rel) for rel in dict.fromkeys([
            *(r for r in task.scope if "*" not in r), *screened])}
        guard = self.trust.guard_config(mode, task.source_root, {**baseline, **screened}, baseline, env,
                                        warm_key=task.content_hash[:20])
        return PlannedGrading(task, prepared, mode, grader, device, env, files, screened, baseline, guard, log_dir,
                              self.config.timeout_sec or task.toml.verifier.timeout_sec, base, what.reviewer)

    def _graded_verdict(self, g: "PlannedGrading", scored: Verdict | None) -> Verdict:
        """The grading stage. With the screen off, one grading. With it on, the official grading has
        nothing of pesflow's in its processes (its figure is the grader's alone), and the guard and
        the probes watch gradings of their own (evaluator/trust/watch.py)."""
        return self._grade(g) if g.guard is None else self._grade_apart(g, scored)

    def _grade(self, g: "PlannedGrading") -> Verdict:
        """One grading, the guard inside it when `g` has one (a watched grading): its figures and its trust."""
        live: list[Verdict] = []

        def then(run: GradeRun, prober) -> None:  # the backend's: the sandbox waits for the probes
            live.append(self._interpret(g, run, prober))

        request = GradeRequest(files=g.files, grader=g.grader, env=g.env, reviewer_files=g.reviewer, timeout=g.timeout,
                               out_dir=g.log_dir, trust=g.guard, then=then if g.guard is not None else None)
        run = self.backend.grade(g.prepared, request)
        return live[0] if live else self._interpret(g, run, self._fresh_prober(g))

    def _grade_apart(self, g: "PlannedGrading", scored: Verdict | None = None) -> Verdict:
        """The figures from a grading with nothing of the screen in it (exactly what the grader
        writes with the screen off); the trust from a second grading of the same candidate with
        the guard and the probes in, made where the first could become a result. `scored`: a
        correct one made earlier, whose watch was deferred: only the watch now."""
        scored_g = replace(g, guard=None)
        how: dict = {"how": "apart", "why": watch.WHY}
        run: GradeRun | None = None
        if scored is not None and scored.correct and scored.status == Status.ok:
            v = scored.model_copy(deep=True, update={"trust": Trust(), "log_dir": str(g.log_dir)})
            how["scored"] = scored.log_dir
        else:
            request = GradeRequest(files=g.files, grader=g.grader, env=g.env, reviewer_files=g.reviewer,
                                   timeout=g.timeout, out_dir=g.log_dir, scan_writes=self.config.trust.runtime)
            run = self.backend.grade(g.prepared, request)
            v = self._interpret(scored_g, run, None)
        because = self._unwatched(scored_g, run, v)
        if because is not None:  # never a result now: the static read is all the trust it needs
            v = self._judge(scored_g, run, v, None)
            if not v.trust.suspect and self._official_writes(g, run, v):
                say_trust(v)
            v.trust.deferred = because.startswith("deferred") and not v.trust.suspect
            v.trust.checks["watch"] = {**how, "watched": False, "because": because,
                                       **({"deferred": True} if v.trust.deferred else {})}
            self._diagnosed(g, v)
            return v
        (g.log_dir / watch.WATCHED).mkdir(exist_ok=True)
        t0 = time.monotonic()
        watched = self._grade(replace(g, log_dir=g.log_dir / watch.WATCHED, official=v))
        watched.seconds = round(time.monotonic() - t0, 3)
        (g.log_dir / watch.WATCHED / "verdict.json").write_text(watched.model_dump_json(indent=1))
        v.trust = watched.trust
        self._official_writes(g, run, v)
        figure = judged_figure(v)
        side = {"status": watched.status.value, "correct": watched.correct, "figure": judged_figure(watched),
                "reasons": watched.hard_fail_reasons}
        v.trust.checks["watch"] = {**how, "watched": True, **side, "seconds": watched.seconds,
                                   "log_dir": str(g.log_dir / watch.WATCHED)}
        differs = watch.compare({"correct": True, "figure": figure}, side, self.config.trust.watch_tolerance,
                                _timed(g.task))
        if differs and not v.trust.suspect:
            v.trust.needs_review = True
            v.trust.reasons = [*differs, *v.trust.reasons]
        say_trust(v, " when watched")
        return v

    def _official_writes(self, g: "PlannedGrading", run: GradeRun | None, v: Verdict) -> bool:
        """What the official grading wrote where a candidate may not (evaluator/trust/written.py),
        listed once its grader was over: a candidate that writes only when not watched is seen too."""
        if run is None:
            return False
        found, _ = runtime.read([e for e in run.trust_events if e.get("kind") == "finding"], set(),
                                graders=self._grader_text(g.task))
        found = [f for f in found if f.reason() not in v.trust.reasons]  # a write the watched grading saw too: once
        if found:
            v.trust = v.trust.adding([f.model_copy(update={"evidence": f"{f.evidence} (the official grading)"})
                                      for f in found])
        return bool(found)

    def _unwatched(self, g: "PlannedGrading", run: GradeRun | None, v: Verdict) -> str | None:
        """Why the official grading `v` is not watched now (None: it is): not correct, no faster
        than its baseline (nothing a cheat gains), or deferred until the search picks it."""
        if not v.correct:
            return f"not a result: {v.status.value}"
        graded = self._graded(g, run, v, False) if run is not None else None
        if graded is not None and not self.trust.gains(graded):
            return "no faster than the baseline: nothing a cheat gains"
        if graded is not None and self.trust.defers(graded):
            return f"deferred: the figure {judged_figure(v):.4g} does not pass the search's best so far, {g.bar:.4g}"
        return None

    def _diagnosed(self, g: "PlannedGrading", v: Verdict) -> None:
        """What an engineer is told of an official grading the screen did not watch, taken from a
        grading of its own with the guard recording the calls into the candidate (never the
        official one): how a failed dev grading's answers differ from the baseline's
        (Verdict.mismatch), or a correct one's profile. A deferred one is profiled when watched."""
        explain = g.explain and mismatch.wanted(g.grader, v.status.value, v.hard_fail_reasons)
        profile = g.profile and v.correct and not v.trust.deferred
        if not (explain or profile):
            return
        if explain and not self.config.mismatch_sec:
            v.mismatch = mismatch.none("off (evaluator.mismatch_sec is 0)")
            return
        if not (g.guard or {}).get("record"):
            if explain:
                v.mismatch = mismatch.none(
                    "the trust probes that keep the dev grader's calls are off (evaluator.trust)")
            return
        d = replace(g, log_dir=g.log_dir / watch.DIAGNOSED, official=v)
        d.log_dir.mkdir(exist_ok=True)
        done: list[bool] = []

        def then(run: GradeRun, prober) -> None:  # the backend's: the sandbox waits for the replay
            self._diagnosis(d, run, v, prober, explain)
            done.append(True)

        request = GradeRequest(files=d.files, grader=d.grader, env=d.env, reviewer_files=d.reviewer,
                               timeout=d.timeout, out_dir=d.log_dir, trust=d.guard, then=then)
        run = self.backend.grade(d.prepared, request)
        if not done:
            self._diagnosis(d, run, v, self._fresh_prober(d), explain)

    def _diagnosis(self, d: "PlannedGrading", run: GradeRun, v: Verdict, prober: Prober, explain: bool) -> None:
        """The replay of a diagnosing grading's kept calls: the mismatch, or the profile."""
        if run.infra_error or run.timed_out:
            if explain:
                v.mismatch = mismatch.none("the grading that keeps the calls did not finish: "
                                           f"{run.infra_error or 'it ran past its time'}")
        elif explain:
            v.mismatch = self._mismatch(d, run, prober)
        else:
            self.trust.profile(self._graded(d, run, v, True), self._restoring(d, prober))

    def _interpret(self, g: "PlannedGrading", run: GradeRun, prober: Prober | None) -> Verdict:
        """The grader's result as a Verdict, then the trust stage with `prober` for its probes
        (None: no trust stage, for the grading the screen did not watch)."""
        task, base, timeout = g.task, g.base, g.timeout
        if run.infra_error:
            return Verdict(status=Status.infra_error, message=run.infra_error, **base)

        def judged(v: Verdict) -> Verdict:
            return self._judge(g, run, v, prober) if prober is not None else v

        if run.timed_out:
            return judged(Verdict(status=Status.timeout, hard_fail_reasons=["timeout"],
                                  message=f"the grader ran past {timeout:g} s and was killed "
                                          "with everything it started", **base))
        if run.reward is None:
            tail = (
                [ln for ln in run.output.strip().splitlines() if ln.strip() and not ln.startswith("@@pesflow:")][-1:]
                or ["no output"])
            msg = "; ".join([f"the grader wrote no readable verdict (exit {run.returncode}): {tail[0][:300]}",
                             *run.notes])
            failed = Verdict(status=Status.grader_error, message=msg, **base)
            # a watched grading's guard saw what it saw, whatever became of its grader
            return judged(failed) if g.official is not None else failed
        raw = run.reward if g.grader != "dev" else with_engine_state(  # the gates a dev engine wrote beside it
            run.reward,
            engine_state(g.log_dir, (grader_command("dev", g.prepared.state.get("dev_engine")) or ("", []))[1]))
        verdict = from_reward_json(raw, grader_seconds=run.grader_seconds,
                                   **{k: v for k, v in base.items() if k != "ref_speedup"})
        verdict.environment = g.prepared.state.get("environment") or {"kind": "image"}
        if run.node:  # a cluster backend's node: where the verdict was measured
            verdict.environment = {**verdict.environment, "node": run.node}
        if verdict.ref_speedup is None:
            verdict.ref_speedup = task.anchor.value
        if g.grader == "dev":
            self._score_dev(task, verdict, run.reward, is_noop=self._is_noop(g), device=g.device)
        verdict.message = ("graded" if verdict.status == Status.ok
                           else "hard fail: " + ", ".join(verdict.hard_fail_reasons))
        if g.device == "cpu" and task.gpus > 0:
            # A GPU task checked on the CPU: correctness with small shapes, never a score.
            verdict.reward, verdict.hardware = 0.0, "cpu"
            verdict.message += " (GPU task checked on the CPU: correctness only, no reward)"
        for note in run.notes:  # a backend's remarks (modal: the GPU used; local: a write on the read-only root)
            verdict.message += f"; {note}"
        verdict = judged(withhold_untrusted(verdict, read_reward_file(g.log_dir / "logs/verifier/verifier_state.json")))
        return self._explain(g, run, verdict, prober)

    def _explain(self, g: "PlannedGrading", run: GradeRun, v: Verdict, prober: Prober | None) -> Verdict:
        """A dev grading failed by a correctness gate, with the screen's guard not watching (off, or a
        mode it does not screen): no call was kept to replay, and v.mismatch says so. Where the screen
        watches, a grading of its own keeps the calls (_diagnosed)."""
        if (prober is None or not g.explain or g.official is not None
                or not mismatch.wanted(g.grader, v.status.value, v.hard_fail_reasons)):
            return v
        v.mismatch = mismatch.none("off (evaluator.mismatch_sec is 0)" if not self.config.mismatch_sec else
                                   "the trust guard that keeps the dev grader's calls is off (evaluator.trust)")
        return v

    def _mismatch(self, g: "PlannedGrading", run: GradeRun, prober: Prober) -> dict[str, Any]:
        """How the answers of the calls `run` kept differ from the frozen baseline's (evaluator/mismatch.py)."""
        root = g.task.source_root.rstrip("/")
        changed = {f"{root}/{rel}": text for rel, text in g.baseline.items()
                   if text and g.screened.get(rel, text) != text}
        config, tfiles = restore_files(g, {}, {})
        try:
            return mismatch.compare(run, changed, prober, g.log_dir, self.config.mismatch_sec,
                                    runtime.baseline_callables(g.baseline), (config["probe"]["restore"], tfiles))
        except Exception as e:  # noqa: BLE001 - our machinery's trouble never reaches the verdict's figures
            return mismatch.none(f"the comparison could not run: {type(e).__name__}: {str(e)[:200]}")

    def _no_profile(self, v: Verdict) -> str:
        """Why a grading asked for a profile has none, where the probe made none."""
        if not v.correct:
            return f"it did not pass ({v.status.value}): there is nothing to profile"
        if v.trust.deferred:
            return "deferred: it is profiled when the search picks it (its watched grading)"
        t = self.config.trust
        if not (t.enabled and t.runtime and t.probes):
            return "the profile replays a call kept by the trust guard, which is off (evaluator.trust)"
        return "no call into the candidate was kept to replay"

    @staticmethod
    def _is_noop(g: "PlannedGrading") -> bool:
        return g.mode == "noop" or (g.mode == "candidate" and not g.files)

    def _dev_ref_file(self, task: Task, device: str | None) -> Path:
        return self.dev_reference_dir / f"{task.content_hash[:20]}-{device or 'default'}.json"

    def _dev_reference(self, g: "PlannedGrading") -> None:
        """The stage before a dev grading of a candidate: the dev engine's figures for the unchanged
        code, graded once (a noop grading of its own, kept beside the run), so that the candidate's
        grading never waits on another while it holds its sandbox."""
        if g.grader != "dev" or self._is_noop(g):
            return
        ref_file = self._dev_ref_file(g.task, g.device)
        with self._lock:
            lock = self._ref_locks.setdefault(ref_file, threading.Lock())
        with lock:  # one grading of it, however many candidates ask at once
            if ref_file.is_file():
                return
            log_dir = ref_file.with_suffix("")
            log_dir.mkdir(parents=True, exist_ok=True)
            start = time.monotonic()
            planned = self._planned(g.task, "noop", "dev", g.device, None, None, None, log_dir)
            if isinstance(planned, PlannedGrading):
                planned = self._graded_verdict(planned, None)  # its figures write ref_file (_score_dev)
            self._finished(planned, g.task, "dev", log_dir, None, start)

    def _score_dev(self, task: Task, v: Verdict, raw: dict, is_noop: bool, device: str | None) -> None:
        """A dev engine's figures in the verdict's one meaning (evaluator/scoring.py): its own figure
        raw under `dev`, with the kind its noop tells; `speedup` over the baseline; `reward` the
        benchmark's formula with the package's anchor, never the engine's own `reward`."""
        ref_file = self._dev_ref_file(task, device)
        if is_noop:
            ref = raw
            with self._lock:
                if not ref_file.is_file():
                    ref_file.parent.mkdir(parents=True, exist_ok=True)
                    ref_file.write_text(json.dumps(raw))
        else:
            ref = _read_json(ref_file)  # graded before this one (_dev_reference); None where it wrote nothing
        v.dev = dev_figure(raw, ref)
        v.speedup = speedup_from_dev(v.dev) if v.dev is not None else None
        v.reward = benchmark_reward(v.speedup, task.anchor.value, v.correct, task.reward_class == "implementation")

    def _fresh_prober(self, g: "PlannedGrading") -> Prober:
        """Probes as a grading of their own, in a fresh sandbox (a backend that cannot follow up)."""
        def prober(config: dict, tfiles: dict[str, Path], command: str, limit: float) -> GradeRun:
            (g.log_dir / "probe").mkdir(exist_ok=True)
            req = GradeRequest(files=g.files or dict(g.screened), grader="probe", env=g.env, reviewer_files={},
                               timeout=limit, out_dir=g.log_dir / "probe", trust={**(g.guard or {}), **config},
                               trust_files=tfiles, command=command)
            return self.backend.grade(g.prepared, req)
        return prober

    @staticmethod
    def _restoring(g: "PlannedGrading", backend_prober: Prober) -> Prober:
        """`backend_prober` with the scope files as graded put back first: a candidate that rewrote
        its own source while it was graded is probed as it was graded, not as it left itself."""
        def prober(config: dict, tfiles: dict[str, Path], command: str, limit: float) -> GradeRun:
            config, tfiles = restore_files(g, config, tfiles)
            return backend_prober(config, tfiles, command, limit)
        prober.same_sandbox = getattr(backend_prober, "same_sandbox", False)  # type: ignore[attr-defined]
        return prober

    def _judge(self, g: "PlannedGrading", run: GradeRun | None, v: Verdict, backend_prober: Prober | None) -> Verdict:
        """The trust stage: what the screens saw, beside the grader's figures (evaluator/trust/)."""
        v.trust = self.trust.judge(self._graded(g, run, v, backend_prober is not None),
                                   self._restoring(g, backend_prober) if backend_prober is not None else None)
        probes = v.trust.checks.get("probes")
        if isinstance(probes, dict) and probes.get("ran"):  # where they ran: the grading's own sandbox, or a new one
            probes["sandbox"] = "the grading's" if getattr(backend_prober, "same_sandbox", False) else "fresh"
        say_trust(v)
        return v

    def _graded(self, g: "PlannedGrading", run: GradeRun, v: Verdict, with_run: bool) -> Graded:
        """What the screen is told of one grading (evaluator/trust/screen.py)."""
        # a watched grading's plausibility and probes go by the scored figure: the one that counts
        task, figure = g.task, judged_figure(g.official or v)
        return Graded(
            mode=g.mode, task_key=f"{task.content_hash[:20]}-{g.grader}-{g.device or 'default'}",
            run=run if with_run else None, files=g.screened,
            baseline=g.baseline, references=self._references(task, g.prepared, {**g.baseline, **g.screened},
                                                             g.baseline),
            correct=v.correct and v.status == Status.ok, speedup=figure,
            anchor=task.anchor.value if v.speedup is not None else None, log_dir=g.log_dir,
            baseline_scale=v.speedup is not None, warm_key=task.content_hash[:20], graders=self._grader_text(task),
            timed=_timed(task),
            profile=profiles.budget(self.config.profile_sec, self.config.profile_share, run.grader_seconds)
            if g.profile and v.correct else None, bar=g.bar)

    def _screened_files(self, task: Task, prepared: Prepared, mode: str, files: dict[str, str | None],
                        artifact: Path | None) -> dict[str, str | None]:
        """The scope files as graded: the candidate's, or a reviewer's reference that the hidden
        grader applies itself (then read here the way the dev engine would be given it)."""
        if files or mode not in ("oracle", "negative"):
            return dict(files)
        try:
            source = modes.request(task, mode, "dev", None, artifact).source
            return self._materialize(prepared, source) if source is not None else {}
        except (PackageLacks, CandidateError, InfraError, ValueError):
            return {}

    def _grader_text(self, task: Task) -> str:
        """The package's grader scripts' text, read once a package (evaluator/trust/written.py)."""
        with self._lock:
            cached = self._graders.get(task.content_hash)
        if cached is None:
            cached = written.grader_text(task.root)
            with self._lock:
                self._graders[task.content_hash] = cached
        return cached

    def _references(self, task: Task, prepared: Prepared, scope_texts: dict[str, str | None],
                    baseline: dict[str, str | None]) -> dict[str, list[str]]:
        """For each scope file (by its path in the sandbox): texts whose outputs the candidate's must
        match in the probes, the frozen baseline's first, then the package's oracle; the oracle even
        where it is the candidate (a stub baseline's figure is timed against it: trust/screen.py `_gap`)."""
        with self._lock:
            oracle = self._oracles.get(task.content_hash)
        if oracle is None:
            oracle = self._screened_files(task, prepared, "oracle", {}, None)
            with self._lock:
                self._oracles[task.content_hash] = oracle
        out: dict[str, list[str]] = {}
        for rel, text in scope_texts.items():
            texts = [t for t in (baseline.get(rel) if baseline.get(rel) != text else None, oracle.get(rel)) if t]
            if texts:
                out[f"{task.source_root.rstrip('/')}/{rel}"] = list(dict.fromkeys(texts))
        return out

    def _materialize(self, prepared: Prepared, source: CandidateSource) -> dict[str, str | None]:
        if source.files is not None:
            return dict(source.files)
        touched, _ = source.paths(prepared.task.source_root)
        baseline = {rel: self.backend.baseline_text(prepared, rel) for rel in touched}
        after = apply_diff(source.diff or "", baseline)
        return {rel: text for rel, text in after.items() if text != baseline.get(rel)}


def _timed(task: Task) -> bool:
    """Whether the package's figure is a time (its declarations, watch.figure_kind), not a count."""
    return watch.figure_kind(task.toml.primary_metric.metric_kind, task.toml.verifier.timing_metric)[0] == "timed"


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


