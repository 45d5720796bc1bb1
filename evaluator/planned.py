"""One grading as planned (evaluator/evaluation.py's first stage): the record its later stages
read, the scope refusal made before anything runs, and the scope files as graded that a probe puts
back. No I/O beyond writing those files into the grading's own folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evaluator.backends.base import Prepared
from evaluator.candidate import scope_violations
from evaluator.task import Task
from evaluator.verdict import Verdict


class Refused(Exception):
    """A candidate touching paths outside the package's scope: refused before anything runs."""

    def __init__(self, violations: list[str]):
        super().__init__(", ".join(violations))
        self.violations = violations


def refuse_outside_scope(touched: set[str], links: set[str], scope: list[str]) -> None:
    violations = scope_violations(touched, links, scope)
    if violations:
        raise Refused(violations)


@dataclass
class PlannedGrading:
    """One grading as planned: what an evaluation's stages carry from the plan to the verdict."""

    task: Task
    prepared: Prepared
    mode: str
    grader: str
    device: str | None
    env: dict[str, str]
    files: dict[str, str | None]  # the candidate's changes, as applied
    screened: dict[str, str | None]  # the scope files as graded (a reviewer's reference the grader applies, too)
    baseline: dict[str, str | None]
    guard: dict | None
    log_dir: Path
    timeout: float
    base: dict
    reviewer: dict = field(default_factory=dict)  # reviewer-only files (oracle, negative patch)
    official: Verdict | None = None  # a watched grading's: the scored grading's verdict, whose figure counts
    profile: bool = False  # the probe profiles the candidate too (evaluator/profile.py)
    bar: float | None = None  # a search's best figure so far: at or under it, the probes wait (evaluate's result_bar)
    explain: bool = False  # a failed dev grading's answers compared with the baseline's (evaluate's explain)


def restore_files(g: PlannedGrading, config: dict, tfiles: dict[str, Path]) -> tuple[dict, dict[str, Path]]:
    """The probe's config and files with the scope files as graded (`restore`: sandbox path ->
    file beside the config), which the probe writes back where they differ."""
    folder = g.log_dir / "trust"
    folder.mkdir(parents=True, exist_ok=True)
    restore, tfiles = {}, dict(tfiles)
    for i, (rel, text) in enumerate(sorted((g.files or g.screened).items())):
        if text is None:
            continue
        name = f"restore-{i}.txt"
        (folder / name).write_text(text)
        tfiles[name] = folder / name
        restore[f"{g.task.source_root.rstrip('/')}/{rel}"] = name
    return {**config, "probe": {**config.get("probe", {}), "restore": restore}}, tfiles
