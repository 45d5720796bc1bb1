"""The edits' data: what an executor's answer is parsed into, what applying it gives, the
format the model is told to write (EDIT_FORMAT_HELP), and the line helpers both halves use."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

FailureKind = Literal[
    "search_not_found", "ambiguous_search", "unknown_path", "out_of_scope", "no_code", "malformed_block", "empty_file"
]


class SearchReplace(BaseModel):
    path: str
    search: str
    replace: str


class WholeFile(BaseModel):
    path: str
    content: str


class EditFailure(BaseModel):
    path: str | None
    kind: FailureKind
    detail: str  # short; quotes the offending SEARCH's first lines so the model can repair it


class ParsedEdits(BaseModel):
    edits: list[SearchReplace | WholeFile]
    failures: list[EditFailure]


class EditResult(BaseModel):
    files: dict[str, str]  # full new text of every scope file that changed
    failures: list[EditFailure]
    applied: int

    @property
    def ok(self) -> bool:
        return self.applied > 0 and not self.failures


EDIT_FORMAT_HELP = """\
How to write your changes
- Change a file with SEARCH/REPLACE blocks. Put the file's path (as listed in the scope) alone
  on the line before the block. SEARCH must copy the current lines exactly, with enough
  surrounding lines to match exactly one place in the file; REPLACE holds the new lines.
  Several blocks per file and several files per answer are fine; blocks apply in order.

toy/kernel.py
<<<<<<< SEARCH
def total(xs):
    return sum(x * x for x in xs)
=======
def total(xs):
    return float(np.dot(xs, xs))
>>>>>>> REPLACE

- Or send a whole file: its path alone on the line before a fenced code block holding the
  complete new text (never an excerpt, never "..." for unchanged parts).

toy/kernel.py
```python
import numpy as np

def total(xs):
    return float(np.dot(xs, xs))
```

- Only files of the scope can be changed. Do not send diffs."""


_PREVIEW_LINES = 2
_PREVIEW_CHARS = 80


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _lines(text: str) -> list[str]:
    """Lines without their endings; a final newline does not make an extra empty line."""
    if not text:
        return []
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def _preview(text: str) -> str:
    shown = [ln.strip()[:_PREVIEW_CHARS] for ln in _lines(text) if ln.strip()][:_PREVIEW_LINES]
    total = len(_lines(text))
    quoted = " / ".join(repr(s) for s in shown) or "''"
    return f"{quoted} ({total} line{'s' if total != 1 else ''})"
