"""Prompt templates (prompts/*.md, `string.Template` with $names) and what goes into them.

Only solver-visible material enters a prompt: the task's instruction.md, scope files, and
verdicts reduced to status, speedup, test counts and gate names. Never the reward (with the
speedup it would give the anchor away), never the anchor, never a line of tests/. The
LeakGuard checks every prompt before it is sent.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from agent.population import Solution
from evaluator.task import Task

PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
_LANG = {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".cc": "cpp", ".h": "cpp", ".c": "c"}
VARIANTS = [
    "Implement the plan faithfully and carefully.",
    "Implement the plan, and push it further wherever that stays exact.",
    "Take the plan's idea but choose a different implementation strategy than the obvious one.",
    "Implement the plan with the smallest change that captures most of its gain.",
]


class LeakError(Exception):
    """A prompt would carry hidden-grader material: a pesflow bug, never sent."""


def render(name: str, **values: object) -> str:
    return Template((PROMPTS / f"{name}.md").read_text()).substitute({k: str(v) for k, v in values.items()})


def code_block(files: dict[str, str]) -> str:
    parts = []
    for path in sorted(files):
        lang = _LANG.get(Path(path).suffix, "")
        parts.append(f"### {path}\n```{lang}\n{files[path].rstrip()}\n```")
    return "\n\n".join(parts)


def verdict_text(sol: Solution) -> str:
    """What the model may know of a verdict: no reward, no anchor."""
    tests = f"{sol.tests_passed}/{sol.tests_total} correctness cases passed" if sol.tests_total else ""
    if sol.status == "no_code":
        return "no usable code: " + (sol.lessons or "the answer had no applicable edit")
    if sol.duplicate_of:
        return f"identical to {sol.duplicate_of} (not graded again); " + verdict_text_core(sol, tests)
    return verdict_text_core(sol, tests)


def verdict_text_core(sol: Solution, tests: str) -> str:
    if sol.correct:
        sp = f"speedup {sol.speedup:.3f}x over the baseline" if sol.speedup is not None else "speed not measured"
        return "; ".join(x for x in ("correct", sp, tests) if x)
    reasons = ", ".join(sol.hard_fail_reasons[:6]) or sol.status
    return "; ".join(x for x in (f"FAILED ({sol.status}): {reasons}", tests) if x)


def variant(child_index: int) -> str:
    return VARIANTS[child_index % len(VARIANTS)]


class LeakGuard:
    """Refuses any prompt that holds a line of the hidden tests/ (one the solver cannot see
    elsewhere) or the anchor's digits."""

    MIN_LINE = 24

    def __init__(self, task: Task):
        visible = set(self._lines(task.instruction()))
        repo = task.root / "environment" / "repo"
        for p in repo.rglob("*") if repo.is_dir() else []:
            if p.is_file() and p.stat().st_size < 1 << 20:
                visible.update(self._lines(p.read_text(errors="replace")))
        secret: set[str] = set()
        for p in task.tests_dir.rglob("*") if task.tests_dir.is_dir() else []:
            if p.is_file() and p.stat().st_size < 4 << 20:
                secret.update(self._lines(p.read_text(errors="replace")))
        self.secret_lines = sorted(secret - visible, key=len, reverse=True)
        self.anchor = None
        txt = task.tests_dir / "ref_speedup.txt"
        if txt.is_file():
            digits = "".join(c for c in txt.read_text() if c.isdigit() or c == ".")
            self.anchor = digits if len(digits.replace(".", "")) >= 3 else None

    def _lines(self, text: str) -> list[str]:
        return [ln.strip() for ln in text.splitlines() if len(ln.strip()) >= self.MIN_LINE]

    def check(self, prompt: str) -> None:
        if self.anchor and self.anchor in prompt:
            raise LeakError("a prompt holds the task's anchor; not sent")
        for line in self.secret_lines:
            if line in prompt:
                raise LeakError(f"a prompt holds a line of the hidden tests/ ({line[:40]!r}...); not sent")
