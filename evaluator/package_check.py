"""`pesflow tasks check`: is each package graded, and labelled, right here?

Per package: prepare it, grade noop, every oracle it ships (through the package's own mode
dispatch, evaluator/modes.py) and its negative where there is one, and classify with evidence
(the first error line, the measured values):

- ok: noop scores 0, the oracle passes within [0.8, 1.25] of the anchor (implementation tasks:
  scores 1), the negative scores 0;
- anchor_differs: graded right, but the oracle over the anchor falls outside that band (the
  anchor was measured on other hardware: re-calibrate with `pesflow calibrate`);
- package_defect: the package's own build, or its frozen baseline, fails the same way whatever
  the candidate (noop and oracle alike), or its negative scores;
- environment_differs: the local stand-in differs from what the Dockerfile pins, and the
  failure points there (a missing or other-version module, an import from elsewhere); or the
  GPU ran out of memory (a card with less memory than the one the package was made for);
- needs_gpu: a GPU package on a machine without one;
- unsupported: something pesflow does not grade, named (a multi-stage Dockerfile, no oracle).
A traceback of pesflow is never a class: check_package lets it through, as the bug it is.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from evaluator.hardware import gpu_available
from evaluator.modes import artifacts, self_dispatched
from evaluator.task import Task
from evaluator.trust.instrument import screen_hash
from evaluator.verdict import Status, Verdict, code_reasons

ANCHOR_BAND = (0.8, 1.25)
CLASSES = ("ok", "anchor_differs", "package_defect", "environment_differs", "needs_gpu", "unsupported")
CHECK_VERSION = "check-4"  # bump when a rule changes: earlier results are then checked again
_ERROR = re.compile(r"(Traceback|Error|error:|FAIL|fatal|Assertion|No module named|cannot|not found)", re.I)
# what a GPU's own allocator says when the card is full (PyTorch, cuBLAS, the CUDA runtime)
_CARD_MEMORY = re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|"
                          r"CUDA_ERROR_OUT_OF_MEMORY", re.I)
_ENV_HINTS = re.compile(r"No module named|import_origin|version|torch|triton|vllm|flash.?attn|cuda|libcu|nvcc|GLIBC",
                        re.I)


class ModeResult(BaseModel):
    grader: str
    mode: str
    artifact: str | None = None
    status: str
    reward: float | None = None
    speedup: float | None = None
    reasons: list[str] = Field(default_factory=list)
    dev_kind: str | None = None
    first_error: str = ""
    seconds: float = 0.0
    suspect: bool | None = None  # the trust screen's verdict on this grading (evaluator/trust/)
    trust_reasons: list[str] = Field(default_factory=list)
    card_memory: str = ""  # a line of the grading's logs saying the GPU ran out of memory


class PackageCheck(BaseModel):
    task: str
    key: str  # content hash + check version + graders: what makes a result reusable
    gpus: int
    reward_class: str
    klass: str  # one of CLASSES
    evidence: str
    anchor: float | None = None
    oracle_over_anchor: float | None = None
    official: bool | None = None
    environment: dict[str, Any] | None = None
    results: list[ModeResult] = Field(default_factory=list)
    seconds: float = 0.0


class GradingRecord(BaseModel):
    """One finished grading of a check, kept in `gradings.jsonl` as soon as it ends: a row longer
    than one sitting (a 10-minute device call) is then finished over several, each grading once."""
    key: str  # the package's check key: a changed package or rule grades again
    result: ModeResult
    environment: dict[str, Any] | None = None

    def slot(self) -> tuple[str, str, str, str | None]:
        return self.key, self.result.grader, self.result.mode, self.result.artifact


def first_error(v: Verdict) -> str:
    """The first error the grader's output or logs show (a traceback's exception line, not its
    header), or the verdict's message."""
    if v.log_dir:
        d = Path(v.log_dir)
        for p in [d / "grader_output.log", *sorted((d / "logs").rglob("*.log"))] if d.is_dir() else []:
            try:
                lines = p.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for i, line in enumerate(lines):
                if TRACEBACK in line:
                    exc = exception_line(lines, i)
                    if exc:
                        return exc[:240]
                    continue  # a header with no exception line after it (a cut log): look further
                if _ERROR.search(line) and not line.startswith("@@pesflow"):
                    return line.strip()[:240]
    return v.message[:240]


TRACEBACK = "Traceback (most recent call last)"


def exception_line(lines: list[str], i: int) -> str:
    """The exception line of the traceback whose header is lines[i]: the first later line indented
    no deeper than the header (a traceback may be indented or prefixed as a whole in a log)."""
    header = lines[i]
    indent = header.index(TRACEBACK)
    for ln in lines[i + 1:]:
        body = ln[indent:] if ln[:indent] == header[:indent] else ln.lstrip()
        if body.strip() and not body[0].isspace() and TRACEBACK not in body:
            return body.strip()
    return ""


def _result(v: Verdict, grader: str, mode: str, artifact: str | None) -> ModeResult:
    failed = v.status.value not in ("ok", "hard_fail") or not v.correct
    return ModeResult(grader=grader, mode=mode, artifact=artifact, status=v.status.value, reward=v.reward,
                      speedup=v.speedup, reasons=v.hard_fail_reasons[:8], dev_kind=v.dev.kind if v.dev else None,
                      first_error=first_error(v) if failed else "", seconds=v.seconds,
                      suspect=v.trust.suspect if v.trust.checks.get("screened") else None,
                      trust_reasons=v.trust.reasons[:4],
                      card_memory=card_memory(v) if failed or v.status != Status.ok else "")


def card_memory(v: Verdict, tail: int = 1 << 20) -> str:
    """The first line of a grading's output or logs (whatever their names: a package's timing
    writes *.out) saying the GPU ran out of memory, '' where none does (the last `tail` bytes of each)."""
    d = Path(v.log_dir) if v.log_dir else None
    if d is None or not d.is_dir():
        return ""
    for p in [d / "grader_output.log", *sorted((d / "logs").rglob("*"))]:
        try:
            if p.is_symlink() or not p.is_file():
                continue
            with open(p, "rb") as f:
                f.seek(max(0, p.stat().st_size - tail))
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if _CARD_MEMORY.search(line):
                return line.strip()[:240]
    return ""


def check_package(ev, task: Task, graders: tuple[str, ...] = ("hidden",),  # noqa: ANN001 - an Evaluator
                  device: str | None = None, kept: dict[tuple, GradingRecord] | None = None,
                  keep: Callable[[GradingRecord], None] = lambda r: None) -> PackageCheck:
    """Grade the package's modes and classify it (see the module's docstring). A grading `kept`
    holds for this package's key is reused, not graded again; each new one is passed to `keep`."""
    kept = kept or {}
    t0 = time.monotonic()
    base = dict(task=task.name, key=check_key(task, graders), gpus=task.gpus, reward_class=task.reward_class,
                anchor=task.anchor.value, official=task.source.official)
    if task.gpus > 0 and device != "cpu" and not gpu_available():
        return PackageCheck(**base, klass="needs_gpu", evidence=f"gpus = {task.gpus}; this machine has none")
    results: list[ModeResult] = []
    environment = None
    for grader in graders:
        if grader == "dev" and not task.has_dev_engine():
            continue
        plan = [("noop", None)] + [("oracle", a) for a in artifacts(task, "oracle")]
        if grader == "hidden" and not artifacts(task, "oracle") and self_dispatched(task, "oracle"):
            plan.append(("oracle", None))
        plan += [("negative", a) for a in artifacts(task, "negative")[:1]]
        if grader == "hidden" and not artifacts(task, "negative") and self_dispatched(task, "negative"):
            plan.append(("negative", None))
        for mode, art in plan:
            name = str(art.relative_to(task.root)) if art else None
            record = kept.get((base["key"], grader, mode, name))
            if record is None:
                v = ev.evaluate(task, mode=mode, grader=grader, device=device, artifact=art)
                record = GradingRecord(key=base["key"], result=_result(v, grader, mode, name),
                                       environment=v.environment)
                keep(record)
            environment = environment or record.environment
            results.append(record.result)
            if record.result.status == Status.infra_error.value and mode == "noop":
                break  # preparing failed: every mode would fail the same way
    klass, evidence, ratio = classify(task, results, environment)
    return PackageCheck(**base, klass=klass, evidence=evidence, oracle_over_anchor=ratio, environment=environment,
                        results=results, seconds=round(time.monotonic() - t0, 1))


def check_key(task: Task, graders: tuple[str, ...]) -> str:
    """What makes a kept row or grading reusable: the package, the check's rules, the trust
    screen's code (a verdict of an earlier screen is not this one's) and the graders."""
    return f"{task.content_hash[:20]}/{CHECK_VERSION}-{screen_hash()}/{'+'.join(graders)}"


def classify(task: Task, results: list[ModeResult], environment: dict | None) -> tuple[str, str, float | None]:
    """(class, evidence, oracle speedup over the anchor) from a package's graded modes."""
    diffs = (environment or {}).get("differences") or []
    env_note = f" (stand-in differs: {'; '.join(diffs)[:200]})" if diffs else ""
    hidden = [r for r in results if r.grader == "hidden"] or results
    noop = next((r for r in hidden if r.mode == "noop"), None)
    oracles = [r for r in hidden if r.mode == "oracle"]
    negative = next((r for r in hidden if r.mode == "negative"), None)
    if noop is None:
        return "unsupported", "no grader to check it with (no dev engine, and --grader dev)", None
    if noop.status == "infra_error":
        msg = noop.first_error
        if re.search(r"multi-stage|COPY --from|not replayed", msg):
            return "unsupported", msg, None
        if _ENV_HINTS.search(msg) and (diffs or "stand-in" in msg):  # e.g. a smoke step after skipped installs
            return "environment_differs", msg + env_note, None
        return "package_defect", f"the package cannot be prepared: {msg}", None
    if not oracles:
        return "unsupported", "ships no oracle reference (nothing to check the grader against)", None
    good = [o for o in oracles if o.status in ("ok", "hard_fail") and not _code_fails(o)]
    if not good:
        o = oracles[0]
        why = o.first_error or ", ".join(o.reasons) or o.status
        full = next((r.card_memory for r in [o, noop] if r.card_memory), "")
        if full:  # the card, not the package: its memory is less than the card the package was made for
            cards = ", ".join(task.toml.environment.gpu_types) or "another card"
            return ("environment_differs", f"{', '.join(o.reasons[:3]) or o.status}: the GPU ran out of memory "
                    f"({full}); the package was made for {cards}: grade it on a card with more memory", None)
        if any("stand-in python" in r.first_error for r in hidden):
            return "environment_differs", why, None
        if diffs and _ENV_HINTS.search(" ".join([why, *o.reasons])):  # the failure points at what differs
            return "environment_differs", f"{', '.join(o.reasons[:3]) or o.status}: {why}{env_note}", None
        if noop.reasons and _code_fails(noop) and _code_fails(noop)[:1] == _code_fails(o)[:1]:
            return "package_defect", f"noop and oracle fail the same way ({_code_fails(o)[0]}): {why}", None
        if diffs and not _code_fails(noop):
            return "environment_differs", why + env_note, None
        return "package_defect", f"the oracle fails: {why}", None
    o = good[0]
    if negative is not None and negative.reward and negative.reward > 0:
        return "package_defect", f"the negative scores {negative.reward:.3g} (its speedup {negative.speedup})", None
    if noop.reward and noop.reward > 0:
        return "package_defect", f"noop scores {noop.reward:.3g}", None
    if task.reward_class == "implementation":
        return ("ok", "oracle passes, noop and negative score 0", None) if o.reward == 1.0 else \
            ("package_defect", f"the oracle passes every gate but scores {o.reward}", None)
    anchor = task.anchor.value
    if o.speedup is None or not anchor:
        return "package_defect", f"no speedup or no anchor to compare (speedup {o.speedup}, anchor {anchor})", None
    ratio = round(o.speedup / anchor, 4)
    what = f"oracle {o.speedup:.4g}x, anchor {anchor:.4g} ({ratio:.3g}x)"
    if ANCHOR_BAND[0] <= ratio <= ANCHOR_BAND[1]:
        return "ok", what, ratio
    return "anchor_differs", what + "; re-calibrate here with `pesflow calibrate`" + env_note, ratio


def _code_fails(r: ModeResult) -> list[str]:
    return code_reasons(r.reasons) if r.status in ("ok", "hard_fail") else [r.status]


def run_checks(ev, tasks: list[Task], graders: tuple[str, ...], out: Path, device: str | None = None,  # noqa: ANN001
               on_done: Callable[[PackageCheck, bool], None] = lambda c, reused: None) -> list[PackageCheck]:
    """Check each package, reusing what `out/results.jsonl` already holds for the same content
    (a check that was stopped continues where it was, down to its finished gradings in
    `out/gradings.jsonl`); writes tasks-check.md and .json."""
    out.mkdir(parents=True, exist_ok=True)
    done = load_results(out / "results.jsonl")
    kept = load_gradings(out / "gradings.jsonl")

    def keep(record: GradingRecord) -> None:
        _append(out / "gradings.jsonl", record)
    checks = []
    for task in tasks:
        key = check_key(task, graders)
        if key in done:
            checks.append(done[key])
            on_done(done[key], True)
            continue
        c = check_package(ev, task, graders, device, kept=kept, keep=keep)
        _append(out / "results.jsonl", c)
        checks.append(c)
        on_done(c, False)
    (out / "tasks-check.json").write_text(json.dumps([c.model_dump(mode="json") for c in checks], indent=1))
    (out / "tasks-check.md").write_text(markdown(checks))
    return checks


def _lines(path: Path, model: type[BaseModel]) -> list[Any]:
    """The records a JSON-lines file holds, in order (a line torn by a kill is skipped)."""
    found = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                found.append(model.model_validate_json(line))
            except ValueError:
                continue
    return found


def _append(path: Path, record: BaseModel) -> None:
    with open(path, "a") as f:
        f.write(record.model_dump_json() + "\n")


def load_results(path: Path) -> dict[str, PackageCheck]:
    return {c.key: c for c in _lines(path, PackageCheck)}


def load_gradings(path: Path) -> dict[tuple, GradingRecord]:
    return {r.slot(): r for r in _lines(path, GradingRecord)}


def markdown(checks: list[PackageCheck]) -> str:
    counts = {k: sum(1 for c in checks if c.klass == k) for k in CLASSES}
    lines = ["# pesflow tasks check", "", "| class | packages |", "|---|---|"]
    lines += [f"| {k} | {n} |" for k, n in counts.items() if n]
    lines += ["", "| package | class | official | noop | oracle | negative | evidence |",
              "|---|---|---|---|---|---|---|"]
    for c in checks:
        def cell(mode: str) -> str:
            rs = ([r for r in c.results if r.mode == mode and r.grader == "hidden"]
                  or [r for r in c.results if r.mode == mode])
            return "<br>".join(f"{r.status} r={_fmt(r.reward)} s={_fmt(r.speedup)}{_trust(r)}" for r in rs) or "-"
        ev = c.evidence.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c.task} | {c.klass} | {c.official} | {cell('noop')} | "
                     f"{cell('oracle')} | {cell('negative')} | {ev} |")
    return "\n".join(lines) + "\n"


def _trust(r: ModeResult) -> str:
    """The trust screen's word on a grading: ' SUSPECT (family)' or ' clean'; nothing when unscreened."""
    if r.suspect is None:
        return ""
    return f" SUSPECT ({', '.join(x.split(':', 1)[0] for x in r.trust_reasons[:2])})" if r.suspect else " clean"


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
