"""What keeps hidden-grader material out of the prompts: a guard that looks for leaks.

A leak is material of the package's hidden tests/ (a line of it, or the anchor's digits) that
reached a prompt through pesflow: grader output, logs, files pesflow read. A line that also
stands in the public package (instruction.md, the repository) or that the model wrote itself
in an earlier answer is not one: a model that writes `FLAG_DEFAULTS = {...}` as the reference
does has leaked nothing, and the prompt showing its candidate is sent as it is.

A prompt line that carries a leak is withheld, the call still happens without it, and the
journal records what was withheld (the file and a hash of the line, never the line) and why.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

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
            withheld.append({"what": what, "source": source, "line_sha256": hashlib.sha256(line.strip().encode()).hexdigest()})
            out.append(WITHHELD)
        return Screened("\n".join(out), withheld)

    def leaks(self, text: str) -> list[str]:
        """What of `text` would have to be withheld (for the audit): 'what (source)' each."""
        return [f"{w['what']} ({w['source']})" for w in self.screen(text).withheld]
