"""Task packages in the Φ-Bench layout (README, "Tasks"): find one by name, read it.

A package is found as `<root>/<bench>/<dir>/task/` (kfc, e2e) or `<root>/<bench>/<dir>/`
(lh), where a root is a benchmark checkout's `tasks/` folder or pesflow's own `tasks/`.
Explicit roots win over the bundled packages of the same name.
"""

from __future__ import annotations

import hashlib
import json
import re
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaluator.feedback import with_loop_feedback
from evaluator.benchmark import PackageSource, fetched_root, source_of

BUNDLED_TASKS = Path(__file__).resolve().parent.parent / "tasks"
OFFICIAL_URL = "https://github.com/one2piece2hello/LLM-Infra-Bench-faibench.git"  # benchmark.url's default
TASKS_PATH_ENV = "PESFLOW_TASKS_PATH"
# Never part of the image: the hidden grader and the reviewer's answers.
NOT_IN_IMAGE = ("tests", "solution")
# What a grading writes besides the source tree (and /tmp, /var/tmp, /dev/shm, /run), read off
# the benchmark's 85 graders: its logs, HOME's caches (triton, torch, vllm), the folders the
# format's runtime keeps (the timer, the dev bench), a build tree beside the repository
# (cmake's /app/build) and the e2e deliverable folder. Everything else of the root is read-only.
GRADING_WRITES = ("/logs", "/root", "/app/.timer", "/app/workspace", "/app/build", "/app/submission")


# The dev engine as an image holds it, in the order a grader looks for it (score_engine.sh first).
DEV_ENGINES = ("/opt/loop/score_engine.sh", "/opt/loop/private/dev_tests/test.sh", "/opt/loop/private/tests/test.sh")
HIDDEN_GRADER = "bash /tests/test.sh"


def dev_engine_of(present: list[str] | set[str]) -> str | None:
    """Which dev engine an image has, from the DEV_ENGINES paths present in it ("score_engine"
    for the harness's own score_engine.sh, else the private test.sh's path), or None."""
    if DEV_ENGINES[0] in present:
        return "score_engine"
    return next((p for p in DEV_ENGINES[1:] if p in present), None)


def grader_command(grader: str, dev_engine: str | None) -> tuple[str, list[str]] | None:
    """The shell command of a grader and where its verdict lands (first existing wins); None
    when the dev engine is asked for and the image has none."""
    if grader == "hidden":
        return HIDDEN_GRADER, ["/logs/verifier/reward.json"]
    if dev_engine == "score_engine":
        return (with_loop_feedback(f"export LOOP_DEV_OUT=/logs/loop/dev; bash {DEV_ENGINES[0]}"),
                ["/logs/loop/dev/reward.json", "/logs/verifier/reward.json"])
    if dev_engine:
        return f"bash {dev_engine}", ["/logs/verifier/reward.json", "/logs/loop/dev/reward.json"]
    return None


NO_DEV_ENGINE = ("this package has no dev engine in /opt/loop (score_engine.sh or "
                 "private/*/test.sh); use --grader hidden")


class TaskError(Exception):
    """A task that cannot be found or read; the message is one line naming the fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore")  # unknown keys are ignored, by the format


class _TaskSection(_Section):
    id: str | None = None
    bench: str | None = None
    kind: str | None = None
    title: str | None = None
    instruction: str = "instruction.md"


class _EnvironmentSection(_Section):
    docker_image: str | None = None
    dockerfile: str = "environment/Dockerfile"
    dockerfile_single_shot: str | None = None  # a loop overlay's base (e2e packages), built first
    build_timeout_sec: float = 3600
    cpus: float | None = None
    memory_mb: int | None = None
    gpus: int = 0
    gpu_types: list[str] = Field(default_factory=list)
    gpu_memory_gb: float | None = None
    allow_internet: bool = False


class _VerifierSection(_Section):
    entrypoint: str = "tests/test.sh"
    timeout_sec: float = 1800
    task_kind: str | None = None
    timing_metric: str | None = None
    candidate_source_root: str = "/app/repo"
    submission_root: str | None = None  # e2e packages: where the scored deliverable lives (writable)
    primary_edit_paths: list[str] = Field(default_factory=list)
    forbidden_edit_paths: list[str] = Field(default_factory=list)
    result_paths: list[str] = Field(default_factory=lambda: ["/logs/verifier/reward.json"])


class _MetricSection(_Section):
    name: str | None = None
    goal: str | None = None
    metric_kind: str | None = None
    reward_formula: str | None = None
    ref_speedup: float | None = None
    calibrated_on: str | None = None
    correctness_gates: list[str] = Field(default_factory=list)

    @field_validator("ref_speedup", mode="before")
    @classmethod
    def _digits(cls, v: Any) -> Any:
        return float(v) if isinstance(v, str) and v.strip() else (None if v == "" else v)


class _LoopSection(_Section):
    min_submissions: int = 1
    max_submissions: int = 1
    submit: str = "bash /opt/loop/submit.sh"


class TaskToml(_Section):
    schema_version: str = "2.0"
    task: _TaskSection = Field(default_factory=_TaskSection)
    environment: _EnvironmentSection = Field(default_factory=_EnvironmentSection)
    verifier: _VerifierSection = Field(default_factory=_VerifierSection)
    primary_metric: _MetricSection = Field(default_factory=_MetricSection)
    loop: _LoopSection = Field(default_factory=_LoopSection)


class Anchor(BaseModel):
    value: float | None
    source: str  # "tests/ref_speedup.txt", a manifest path, "task.toml" or "none"
    calibrated_on: str | None = None

    def describe(self) -> str:
        """Where the anchor was read, and on what it was measured: what a verdict names."""
        return f"{self.source} ({self.calibrated_on})" if self.calibrated_on else self.source


class Task(BaseModel):
    """Everything pesflow needs to know about one package, read once."""

    name: str  # "<bench>/<dir>"
    bench: str
    dir: str
    root: Path
    layout: Literal["task/", "flat"]
    toml: TaskToml
    scope: list[str]  # paths relative to the candidate source root
    anchor: Anchor
    reward_class: Literal["performance", "implementation"]
    content_hash: str
    source: PackageSource  # where it comes from; official or pesflow's re-creation

    @property
    def source_root(self) -> str:
        return self.toml.verifier.candidate_source_root.rstrip("/") or "/app/repo"

    def writable_paths(self, extra: list[str] = ()) -> list[str]:  # type: ignore[assignment]
        """The paths a grading may write: the source tree, an e2e package's submission root, the
        format's GRADING_WRITES, and `extra` (evaluator.writable_paths)."""
        sub = [self.toml.verifier.submission_root] if self.toml.verifier.submission_root else []
        return list(dict.fromkeys([self.source_root, *sub, *GRADING_WRITES, *extra]))

    @property
    def dockerfile(self) -> Path:
        return self.root / self.toml.environment.dockerfile

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def gpus(self) -> int:
        return self.toml.environment.gpus

    @property
    def max_submissions(self) -> int:
        return self.toml.loop.max_submissions

    @property
    def forbidden(self) -> list[str]:
        return self.toml.verifier.forbidden_edit_paths

    def _loops(self) -> list[Path]:
        """Where a package keeps what its image bakes into /opt/loop."""
        return [self.root / "environment" / "loop", self.dockerfile.parent / "opt_loop",
                self.root / "environment" / "loop_overlay" / "opt_loop"]

    @property
    def loop_cap(self) -> int | None:
        """The dev submissions the package's own loop allows a solver: its submit.sh's
        MAX_SUBMISSIONS, else its private manifest's max_submissions; None: it has no loop."""
        for loop in self._loops():
            try:
                m = re.search(r"^\s*MAX_SUBMISSIONS=(\d+)", (loop / "submit.sh").read_text(errors="replace"), re.M)
            except OSError:
                continue
            if m:
                return int(m.group(1))
            try:
                return int(json.loads((loop / "private" / "manifest.json").read_text())["max_submissions"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return None

    def has_dev_engine(self) -> bool:
        """Does the package bake an in-session dev engine into /opt/loop (score_engine.sh, or a
        private test.sh)? Read off the package's files, before anything is built."""
        return any((loop / e.removeprefix("/opt/loop/")).is_file() for loop in self._loops() for e in DEV_ENGINES)

    def instruction(self) -> str:
        return (self.root / self.toml.task.instruction).read_text()



def task_roots(explicit: list[str | Path] | None = None) -> list[Path]:
    """Roots to search, highest priority first: --tasks-root, PESFLOW_TASKS_PATH, the benchmark
    `pesflow tasks fetch` fetched, pesflow's bundled re-creations."""
    roots = _given_roots(explicit)
    fetched = fetched_root()
    if fetched is not None:
        roots.append(fetched)
    roots.append(BUNDLED_TASKS)
    return _normal(roots)


def _given_roots(explicit: list[str | Path] | None) -> list[Path]:
    """The roots a user named: --tasks-root (and the config's tasks_roots), then PESFLOW_TASKS_PATH."""
    roots: list[Path] = [Path(r) for r in (explicit or [])]
    return roots + [Path(p) for p in os.environ.get(TASKS_PATH_ENV, "").split(os.pathsep) if p]


def needs_benchmark(name: str, roots: list[str | Path] | None = None) -> bool:
    """Would `name` be looked up in the fetched benchmark, had it been fetched: a catalog name
    (tasks/catalog.json: a misspelt one is no reason to reach the network) found in no root the
    user named, while nothing is fetched yet. Never for a package folder."""
    if (Path(name).expanduser() / "task.toml").is_file() or name.count("/") != 1 or name.startswith("/"):
        return False
    if fetched_root() is not None or name not in _catalog_names():
        return False
    return not any(package_root_in(r, name) for r in _normal(_given_roots(roots)))


def _catalog_names() -> set[str]:
    try:  # evaluator/catalog.py reads the same file, but imports this module
        return {t["name"] for t in json.loads((BUNDLED_TASKS / "catalog.json").read_text())["tasks"]}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _normal(roots: list[Path]) -> list[Path]:
    out: list[Path] = []
    for r in roots:
        r = r.expanduser().resolve()
        # A benchmark checkout's root is accepted as well as its tasks/ folder.
        if (r / "tasks").is_dir() and not any((r / b).is_dir() for b in ("kfc", "lh", "e2e")):
            r = r / "tasks"
        if r not in out:
            out.append(r)
    return out


def package_root_in(root: Path, name: str) -> Path | None:
    bench_dir = root / name
    for candidate in (bench_dir / "task", bench_dir):
        if (candidate / "task.toml").is_file():
            return candidate
    return None


def find_task(name: str, roots: list[str | Path] | None = None) -> Path:
    """Resolve `<bench>/<dir>` (or a package folder path) to its package root."""
    direct = Path(name).expanduser()
    if (direct / "task.toml").is_file():
        return direct.resolve()
    if name.count("/") != 1 or name.startswith("/"):
        raise TaskError(f"task name {name!r} is not of the form <bench>/<dir> (e.g. "
                        "kfc/ssm-selective-scan-firstorder) nor a package folder")
    searched = task_roots(roots)
    for root in searched:
        found = package_root_in(root, name)
        if found is not None:
            return found
    where = ", ".join(str(r) for r in searched)
    raise TaskError(
        f"task {name!r} not found in {where}; pass --tasks-root <Φ-Bench checkout>/tasks or set "
        f"{TASKS_PATH_ENV} (see `pesflow tasks`)"
    )


def package_hash(root: Path, exclude_top: tuple[str, ...] = ()) -> str:
    """sha256 over every file's relative path, exec bit and bytes (symlinks by target)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] in exclude_top or "__pycache__" in rel.parts or p.suffix == ".pyc":
            continue
        if p.is_symlink():
            h.update(f"L {rel} {os.readlink(p)}\n".encode())
        elif p.is_file():
            h.update(f"F {rel} {os.access(p, os.X_OK)}\n".encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _read_toml(path: Path) -> TaskToml:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path}: not valid TOML ({e}); fix the file") from None
    except OSError as e:
        raise TaskError(f"{path}: cannot be read ({e.strerror})") from None
    try:
        return TaskToml.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = err["loc"]
        field = f"[{loc[0]}].{'.'.join(str(x) for x in loc[1:])}" if len(loc) > 1 else str(loc[0])
        raise TaskError(f"{path}: field {field}: {err['msg']} (got {err.get('input')!r}); fix that field") from None


def _scope(toml: TaskToml, path: Path) -> list[str]:
    root = toml.verifier.candidate_source_root.rstrip("/") or "/app/repo"
    out = []
    for p in toml.verifier.primary_edit_paths:
        rel = p[len(root) + 1 :] if p.startswith(root + "/") else p
        if rel.startswith("/") or ".." in Path(rel).parts or not rel:
            raise TaskError(f"{path}: field [verifier].primary_edit_paths: {p!r} is outside {root}; "
                            "list paths under the source root")
        out.append(rel)
    return out


def anchor_number(v: Any) -> float | None:
    """An anchor as packages write it: a number, digits in a string, or a record holding its
    `value` (the e2e manifests: {value, status, metric, ...})."""
    if isinstance(v, dict):
        return anchor_number(v.get("value"))
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        digits = "".join(c for c in v if c.isdigit() or c == ".")
        try:
            return float(digits)
        except ValueError:
            return None
    return None


def _manifest_anchor(data: Any) -> Any:
    """ref_speedup at the top of a manifest, or under the sections the e2e manifests nest it in."""
    if not isinstance(data, dict):
        return None
    for where in (data, data.get("thresholds"), data.get("reward_model")):
        if isinstance(where, dict) and where.get("ref_speedup") is not None:
            return where["ref_speedup"]
    return None


def _calibrated(root: Path, value: float) -> str | None:
    """`pesflow calibrate`'s stamp (the first line of tests/ref_speedup.caveat.md, evaluator/calibrate.py)
    when it is the stamp of this very anchor: the hardware and time it was measured on."""
    try:
        first = (root / "tests" / "ref_speedup.caveat.md").read_text(errors="replace").split("\n", 1)[0]
    except OSError:
        return None
    m = re.match(r"<!-- pesflow calibrate: (\{.*\}) -->\s*$", first)
    try:
        stamp = json.loads(m.group(1)) if m else None
    except ValueError:
        return None
    if not isinstance(stamp, dict) or anchor_number(stamp.get("value")) != round(value, 4):
        return None  # the number was changed by hand since: the stamp says nothing about it
    return f"pesflow calibrate on {stamp.get('hardware')}, {stamp.get('measured')}"


def read_anchor(root: Path, toml: TaskToml) -> Anchor:
    """The anchor as the grader resolves it: tests/ref_speedup.txt, then the manifests, then task.toml."""
    cal = toml.primary_metric.calibrated_on
    txt = root / "tests" / "ref_speedup.txt"
    if txt.is_file():
        value = anchor_number(txt.read_text())
        if value is None:
            raise TaskError(f"{txt}: holds no number ({txt.read_text()[:40]!r}); write the "
                            "anchor's digits only, e.g. 3.2")
        return Anchor(value=value, source="tests/ref_speedup.txt", calibrated_on=_calibrated(root, value) or cal)
    for rel in ("environment/verifier-correctness-manifest.json", "tests/verifier-correctness-manifest.json",
                "tests/reward_manifest.json"):
        man = root / rel
        if man.is_file():
            try:
                raw = _manifest_anchor(json.loads(man.read_text()))
            except json.JSONDecodeError:
                raise TaskError(f"{man}: not valid JSON; fix the file or remove it") from None
            value = anchor_number(raw)
            if value is not None:
                return Anchor(value=value, source=rel, calibrated_on=cal)
    if toml.primary_metric.ref_speedup is not None:
        return Anchor(value=toml.primary_metric.ref_speedup, source="task.toml", calibrated_on=cal)
    return Anchor(value=None, source="none", calibrated_on=cal)


def load_task(name: str, roots: list[str | Path] | None = None, official_url: str = OFFICIAL_URL) -> Task:
    root = find_task(name, roots)
    toml_path = root / "task.toml"
    toml = _read_toml(toml_path)
    layout: Literal["task/", "flat"] = "task/" if root.name == "task" and (root.parent / "task").is_dir() else "flat"
    pkg_dir = root.parent if layout == "task/" else root
    bench, dir_ = pkg_dir.parent.name, pkg_dir.name
    if "/" in name and not Path(name).is_dir():
        bench, dir_ = name.split("/")
    instruction = root / toml.task.instruction
    if not instruction.is_file():
        raise TaskError(f"{toml_path}: field [task].instruction: {instruction} does not "
                        "exist; add the file or fix the field")
    if not (root / toml.environment.dockerfile).is_file():
        raise TaskError(f"{toml_path}: field [environment].dockerfile: {root / toml.environment.dockerfile}"
                        " does not exist; fix the field")
    kind = (toml.verifier.task_kind or toml.task.kind or "").lower()
    reward_class: Literal["performance", "implementation"] = (
        "implementation" if kind in ("implementation", "correctness") else "performance"
    )
    content_hash = package_hash(root)
    tasks_root = pkg_dir.parent.parent
    return Task(
        name=f"{bench}/{dir_}",
        bench=bench,
        dir=dir_,
        root=root,
        layout=layout,
        toml=toml,
        scope=_scope(toml, toml_path),
        anchor=read_anchor(root, toml),
        reward_class=reward_class,
        content_hash=content_hash,
        source=source_of(root, tasks_root, content_hash, official_url),
    )
