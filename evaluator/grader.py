"""One candidate -> one verdict, through a backend; the library behind `pesflow evaluate`.

Cheap refusals come first and never touch the backend: an unreadable candidate, a path
outside the scope, a symlink, .git. Then the package is prepared (cached), the candidate
is applied to a clean copy of the baseline, the task's own grader runs, and its
reward.json becomes a typed Verdict. Trouble in our machinery is `infra_error`, trouble in
the task's grader `grader_error`: neither is ever blamed on the candidate.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from evaluator.backends.base import Backend, GradeRequest, InfraError, Prepared
from evaluator.candidate import (
    Candidate,
    CandidateError,
    apply_diff,
    diff_paths,
    folder_files,
    scope_violations,
)
from evaluator.config import EvaluatorConfig
from evaluator.hardware import gpu_available
from evaluator.task import Task, TaskError, load_task, task_roots
from evaluator.verdict import PackageRef, Status, Verdict, from_reward_json, read_reward_file, withhold_untrusted

Mode = Literal["candidate", "noop", "oracle", "negative"]
MODES: tuple[str, ...] = ("candidate", "noop", "oracle", "negative")


def make_backend(config: EvaluatorConfig, extra_hidden: list[Path] = ()) -> Backend:  # type: ignore[assignment]
    from evaluator.parallel import ParallelBackend

    inner: Backend
    if config.backend == "local":
        from evaluator.backends.local import LocalBackend

        inner = LocalBackend(config.local, extra_hidden=list(extra_hidden), writable=config.writable_paths)
    elif config.backend == "docker":
        from evaluator.backends.docker import DockerBackend

        inner = DockerBackend(config.docker, writable=config.writable_paths)
    elif config.backend == "modal":
        from evaluator.backends.modal_backend import ModalBackend

        inner = ModalBackend(config.modal)
    else:
        raise ValueError(f"unknown backend {config.backend!r}")
    # worker slots, one grading per GPU at a time, infrastructure failures retried
    return ParallelBackend(inner, workers=config.workers, gpu_devices=config.gpu_devices, retries=config.infra_retries)


class CandidateSource:
    """What the user handed in: a diff (text) or a folder of files, or an in-memory file set."""

    def __init__(self, diff: str | None = None, files: dict[str, str | None] | None = None, links: set[str] = frozenset()):  # type: ignore[assignment]
        self.diff, self.files, self.links = diff, files, set(links)

    @classmethod
    def from_path(cls, path: Path) -> "CandidateSource":
        path = Path(path)
        if path.is_dir():
            files, links = folder_files(path)
            return cls(files=dict(files), links=links)
        if not path.is_file():
            raise CandidateError("candidate_missing", f"{path} is neither a patch file nor a folder")
        return cls(diff=path.read_text(errors="replace"))

    def paths(self, source_root: str) -> tuple[set[str], set[str]]:
        if self.diff is not None:
            return diff_paths(self.diff, source_root)
        return set(self.files or {}), self.links


class Evaluator:
    def __init__(self, config: EvaluatorConfig | None = None, tasks_roots: list[str | Path] | None = None,
                 backend: Backend | None = None, log_root: Path | None = None):
        self.config = config or EvaluatorConfig()
        self.tasks_roots = tasks_roots
        self.log_root = Path(log_root or "traces/evaluate").resolve()
        # Every task root and the logs are hidden from candidates, not only the graded package.
        self.backend = backend or make_backend(self.config, extra_hidden=[*task_roots(tasks_roots), self.log_root])
        self._prepared: dict[str, Prepared] = {}

    def task(self, name: str) -> Task:
        return load_task(name, self.tasks_roots)

    def prepare(self, task: Task) -> Prepared:
        if task.content_hash not in self._prepared:
            self._prepared[task.content_hash] = self.backend.prepare(task)
        return self._prepared[task.content_hash]

    def close(self) -> None:
        self.backend.close()

    def evaluate(self, task: Task | str, *, mode: Mode = "candidate", candidate: Path | CandidateSource | None = None,
                 grader: str | None = None, out_dir: Path | None = None, device: str | None = None) -> Verdict:
        task = self.task(task) if isinstance(task, str) else task
        grader = grader or self.config.grader
        device = check_device(task, device)
        start = time.monotonic()
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%f")
        log_dir = Path(out_dir or self.log_root / task.name / f"{stamp}-{mode}-{grader}").resolve()
        log_dir.mkdir(parents=True, exist_ok=True)
        base = dict(task=task.name, mode=mode, backend=self.backend.name, grader=grader, log_dir=str(log_dir),
                    package=PackageRef(name=task.name, path=str(task.root), content_hash=task.content_hash),
                    ref_speedup=task.anchor.value)

        def finish(v: Verdict) -> Verdict:
            v.seconds = round(time.monotonic() - start, 3)
            (log_dir / "verdict.json").write_text(v.model_dump_json(indent=1))
            return v

        try:
            source, env, reviewer = self._what_to_grade(task, mode, candidate, grader)
            env.update(device_env(device))
        except CandidateError as e:
            return finish(Verdict(status=Status.hard_fail, hard_fail_reasons=[e.reason], message=str(e), **base))
        except _PackageLacks as e:
            return finish(Verdict(status=Status.grader_error, message=str(e), **base))

        if source is not None:
            violations = scope_violations(*source.paths(task.source_root), task.scope)
            if violations:
                return finish(Verdict(status=Status.scope_violation, hard_fail_reasons=violations,
                                      message="refused before running: " + ", ".join(violations), **base))
        try:
            prepared = self.prepare(task)
        except InfraError as e:
            return finish(Verdict(status=Status.infra_error, message=str(e), **base))
        files: dict[str, str | None] = {}
        if source is not None:
            try:
                files = self._materialize(prepared, source)
            except CandidateError as e:
                return finish(Verdict(status=Status.hard_fail, hard_fail_reasons=[e.reason], message=str(e), **base))
            except InfraError as e:  # reading the baseline from a container engine failed
                return finish(Verdict(status=Status.infra_error, message=str(e), **base))
            # git apply may create files the header parse missed: check the result too
            violations = scope_violations(set(files), set(), task.scope)
            if violations:
                return finish(Verdict(status=Status.scope_violation, hard_fail_reasons=violations,
                                      message="refused before running: " + ", ".join(violations), **base))
            (log_dir / "candidate.diff").write_text(
                Candidate(files=files).diff({rel: self.backend.baseline_text(prepared, rel) for rel in files}))
        base["candidate_hash"] = Candidate(files=files).content_hash()
        timeout = self.config.timeout_sec or task.toml.verifier.timeout_sec
        request = GradeRequest(files=files, grader=grader, env=env, reviewer_files=reviewer, timeout=timeout, out_dir=log_dir)
        try:
            run = self.backend.grade(prepared, request)
        except InfraError as e:
            return finish(Verdict(status=Status.infra_error, message=str(e), **base))
        if run.infra_error:
            return finish(Verdict(status=Status.infra_error, message=run.infra_error, **base))
        if run.timed_out:
            return finish(Verdict(status=Status.timeout, hard_fail_reasons=["timeout"],
                                  message=f"the grader ran past {timeout:g} s and was killed with everything it started", **base))
        if run.reward is None:
            tail = [ln for ln in run.output.strip().splitlines() if ln.strip() and not ln.startswith("@@pesflow:")][-1:] or ["no output"]
            msg = "; ".join([f"the grader wrote no readable verdict (exit {run.returncode}): {tail[0][:300]}", *run.notes])
            return finish(Verdict(status=Status.grader_error, message=msg, **base))
        verdict = from_reward_json(run.reward, grader_seconds=run.grader_seconds,
                                   **{k: v for k, v in base.items() if k != "ref_speedup"})
        if verdict.ref_speedup is None:
            verdict.ref_speedup = task.anchor.value
        verdict.message = "graded" if verdict.status == Status.ok else "hard fail: " + ", ".join(verdict.hard_fail_reasons)
        if device == "cpu" and task.gpus > 0:
            # A GPU task checked on the CPU: correctness with small shapes, never a score.
            verdict.reward, verdict.hardware = 0.0, "cpu"
            verdict.message += " (GPU task checked on the CPU: correctness only, no reward)"
        for note in run.notes:  # a backend's remarks (modal: the GPU used; local: a write on the read-only root)
            verdict.message += f"; {note}"
        return finish(withhold_untrusted(verdict, read_reward_file(log_dir / "logs/verifier/verifier_state.json")))

    # -----------------------------------------------------------------
    def _what_to_grade(self, task: Task, mode: str, candidate: Path | CandidateSource | None, grader: str):
        """(candidate source or None, grader environment, reviewer files to expose)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        env = {"KERNELBENCH_VERIFY_MODE": mode}
        if mode == "candidate":
            if candidate is None:
                return None, env, {}
            return (candidate if isinstance(candidate, CandidateSource) else CandidateSource.from_path(candidate)), env, {}
        if mode == "noop":
            return None, env, {}
        artifact = task.reviewer_artifact(mode)  # type: ignore[arg-type]
        if artifact is None:
            raise _PackageLacks(f"{task.name} ships no {mode} artifact (solution/{mode}.patch); cannot grade mode {mode}")
        if grader == "hidden":
            # The hidden grader dispatches modes itself, taking the reviewer's patch by path.
            kind = "PATCH" if artifact.suffix == ".patch" else "FILE"
            env[f"KERNELBENCH_{mode.upper()}_{kind}"] = f"/.pesflow-reviewer/{artifact.name}"
            return None, env, {artifact.name: artifact}
        # The dev engine only scores the live tree: apply the reviewer's change ourselves.
        env["KERNELBENCH_VERIFY_MODE"] = "candidate"
        if artifact.suffix == ".patch":
            return CandidateSource(diff=artifact.read_text()), env, {}
        if len(task.scope) != 1:
            raise _PackageLacks(f"{artifact} is a single file but the scope has {len(task.scope)} files")
        return CandidateSource(files={task.scope[0]: artifact.read_text()}), env, {}

    def _materialize(self, prepared: Prepared, source: CandidateSource) -> dict[str, str | None]:
        if source.files is not None:
            return dict(source.files)
        touched, _ = source.paths(prepared.task.source_root)
        baseline = {rel: self.backend.baseline_text(prepared, rel) for rel in touched}
        after = apply_diff(source.diff or "", baseline)
        return {rel: text for rel, text in after.items() if text != baseline.get(rel)}


class _PackageLacks(Exception):
    pass


def check_device(task: Task, device: str | None) -> str | None:
    """The device a GPU task is graded on; a GPU task on a machine without one needs --device cpu."""
    if device not in (None, "cpu", "cuda"):
        raise TaskError(f"unknown device {device!r}; use --device cuda or --device cpu")
    if task.gpus > 0 and device != "cpu":
        if not gpu_available():
            raise TaskError(f"{task.name} needs a GPU (gpus = {task.gpus}) and this machine has none; "
                            "pass --device cpu to check its correctness on the CPU with small shapes (no reward)")
        return "cuda"
    return device


def device_env(device: str | None) -> dict[str, str]:
    if device is None:
        return {}
    env = {"KERNELBENCH_DEVICE": device}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton kernels run in its interpreter on the CPU
    return env


def verdict_json(v: Verdict) -> str:
    """The one JSON object `pesflow evaluate --json` prints."""
    d = v.model_dump(mode="json", exclude={"raw"})
    return json.dumps(d)
