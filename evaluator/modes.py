"""The reviewer's modes (noop, oracle, negative, baseline2) as each package dispatches them.

A package ships its references in one of several shapes: a patch (`solution/oracle.patch`,
`oracle.patch` at an lh package's root, `tests/oracle.patch`), a whole scope file
(`solution/kernel_oracle.py`; or, for a package of one scope file, `solution/<its name>` as the
oracle and `solution/<its stem>_negative<its suffix>` as the negative), or no file at all, its hidden
grader holding the reference in
tests/ and switching to it by itself. The hidden grader reads its mode from the variables its
test.sh names (`KERNELBENCH_VERIFY_MODE`, or another `*_MODE`) and takes a reviewer's file by
path (`KERNELBENCH_<MODE>_PATCH` / `_FILE`). The dev engine only scores the live tree, so for it
pesflow applies a reviewer's file itself; a reference that lives in tests/ cannot reach it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.candidate import CandidateError, CandidateSource
from evaluator.task import Task

MODES: tuple[str, ...] = ("candidate", "noop", "oracle", "negative")
REVIEWER = "/.pesflow-reviewer"
REVIEWER_KINDS = ("oracle", "negative", "baseline2")


class PackageLacks(Exception):
    """The package cannot be graded in this mode (it ships no such reference, or not for this grader)."""


@dataclass
class ModeRequest:
    source: CandidateSource | None  # to apply ourselves, or None (nothing, or the grader applies it)
    env: dict[str, str]
    reviewer: dict[str, Path] = field(default_factory=dict)  # name -> host file shown at /.pesflow-reviewer/<name>
    artifact: str | None = None  # the reference graded (relative to the package), for people


def artifacts(task: Task, kind: str) -> list[Path]:
    """Every reviewer file of `kind` the package ships, in the order the shapes are listed above."""
    rels = [f"solution/{kind}.patch", f"{kind}.patch", f"tests/{kind}.patch", f"solution/kernel_{kind}.py"]
    if len(task.scope) == 1:  # the scope file's own name: the reference written in its place
        scope = Path(task.scope[0])
        rels.append(f"solution/{scope.name}" if kind == "oracle" else f"solution/{scope.stem}_{kind}{scope.suffix}")
    return [task.root / r for r in dict.fromkeys(rels) if (task.root / r).is_file()]


def _test_sh(task: Task) -> str:
    p = task.root / task.toml.verifier.entrypoint
    try:
        return p.read_text(errors="replace") if p.is_file() and p.stat().st_size < 1 << 20 else ""
    except OSError:
        return ""


def mode_variables(task: Task) -> list[str]:
    """The variables the hidden grader reads its mode from (KERNELBENCH_VERIFY_MODE always)."""
    found = re.findall(r"\$\{(\w*MODE)\b", _test_sh(task))
    return list(dict.fromkeys(["KERNELBENCH_VERIFY_MODE", *[v for v in found if v != "MODE"]]))


def self_dispatched(task: Task, kind: str) -> bool:
    """Does the hidden grader switch to its own `kind` reference (held in tests/) by itself?"""
    text = _test_sh(task)
    if re.search(rf"KERNELBENCH_{kind.upper()}_(PATCH|FILE)", text):
        return False  # its branch for the mode takes the reviewer's file: none shipped, nothing to grade
    return bool(re.search(rf"^\s*{kind}\)|[\"']{kind}[\"']\s*\)|=\s*[\"']?{kind}[\"']?\s*\]", text, re.M))


def request(task: Task, mode: str, grader: str, candidate: CandidateSource | None,
            artifact: Path | None = None) -> ModeRequest:
    """What to grade for `mode`: the candidate to apply, the grader's environment, the files to show."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    env = {var: mode for var in mode_variables(task)}
    if mode == "candidate":
        return ModeRequest(candidate, env)
    if mode == "noop":
        return ModeRequest(None, env)
    found = [artifact] if artifact is not None else artifacts(task, mode)
    if grader == "hidden":
        if found:
            a = found[0]
            kind = "PATCH" if a.suffix == ".patch" else "FILE"
            env[f"KERNELBENCH_{mode.upper()}_{kind}"] = f"{REVIEWER}/{a.name}"
            return ModeRequest(None, env, {a.name: a}, str(a.relative_to(task.root)))
        if self_dispatched(task, mode):
            return ModeRequest(None, env, artifact=f"{task.toml.verifier.entrypoint} ({mode} held in tests/)")
        raise PackageLacks(f"{task.name} ships no {mode} reference (solution/{mode}.patch, {mode}.patch, "
                           f"solution/kernel_{mode}.py) and its grader has no {mode} mode; cannot grade mode {mode}")
    # The dev engine only scores the live tree: the reviewer's change is applied here.
    if not found:
        where = " (its reference lives in tests/, which only the hidden grader sees; use --grader hidden)" \
            if self_dispatched(task, mode) else ""
        raise PackageLacks(f"{task.name} ships no {mode} file the dev engine could be given{where}")
    a = found[0]
    env = {var: "candidate" for var in env}
    if a.suffix == ".patch":
        return ModeRequest(CandidateSource(diff=a.read_text()), env, artifact=str(a.relative_to(task.root)))
    if len(task.scope) != 1:
        raise CandidateError("bad_reference", f"{a} is a single file but the scope has {len(task.scope)} files")
    return ModeRequest(CandidateSource(files={task.scope[0]: a.read_text()}), env,
                       artifact=str(a.relative_to(task.root)))
