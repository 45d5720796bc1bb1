"""Prompt templates (prompts/*.md, `string.Template` with $names) and what goes into them.

Only solver-visible material enters a prompt: the task's instruction.md, scope files, and
verdicts reduced to status, speedup, test counts and gate names. Never the reward (with the
speedup it would give the anchor away), never the anchor, never a line of tests/. The
leak guard (agent/leak_guard.py) screens every prompt before it is sent. A grading whose
figures do not count (a suspect, one awaiting review, one a person rejected) is shown by why,
in the trust families' plain words, never by its figures: an exploit's speedup is not a speedup.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from agent.population.database import Solution
from agent.search.protocol import Protocol
from evaluator.trust.findings import AT_REWARD_CAP, FAMILIES, REVIEW, REVIEWS, Trust

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
_LANG = {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".cc": "cpp", ".h": "cpp", ".c": "c"}
VARIANTS = [
    "Implement the plan faithfully and carefully.",
    "Implement the plan, and push it further wherever that stays exact.",
    "Take the plan's idea but choose a different implementation strategy than the obvious one.",
    "Implement the plan with the smallest change that captures most of its gain.",
]


NO_CODE = "no usable code: "


class Prompt(str):
    """A prompt's text, with the parts it was built of: each part but the last ends a prefix that
    stays the same from call to call (agent/search/roles.py shared_parts), where the gateway puts a
    prompt-cache breakpoint. It is its text everywhere a string is read."""

    parts: tuple[str, ...]

    def __new__(cls, parts: list[str] | tuple[str, ...]) -> "Prompt":
        obj = super().__new__(cls, "".join(parts))
        obj.parts = tuple(parts)
        return obj

    def then(self, more: str) -> "Prompt":
        """This prompt, then `more` (a fix turn, a repair): its own breakpoints kept, one more at its end."""
        return Prompt([*self.parts, more])


def render(name: str, **values: object) -> str:
    return Template((PROMPTS / f"{name}.md").read_text()).substitute({k: str(v) for k, v in values.items()})


def code_block(files: dict[str, str]) -> str:
    parts = []
    for path in sorted(files):
        lang = _LANG.get(Path(path).suffix, "")
        parts.append(f"### {path}\n```{lang}\n{files[path].rstrip()}\n```")
    return "\n\n".join(parts)


def trust_words(trust: Trust, evidence_chars: int = 160) -> str:
    """Why a grading does not count, in plain words: each reason's family as FAMILIES says it, with
    its evidence (where and what). The review family's evidence holds the claimed figures (and the
    reference's): only its meaning is given; an unknown family is named alone, for the same care."""
    said = []
    for reason in trust.reasons:
        family, _, evidence = reason.partition(":")
        family, evidence = family.strip(), evidence.strip()
        if family in FAMILIES:
            said.append(f"it {FAMILIES[family]} ({family}" + (f": {evidence[:evidence_chars]})" if evidence else ")"))
        elif family == AT_REWARD_CAP:  # where the reward caps is the anchor squared: not the model's to know
            said.append("its figure is held for a person's review")
        elif family == REVIEW:
            said.append(f"its speedup is far past what the reference reaches, awaiting a person's review ({REVIEW})")
        elif family in REVIEWS:
            said.append(f"{REVIEWS[family]}, awaiting a person's review ({family})")
        else:
            said.append(f"the screens flagged it ({family})")
    if trust.review and trust.review.get("decision") == "reject":
        said.append(f"a person rejected it: {str(trust.review.get('why') or '')[:evidence_chars]}")
    if not said:
        said.append("awaiting a person's review" if trust.needs_review else "the screens flagged its grading")
    return "; ".join(dict.fromkeys(said))


def untrusted_note(sol: Solution) -> str:
    """The lesson's opening for a child whose grading does not count, so the model stops trying it."""
    what = "is awaiting review" if sol.trust.needs_review and not sol.trust.suspect else "scores nothing"
    return f"NOT COUNTED, {what}: {trust_words(sol.trust)}. Do not repeat this; it is detected every time."


def verdict_text(sol: Solution, protocol: Protocol) -> str:
    """What the model may know of a verdict: no reward, no anchor, no figure of a grading that does
    not count; beyond pesflow's one line, what `protocol` (agent/search/protocol.py) shows: under
    benchmark a dev grading as the package's own loop printed it, and nothing more (pesflow's one
    line where the package has no loop feedback or the grading's figures do not count); under
    engineer pesflow's line, the package's lines, the dev engine's failed checks and per-workload
    figures, the mismatch, and the candidate's own errors."""
    tests = f"{sol.tests_passed}/{sol.tests_total} correctness cases passed" if sol.tests_total else ""
    if sol.status == "no_code":
        said = sol.lessons.removeprefix(NO_CODE).strip() if sol.lessons else ""
        return NO_CODE + (said or "the answer had no applicable edit")
    same = f"identical to {sol.duplicate_of} (not graded again); " if sol.duplicate_of else ""
    if protocol.loop_lines == "instead" and sol.feedback and sol.is_result:
        return same + "the package's feedback:\n" + _indented(sol.feedback)
    parts = [same + verdict_text_core(sol, tests)]
    if protocol.loop_lines == "after" and sol.feedback:
        parts.append("the package's feedback:\n" + _indented(sol.feedback))
    if protocol.dev_details and sol.dev_details:
        parts.append("the dev engine's details:\n" + _indented("\n".join(sol.dev_details)))
    if protocol.mismatch and sol.mismatch:
        parts.append("how its answer differs from the frozen baseline's (pesflow's own comparison):\n"
                     + _indented("\n".join(sol.mismatch)))
    if protocol.diagnostics and sol.diagnostics:
        parts.append("its own errors, from the grader's output:\n" + _indented("\n".join(sol.diagnostics)))
    return "\n".join(parts)


def shown_reasons(reasons: list[str]) -> list[str]:
    """A grading's gate names as a model may read them: a gate that places the speedup against the
    anchor (speedup_not_above_anchor, ref_speedup_invalid ...) says where the anchor lies, so it is
    named only as the grader's score gate."""
    return list(dict.fromkeys("a gate of the grader's score" if ("anchor" in r or "ref_speedup" in r) else r
                              for r in reasons))


def _indented(text: str) -> str:
    return "\n".join("    " + ln for ln in text.splitlines())


def verdict_text_core(sol: Solution, tests: str) -> str:
    if not sol.is_result:
        failed = (f"FAILED ({sol.status}): {', '.join(shown_reasons(sol.hard_fail_reasons)[:6]) or sol.status}; "
                  if not sol.correct else "")
        return "; ".join(x for x in (f"{failed}NOT COUNTED: {trust_words(sol.trust)}", tests) if x)
    if sol.correct:
        if sol.speedup is not None:
            sp = f"speedup {sol.speedup:.3f}x over the baseline"
        elif sol.dev_figure is not None:  # the dev engine's own figure, named for what it is
            sp = f"dev engine figure {sol.dev_figure:.4g} ({sol.dev_kind}; higher is better)"
        else:
            sp = "speed not measured"
        return "; ".join(x for x in ("correct", sp, tests) if x)
    reasons = ", ".join(shown_reasons(sol.hard_fail_reasons)[:6]) or sol.status
    return "; ".join(x for x in (f"FAILED ({sol.status}): {reasons}", tests) if x)


def variant(child_index: int) -> str:
    return VARIANTS[child_index % len(VARIANTS)]
