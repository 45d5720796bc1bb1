"""The three LLM roles of a round: planner, executor (with one repair), summarizer.

Each is a pure prompt builder plus one gateway call and a tolerant reader of the answer; a
failed or useless answer becomes a recorded failure, never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from agent.edits import EDIT_FORMAT_HELP, extract_and_apply, format_failures
from agent.gateway import Gateway
from agent.population import Solution
from agent.prompts import code_block, render, variant, verdict_text

SYSTEM = "You are part of pesflow, an evolutionary search for faster, exactly correct kernels and systems code."
WHOLE_FILE_HELP = (
    "Answer with the complete new text of every file you change, each in its own fenced code block "
    "whose info string names the file, e.g.\n```python path/to/file.py\n<the whole file>\n```"
)
FALLBACK_PLAN = "Make the parent faster while keeping every result exact: remove the dominant cost you can see in its code."


@dataclass
class Context:
    """What every prompt of a run shares."""

    instruction: str
    title: str
    scope: list[str]
    memory: list[str] = field(default_factory=list)
    memory_items: int = 12
    lesson_chars: int = 400
    plan_chars: int = 4000
    inspiration_chars: int = 6000
    whole_files_only: bool = False


def _memory_text(memory: list[str]) -> str:
    return "\n".join(f"- {m}" for m in memory) or "(nothing yet)"


def _inspirations_text(ctx: Context, inspirations: list[Solution]) -> str:
    if not inspirations:
        return "(none yet)"
    parts = []
    for s in inspirations:
        code = code_block(s.files)
        if len(code) > ctx.inspiration_chars:  # bounded: prompts must not grow round after round
            code = code[: ctx.inspiration_chars] + "\n... (cut)"
        parts.append(f"## {s.id}: {verdict_text(s)}\n{(s.lessons or '')[: ctx.lesson_chars]}\n{code}")
    return "\n\n".join(parts)


# ---------------------------------------------------------------- planner
def planner_prompt(ctx: Context, parent: Solution, inspirations: list[Solution], failures: list[Solution]) -> str:
    fails = "\n".join(f"- {s.id}: {verdict_text(s)}. {(s.lessons or '')[:200]}" for s in failures) or "(none)"
    return render("planner", instruction=ctx.instruction, parent_id=parent.id, parent_verdict=verdict_text(parent),
                  parent_lessons=(parent.lessons or "(none)")[: ctx.lesson_chars], parent_code=code_block(parent.files),
                  inspirations=_inspirations_text(ctx, inspirations), memory=_memory_text(ctx.memory), failures=fails)


def plan(gw: Gateway, ctx: Context, parent: Solution, inspirations: list[Solution], failures: list[Solution], tag: str) -> tuple[str, str, bool]:
    """(plan, prompt, ok)"""
    prompt = planner_prompt(ctx, parent, inspirations, failures)
    out = gw.call("planner", SYSTEM, prompt, tag)
    if not out.text or not out.text.strip():
        return FALLBACK_PLAN, out.sent, False
    return out.text.strip()[: ctx.plan_chars], out.sent, True


# ---------------------------------------------------------------- executor
@dataclass
class Proposal:
    files: dict[str, str] | None  # full scope files of the child; None: nothing usable
    status: str  # "ok" | "no_code" | "llm_error"
    detail: str = ""
    transcript: list[tuple[str, str]] = field(default_factory=list)  # (prompt, response) pairs, repair included
    repaired: bool = False


def executor_prompt(ctx: Context, parent: Solution, plan_text: str, child_index: int, children: int) -> str:
    return render("executor", instruction=ctx.instruction, plan=plan_text, child_index=child_index + 1, children=children,
                  variant=variant(child_index), parent_id=parent.id, parent_code=code_block(parent.files),
                  edit_format=WHOLE_FILE_HELP if ctx.whole_files_only else EDIT_FORMAT_HELP, scope=", ".join(ctx.scope))


def propose(gw: Gateway, ctx: Context, parent: Solution, plan_text: str, child_index: int, children: int,
            tag: str, repair_attempts: int = 1) -> Proposal:
    prompt = executor_prompt(ctx, parent, plan_text, child_index, children)
    out = gw.call("executor", SYSTEM, prompt, tag)
    transcript = [(out.sent, out.text or f"(no answer: {out.error})")]
    if out.text is None:
        return Proposal(None, "llm_error", out.error or "", transcript)
    for attempt in range(repair_attempts + 1):
        result = extract_and_apply(out.text, parent.files)
        if result.ok:
            return Proposal({**parent.files, **result.files}, "ok", "", transcript, repaired=attempt > 0)
        problem = format_failures(result.failures) if result.failures else "Your edits changed nothing in the code."
        if attempt == repair_attempts:
            return Proposal(None, "no_code", problem[:600], transcript, repaired=attempt > 0)
        repair = render("repair", failures=problem, parent_code=code_block(parent.files),
                        edit_format_short="SEARCH/REPLACE blocks or whole files in fenced blocks")
        out = gw.call("repair", SYSTEM, prompt + "\n\n# Your previous answer\n" + out.text + "\n\n" + repair, f"{tag}/repair{attempt + 1}")
        transcript.append((out.sent, out.text or f"(no answer: {out.error})"))
        if out.text is None:
            return Proposal(None, "llm_error", out.error or "", transcript, repaired=True)
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- summarizer
def summarizer_prompt(ctx: Context, round_: int, parent: Solution, plan_text: str, children: list[Solution],
                      diffs: dict[str, str]) -> str:
    parts = []
    for c in children:
        diff = diffs.get(c.id, "")
        if len(diff) > 3000:
            diff = diff[:3000] + "\n... (cut)"
        parts.append(f"## {c.id}: {verdict_text(c)}\n```diff\n{diff or '(no change)'}\n```")
    return render("summarizer", task_title=ctx.title, round=round_, parent_id=parent.id, parent_verdict=verdict_text(parent),
                  plan=plan_text[:1500], children="\n\n".join(parts) or "(no children)", memory=_memory_text(ctx.memory),
                  memory_items=ctx.memory_items, lesson_chars=ctx.lesson_chars)


def _json_object(text: str) -> dict | None:
    for candidate in [text, *re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S), *re.findall(r"(\{.*\})", text, re.S)]:
        try:
            v = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(v, dict):
            return v
    return None


def default_lesson(c: Solution) -> str:
    return f"{verdict_text(c)}."


def summarize(gw: Gateway, ctx: Context, round_: int, parent: Solution, plan_text: str, children: list[Solution],
              diffs: dict[str, str], tag: str) -> tuple[dict[str, str], list[str], str, str | None, bool]:
    """(lessons by child id, new memory, prompt, response, ok). Memory stays bounded either way."""
    prompt = summarizer_prompt(ctx, round_, parent, plan_text, children, diffs)
    out = gw.call("summarizer", SYSTEM, prompt, tag)
    prompt = out.sent
    data = _json_object(out.text) if out.text else None
    lessons = {c.id: default_lesson(c) for c in children}
    memory = list(ctx.memory)
    ok = False
    if data is not None:
        got = data.get("children") if isinstance(data.get("children"), dict) else {}
        for cid, text in got.items():
            if cid in lessons and isinstance(text, str) and text.strip():
                lessons[cid] = text.strip()[: ctx.lesson_chars]
        mem = data.get("memory")
        if isinstance(mem, list):
            memory = [str(m).strip()[: ctx.lesson_chars] for m in mem if str(m).strip()]
            ok = True
    return lessons, memory[: ctx.memory_items], prompt, out.text, ok
