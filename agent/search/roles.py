"""The three LLM roles of a round: planner, executor (with one repair), summarizer.

Each is a pure prompt builder plus one gateway call and a tolerant reader of the answer; a
failed or useless answer becomes a recorded failure, never an exception.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from agent.llm.gateway import Gateway
from agent.population.database import Solution
from agent.search.edits import EDIT_FORMAT_HELP, extract_and_apply, format_failures
from agent.search.prompts import Prompt, code_block, render, untrusted_note, variant, verdict_text
from agent.search.protocol import DEFAULT, LINE, Protocol
from evaluator.candidate import Candidate

SYSTEM = "You are part of pesflow, an evolutionary search for faster, exactly correct kernels and systems code."
WHOLE_FILE_HELP = (
    "Answer with the complete new text of every file you change, each in its own fenced code block "
    "whose info string names the file, e.g.\n```python path/to/file.py\n<the whole file>\n```"
)
# characters the planner's recent failures get however small the task's text: one failure's feedback fits
MIN_FAILURES = 1800
MIN_HISTORY = 900  # characters the table of attempts gets however small the task's text: a dozen rows
MIN_INSPIRATIONS = 1200  # characters the executor's inspirations get however small the task's text
EDIT_FORMAT_SHORT = "SEARCH/REPLACE blocks or whole files in fenced blocks"
FALLBACK_PLAN = ("Make the parent faster while keeping every result exact: remove the "
                 "dominant cost you can see in its code.")


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
    context_share: float = 0.25
    whole_files_only: bool = False
    protocol: Protocol = DEFAULT  # search.feedback: what verdicts and sections show (agent/search/protocol.py)
    # the grading machine and its ceilings (evaluator/ceilings.py), as a prompt section, where the protocol shows it
    machine: str = ""


def fit(items: list[str], budget: int, joiner: str = "\n") -> str:
    """Whole items in order while they fit in `budget` characters; the first that does not is cut
    when enough room is left to say something, and the rest are dropped."""
    out: list[str] = []
    used = 0
    for item in items:
        sep = len(joiner) if out else 0
        room = budget - used - sep
        if len(item) <= room:
            out.append(item)
            used += sep + len(item)
            continue
        if room >= 200:
            out.append(item[: room - 10] + "\n... (cut)")
        break
    return joiner.join(out)


def profile_section(ctx: Context, parent: Solution, best: Solution | None = None) -> str:
    """Where the parent's time goes and what limits it, and the best's where it is another
    program, where the protocol shows profiles (evaluator/profile.py's lines, made when each was graded)."""
    if not ctx.protocol.profiles:
        return ""
    parts = [f"{s.id}{' (the best so far)' if s is best else ''}:\n"
             + "\n".join("    " + ln for ln in s.profile["lines"])
             for s in (parent, best) if s is not None and s.profile.get("lines")]
    return ("\n# Where the time goes (a profile of the program on a dev input)\n" + "\n".join(parts) + "\n" if parts
            else "")


def _inspiration(ctx: Context, s: Solution, parent: Solution) -> str:
    """An inspiration as what it changed against the parent: smaller than its code, and the part
    worth reading."""
    diff = Candidate(files=s.files).diff(parent.files)
    body = f"```diff\n{diff[: ctx.inspiration_chars]}\n```" if diff.strip() else "(the same code as the parent)"
    return f"## {s.id}: {verdict_text(s, ctx.protocol)}\n{(s.lessons or '')[: ctx.lesson_chars]}\n{body}"


# ---------------------------------------------------------------- planner
def shared_parts(ctx: Context, parent: Solution) -> list[str]:
    """What every role's prompt of a round opens with, byte for byte: the task, what may change
    and how edits are written, then the parent's code. A provider's prompt cache reads it again
    at a fraction of the price (OpenAI by itself, Anthropic where the gateway marks the parts'
    ends); what changes from call to call comes after it."""
    head = render("head", instruction=ctx.instruction, machine=ctx.machine, scope=", ".join(ctx.scope),
                  edit_format=WHOLE_FILE_HELP if ctx.whole_files_only else EDIT_FORMAT_HELP)
    return [head.rstrip("\n") + "\n", render("parent", parent_id=parent.id, parent_code=code_block(parent.files))]


def planner_prompt(ctx: Context, parent: Solution, inspirations: list[Solution], failures: list[Solution],
                   memory: list[str], best: Solution | None = None, history: str = "", in_flight: str = "") -> Prompt:
    """The planner's prompt, in parts (shared_parts first). What the search has gathered (the
    table of attempts, memory, recent failures, inspirations) shares one budget, `context_share`
    of the rest of the prompt, so that the prompt of round 16 is about the size of round 1's
    instead of growing with the population; the plans in flight are few and always shown."""
    shared = shared_parts(ctx, parent)
    fixed = dict(parent_id=parent.id, parent_verdict=verdict_text(parent, ctx.protocol),
                 parent_lessons=(parent.lessons or "(none)")[: ctx.lesson_chars],
                 profile=profile_section(ctx, parent, best), in_flight=in_flight or "(none)")
    # the profile is paid for from the gathered context's budget, not added to it
    empty = render("planner", **{**fixed, "profile": ""}, inspirations="", memory="", failures="", history="")
    budget = int(ctx.context_share * (len(empty) + sum(map(len, shared)))) - len(fixed["profile"])
    hist = fit(history.splitlines(), max(int(0.25 * budget), MIN_HISTORY))
    mem = fit([f"- {m}" for m in memory], int(0.25 * budget))
    fails = fit([f"- {s.id}: {verdict_text(s, ctx.protocol)}. {(s.lessons or '')[:200]}" for s in failures],
                max(int(0.2 * budget), MIN_FAILURES))  # a failure's feedback is what fixes the next child
    rest = budget - len(hist) - len(mem) - len(fails)
    insp = fit([_inspiration(ctx, s, parent) for s in inspirations], max(rest, budget // 2), "\n\n")
    return Prompt(shared + [render("planner", **fixed, inspirations=insp or "(none yet)", memory=mem or "(nothing yet)",
                                   failures=fails or "(none)", history=hist or "(none yet)")])


def plan(gw: Gateway, ctx: Context, parent: Solution, inspirations: list[Solution], failures: list[Solution],
         memory: list[str], tag: str, best: Solution | None = None, history: str = "",
         in_flight: str = "") -> tuple[str, str, bool]:
    """(plan, prompt, ok)"""
    prompt = planner_prompt(ctx, parent, inspirations, failures, memory, best, history, in_flight)
    out = gw.call("planner", SYSTEM, prompt, tag)
    if not out.text or not out.text.strip():
        return FALLBACK_PLAN, out.sent, False
    return out.text.strip()[: ctx.plan_chars], out.sent, True


# ---------------------------------------------------------------- executor
@dataclass
class Child:
    """A child in flight: what an executor's answer made of the parent (before it is graded)."""

    files: dict[str, str] | None  # full scope files of the child; None: nothing usable
    status: str  # "ok" | "no_code" | "llm_error"
    detail: str = ""
    transcript: list[tuple[str, str]] = field(default_factory=list)  # (prompt, response) pairs, repair included
    repaired: bool = False
    prompt: Prompt | None = None  # the first prompt, in its parts (a fix turn opens with it)


def parent_grading(ctx: Context, parent: Solution, best: Solution | None = None) -> str:
    """What the executor is shown of its parent's grading (its figures per workload among them,
    where the protocol shows the dev engine's details), and the best's per-workload figures where the
    best is another program."""
    said = verdict_text(parent, ctx.protocol)
    loads = [ln for ln in (best.dev_details if best is not None and best is not parent else [])
             if ln.startswith("workload ")]
    if ctx.protocol.dev_details and loads:
        said += f"\nthe best so far ({best.id}), per workload:\n" + "\n".join("    " + ln for ln in loads)
    return said


def executor_prompt(ctx: Context, parent: Solution, plan_text: str, child_index: int, children: int,
                    inspirations: list[Solution] = (),  # type: ignore[assignment]
                    best: Solution | None = None) -> Prompt:
    """The executor's prompt, in parts: shared_parts, then the round's plan (the same for every
    executor of the round), then this executor's variant, the parent's grading (and the best's
    figures per workload), and the inspirations as diffs against the parent within
    `context_share` of the rest (at least MIN_INSPIRATIONS characters)."""
    shared = shared_parts(ctx, parent) + [render("executor_plan", plan=plan_text.rstrip("\n"))]
    fixed = dict(child_index=child_index + 1, children=children, variant=variant(child_index),
                 profile=profile_section(ctx, parent), parent_id=parent.id,
                 parent_verdict=parent_grading(ctx, parent, best))
    budget = max(int(ctx.context_share * (len(render("executor", **fixed, inspirations="")) + sum(map(len, shared)))),
                 MIN_INSPIRATIONS)
    insp = fit([_inspiration(ctx, s, parent) for s in inspirations], budget, "\n\n")
    return Prompt(shared + [render("executor", **fixed, inspirations=insp or "(none)")])


def propose(gw: Gateway, ctx: Context, parent: Solution, plan_text: str, child_index: int, children: int,
            tag: str, repair_attempts: int = 1, inspirations: list[Solution] = (),  # type: ignore[assignment]
            best: Solution | None = None) -> Child:
    prompt = executor_prompt(ctx, parent, plan_text, child_index, children, inspirations, best)
    return _answered(gw, "executor", prompt, parent.files, tag, repair_attempts)


GRADED = "Your code was graded"
GRADED_AS_ANOTHER = "Your code is, but for its spelling, the same program as another child's, graded once for both"


def fix(gw: Gateway, ctx: Context, first_prompt: Prompt, child: Child, said: str, why: str, tag: str,
        parent_files: dict[str, str], graded: str = GRADED) -> Child:
    """One fix turn (agent/search/fixes.py): the executor's first prompt, its last answer, the code
    that answer made as a diff against the parent (whose code the prompt holds) and what the
    grading said of it (`said`, under the run's protocol); edits apply to that code."""
    assert child.files is not None
    diff = Candidate(files=child.files).diff(parent_files)
    turn = render("fix", graded=graded, why=why, verdict=said,
                  child_diff=f"```diff\n{diff.rstrip()}\n```" if diff.strip()
                      else "(no change: the same code as the parent)", edit_format_short=EDIT_FORMAT_SHORT)
    prompt = first_prompt.then("\n\n# Your previous answer\n" + child.transcript[-1][1] + "\n\n" + turn)
    return _answered(gw, "executor", prompt, child.files, tag, repair_attempts=0)


def resample(gw: Gateway, child: Child, parent_files: dict[str, str], duplicate_of: str, outcome: str,
             tag: str) -> Child:
    """A child that is a program the search already has goes back once more instead of taking its
    slot: the same first prompt, its answer, and which program it repeats; the new answer's edits
    apply to the parent. Its transcript continues the first one's."""
    assert child.prompt is not None
    turn = render("duplicate", duplicate_of=duplicate_of, outcome=outcome, edit_format_short=EDIT_FORMAT_SHORT)
    again = _answered(gw, "executor",
                      child.prompt.then("\n\n# Your previous answer\n" + child.transcript[-1][1] + "\n\n" + turn),
                      parent_files, tag, repair_attempts=0)
    again.transcript = child.transcript + again.transcript
    again.prompt = child.prompt
    return again


def _answered(gw: Gateway, role: str, prompt: Prompt, base: dict[str, str], tag: str, repair_attempts: int) -> Child:
    """The child an answer to `prompt` makes of the files `base`; an answer whose edits do not
    apply goes back to the model up to `repair_attempts` times."""
    out = gw.call(role, SYSTEM, prompt, tag)
    transcript = [(out.sent, out.text or f"(no answer: {out.error})")]
    if out.text is None:
        return Child(None, "llm_error", out.error or "", transcript, prompt=prompt)
    for attempt in range(repair_attempts + 1):
        result = extract_and_apply(out.text, base)
        if result.ok:
            return Child({**base, **result.files}, "ok", "", transcript, repaired=attempt > 0, prompt=prompt)
        problem = format_failures(result.failures) if result.failures else "Your edits changed nothing in the code."
        if attempt == repair_attempts:
            return Child(None, "no_code", problem[:600], transcript, repaired=attempt > 0, prompt=prompt)
        repair = render("repair", failures=problem, parent_code=code_block(base), edit_format_short=EDIT_FORMAT_SHORT)
        out = gw.call("repair", SYSTEM, prompt.then("\n\n# Your previous answer\n" + out.text + "\n\n" + repair),
                      f"{tag}/repair{attempt + 1}")
        transcript.append((out.sent, out.text or f"(no answer: {out.error})"))
        if out.text is None:
            return Child(None, "llm_error", out.error or "", transcript, repaired=True, prompt=prompt)
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- summarizer
def summarizer_prompt(ctx: Context, round_: int, parent: Solution, plan_text: str, children: list[Solution],
                      diffs: dict[str, str]) -> Prompt:
    """The summarizer's prompt, in parts: shared_parts (the diffs are against that parent), then the round."""
    parts = []
    for c in children:
        diff = diffs.get(c.id, "")
        if len(diff) > 3000:
            diff = diff[:3000] + "\n... (cut)"
        parts.append(f"## {c.id}: {verdict_text(c, ctx.protocol)}\n```diff\n{diff or '(no change)'}\n```")
    return Prompt(shared_parts(ctx, parent)
                  + [render("summarizer", round=round_, parent_id=parent.id,
                            parent_verdict=verdict_text(parent, ctx.protocol),
                  plan=plan_text[:1500], children="\n\n".join(parts) or "(no children)",
                  memory="\n".join(f"- {m}" for m in ctx.memory) or "(nothing yet)",
                  memory_items=ctx.memory_items, lesson_chars=ctx.lesson_chars)])


def _json_object(text: str) -> dict | None:
    for candidate in [text, *re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S),
                      *re.findall(r"(\{.*\})", text, re.S)]:
        try:
            v = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(v, dict):
            return v
    return None


def untrusted(c: Solution) -> bool:
    """A graded child whose figures do not count (evaluator.trust's one rule, through Solution)."""
    return c.status != "no_code" and not c.is_result


def default_lesson(c: Solution) -> str:
    if c.status == "no_code":  # its detail is its lesson already (verdict_text names it no usable code)
        return ""
    return untrusted_note(c) if untrusted(c) else f"{verdict_text(c, LINE)}."


def summarize(gw: Gateway, ctx: Context, round_: int, parent: Solution, plan_text: str, children: list[Solution],
              diffs: dict[str, str], tag: str) -> tuple[dict[str, str], list[str], str, str | None, bool]:
    """(lessons by child id, new memory, prompt, response, ok). Memory stays bounded either way."""
    prompt = summarizer_prompt(ctx, round_, parent, plan_text, children, diffs)
    out = gw.call("summarizer", SYSTEM, prompt, tag)
    prompt = out.sent
    data = _json_object(out.text) if out.text else None
    lessons = {c.id: default_lesson(c) for c in children}
    by_id = {c.id: c for c in children}
    memory = list(ctx.memory)
    ok = False
    if data is not None:
        got = data.get("children") if isinstance(data.get("children"), dict) else {}
        for cid, text in got.items():
            if cid in lessons and isinstance(text, str) and text.strip():
                lessons[cid] = text.strip()[: ctx.lesson_chars]
                if untrusted(by_id[cid]):  # the model's own words may not name the exploit: ours always do
                    lessons[cid] = f"{untrusted_note(by_id[cid])} {lessons[cid]}"
        mem = data.get("memory")
        if isinstance(mem, list):
            memory = [str(m).strip()[: ctx.lesson_chars] for m in mem if str(m).strip()]
            ok = True
    return lessons, memory[: ctx.memory_items], prompt, out.text, ok
