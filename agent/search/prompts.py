"""Prompt templates (prompts/*.md, `string.Template` with $names) and what goes into them.

Only solver-visible material enters a prompt: the task's instruction.md, scope files, and
verdicts reduced to status, speedup, test counts and gate names. Never the reward (with the
speedup it would give the anchor away), never the anchor, never a line of tests/. The
leak guard (agent/leak_guard.py) screens every prompt before it is sent.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from agent.population.database import Solution

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
_LANG = {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".cc": "cpp", ".h": "cpp", ".c": "c"}
VARIANTS = [
    "Implement the plan faithfully and carefully.",
    "Implement the plan, and push it further wherever that stays exact.",
    "Take the plan's idea but choose a different implementation strategy than the obvious one.",
    "Implement the plan with the smallest change that captures most of its gain.",
]


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
        if sol.speedup is not None:
            sp = f"speedup {sol.speedup:.3f}x over the baseline"
        elif sol.dev_figure is not None:  # the dev engine's own figure, named for what it is
            sp = f"dev engine figure {sol.dev_figure:.4g} ({sol.dev_kind}; higher is better)"
        else:
            sp = "speed not measured"
        return "; ".join(x for x in ("correct", sp, tests) if x)
    reasons = ", ".join(sol.hard_fail_reasons[:6]) or sol.status
    return "; ".join(x for x in (f"FAILED ({sol.status}): {reasons}", tests) if x)


def variant(child_index: int) -> str:
    return VARIANTS[child_index % len(VARIANTS)]
