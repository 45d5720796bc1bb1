"""The feedback protocol: what the model is shown of each grading, chosen once per run.

`search.feedback` names the run's protocol (benchmark or engineer; README, "What the model sees"),
and run.json keeps that name, so a resumed or replayed run chooses the same one again. The
places that build prompts (prompts.verdict_text, roles, proposal, session) ask the protocol's
switches what to show instead of comparing names. `line`, pesflow's one line alone, is the
protocol a child's default lesson quotes; no run chooses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent.config import SearchConfig

# where the package's own loop lines go: nowhere; in place of pesflow's line for a grading whose
# figures count (pesflow's line otherwise); after pesflow's line, always
LoopLines = Literal["never", "instead", "after"]


@dataclass(frozen=True)
class Protocol:
    """The switches one protocol means, one per thing a prompt may show beyond pesflow's line."""

    name: str
    loop_lines: LoopLines  # the package's own loop lines (evaluator/feedback.py loop_feedback)
    dev_details: bool  # the dev engine's failed checks and per-workload figures (the best's too)
    mismatch: bool  # how a wrong answer differs from the frozen baseline's (evaluator/mismatch.py)
    diagnostics: bool  # the candidate's own errors from the grader's output
    machine: bool  # the grading machine and its ceilings, as a prompt section (evaluator/ceilings.py)
    profiles: bool  # dev gradings profile their candidate; the parent's and the best's profiles shown


BENCHMARK = Protocol("benchmark", loop_lines="instead", dev_details=False, mismatch=False, diagnostics=False,
                     machine=False, profiles=False)
ENGINEER = Protocol("engineer", loop_lines="after", dev_details=True, mismatch=True, diagnostics=True,
                    machine=True, profiles=True)
LINE = Protocol("line", loop_lines="never", dev_details=False, mismatch=False, diagnostics=False,
                machine=False, profiles=False)
PROTOCOLS = {p.name: p for p in (BENCHMARK, ENGINEER, LINE)}


def named(name: str) -> Protocol:
    """The protocol `search.feedback` (or run.json's journaled config) names."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown feedback protocol {name!r} (one of {', '.join(PROTOCOLS)})") from None


# the config's default is the one default; a Context or Search built without a run's config gets it
DEFAULT = named(SearchConfig().feedback)
