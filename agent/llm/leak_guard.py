"""What keeps hidden-grader material out of the prompts: a guard that looks for leaks.

A leak is material of the package's hidden tests/ (a line of it, or the anchor's digits) that
reached a prompt through pesflow: grader output, logs, files pesflow read. A line that also
stands in the public package (instruction.md, the repository) or that the model wrote itself
in an earlier answer is not one: a model that writes `FLAG_DEFAULTS = {...}` as the reference
does has leaked nothing, and the prompt showing its candidate is sent as it is.

A prompt line that carries a leak is withheld, the call still happens without it, and the
journal records what was withheld (the file and a hash of the line, never the line) and why.

A figure computed from the anchor (the benchmark's reward of a speedup, the speedup over the
anchor, the reward's cap) gives the anchor away as surely as its digits: AnchorFigures finds
them, as the code prints figures, for the audit (agent/readers/audit.py).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from evaluator.scoring import benchmark_reward
from evaluator.task import Task

MIN_LINE = 24  # shorter lines (`return x`, `}`) are too common to be anyone's secret
WITHHELD = "[pesflow: a line was withheld here: it carried hidden-grader material]"


def lines_of(text: str) -> set[str]:
    return {ln.strip() for ln in text.splitlines() if len(ln.strip()) >= MIN_LINE}


@dataclass
class Screened:
    text: str  # the prompt as it may be sent
    withheld: list[dict[str, str]] = field(default_factory=list)  # {what, source, line_sha256}


class LeakGuard:
    def __init__(self, task: Task):
        public = lines_of(task.instruction())
        repo = task.root / "environment" / "repo"
        for p in repo.rglob("*") if repo.is_dir() else []:
            if p.is_file() and p.stat().st_size < 1 << 20:
                public |= lines_of(p.read_text(errors="replace"))
        self.secret: dict[str, str] = {}  # line -> the tests/ file it stands in
        for p in sorted(task.tests_dir.rglob("*")) if task.tests_dir.is_dir() else []:
            if p.is_file() and p.stat().st_size < 4 << 20:
                for line in lines_of(p.read_text(errors="replace")) - public:
                    self.secret.setdefault(line, str(p.relative_to(task.root)))
        self._longest_first = sorted(self.secret, key=len, reverse=True)
        self.anchor: re.Pattern[str] | None = None
        txt = task.tests_dir / "ref_speedup.txt"
        if txt.is_file():
            digits = "".join(c for c in txt.read_text() if c.isdigit() or c == ".").strip(".")
            if len(digits.replace(".", "")) >= 3:
                self.anchor = re.compile(rf"(?<![\d.]){re.escape(digits)}(?!\d)")
        self._authored: list[str] = []  # the model's own answers

    def learn(self, answer: str | None) -> None:
        """An answer of the model: what it holds is the model's own text from now on."""
        if answer:
            self._authored.append(answer)

    def _own(self, text: str) -> bool:
        return any(text in a for a in self._authored)

    def authored(self, line: str) -> bool:
        """Whether a prompt's line is the model's own text (a diff's +/- line of its code too)."""
        s = line.strip()
        return bool(s) and (self._own(s) or (s[:1] in "+-" and self._own(s[1:].strip())))

    def _leak(self, line: str) -> tuple[str, str] | None:
        s = line.strip()
        if not s:
            return None
        for secret in self._longest_first:
            if secret in s and not self._own(secret):
                return "a line of the hidden tests/", self.secret[secret]
        if self.anchor is not None and self.anchor.search(s):
            bare = s[1:].strip() if s[:1] in "+-" else s  # a diff's line of the model's own code
            if not (self._own(s) or self._own(bare)):
                return "the task's anchor", "tests/ref_speedup.txt"
        return None

    def screen(self, text: str) -> Screened:
        """`text` with every line that carries a leak replaced by a marker, and what was withheld."""
        out, withheld = [], []
        for line in text.split("\n"):
            found = self._leak(line)
            if found is None:
                out.append(line)
                continue
            what, source = found
            withheld.append({"what": what, "source": source,
                             "line_sha256": hashlib.sha256(line.strip().encode()).hexdigest()})
            out.append(WITHHELD)
        return Screened("\n".join(out), withheld)

    def leaks(self, text: str) -> list[str]:
        """What of `text` would have to be withheld (for the audit): 'what (source)' each."""
        return [f"{w['what']} ({w['source']})" for w in self.screen(text).withheld]


# ---------------------------------------------------------------- figures computed from the anchor
MIN_DIGITS = 3  # "0.5", "1.6", "4": too common in any text to be anyone's secret
NEARBY = (1 / 1.05, 1.05)  # another anchor close by: a figure that does not move with it says nothing of it


def renderings(x: float) -> set[str]:
    """`x` as pesflow's code and the packages' sanitizers print a figure (%.4g, .3f, repr, round to
    4 places, ...), each with at least MIN_DIGITS significant digits and a fraction."""
    forms = {f"{x:.3g}", f"{x:.4g}", f"{x:.5g}", f"{x:.6g}", f"{x:.2f}", f"{x:.3f}", f"{x:.4f}", repr(x),
             str(round(x, 4)), str(round(x, 6))}
    # a figure printed as a whole number (244) is also a count, a line number, a size: only forms
    # with a fraction are evidence
    return {r for r in forms if "." in r and len(r.split("e")[0].lstrip("-").replace(".", "").strip("0")) >= MIN_DIGITS}


def anchored(speedup: float, anchor: float) -> dict[str, float]:
    """The figures of a speedup that depend on the anchor, by what they are."""
    return {"the benchmark reward": benchmark_reward(speedup, anchor, True, False),
            "the speedup over the anchor": speedup / anchor}


@dataclass
class AnchorFigures:
    """Every figure of a run's verdicts that depends on the anchor (it differs with an anchor close
    by: a reward of 0 under the anchor or 1 past its cap does not), as it would be printed, less
    what the run holds independently of it (`own`: speedups, the dev engine's own figures)."""

    anchors: list[float]
    flagged: dict[str, str] = field(default_factory=dict)  # rendering -> what it is
    free: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.anchors = [a for a in dict.fromkeys(self.anchors) if a and a > 1]
        for a in self.anchors:
            self._flag(a * a, f"the reward's cap (anchor {a:g} squared)")
        self._pattern: re.Pattern[str] | None = None

    def _flag(self, value: float, what: str) -> None:
        for r in renderings(value):
            self.flagged.setdefault(r, what)
        self._pattern = None

    def add(self, speedup: float | None, reward: float | None = None) -> None:
        """A verdict's speedup (and the reward its grader recorded, the benchmark's formula)."""
        if speedup is None or speedup <= 0:
            return
        for a in self.anchors:
            for what, value in anchored(speedup, a).items():
                if any(anchored(speedup, a * k)[what] != value for k in NEARBY):
                    self._flag(value, f"{what} of speedup {speedup:.4g} with the anchor {a:g}")
        if reward is not None and 0 < reward < 1:
            self._flag(reward, f"the recorded benchmark reward of speedup {speedup:.4g}")

    def own(self, value: float | None) -> None:
        """A figure the run holds that the anchor does not decide."""
        if value is not None:
            self.free |= renderings(float(value))
            self._pattern = None

    def find(self, text: str) -> list[str]:
        """Each anchored figure `text` holds: 'rendering (what it is)'."""
        if self._pattern is None:
            keys = sorted(set(self.flagged) - self.free, key=len, reverse=True)
            self._pattern = (re.compile(rf"(?<![\d.])(?:{'|'.join(map(re.escape, keys))})(?!\d)") if keys
                             else re.compile(r"(?!x)x"))
        return [f"{m} ({self.flagged[m]})" for m in dict.fromkeys(self._pattern.findall(text))]
