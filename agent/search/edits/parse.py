"""Parsing: an executor's answer -> the full new text of each changed scope file, or named failures.

Weak models write edits in many shapes, so parsing is lenient about *where* things are
(path lines, fences, info strings, indentation) and strict about *what* is applied: a
SEARCH that matches nowhere or in several places, a path outside the scope, a block cut
off by truncation, all become an `EditFailure` that is sent back to the model once,
never a silent guess. Everything here is pure; nothing raises on any input text.

Accepted shapes (see EDIT_FORMAT_HELP for what the model is told):
- SEARCH/REPLACE blocks, bare or inside a fence, the path on the line before the block,
  the first line of the fence, the fence's info string, or the line before the fence;
- whole files in a fence named by its info string or the line before it; with a single
  scope file, the one substantial unnamed code block of an answer without markers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from agent.search.edits.types import (
    EditFailure,
    FailureKind,
    ParsedEdits,
    SearchReplace,
    WholeFile,
    _join,
    _normalize_newlines,
    _preview,
)

_SEARCH = re.compile(r"^([ \t]*)<{5,9}[ \t]*(?:SEARCH|ORIGINAL)[ \t]*$", re.IGNORECASE)
_DIVIDER = re.compile(r"^([ \t]*)={5,9}[ \t]*$")
_REPLACE = re.compile(r"^[ \t]*>{5,9}[ \t]*(?:REPLACE|UPDATED)[ \t]*$", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(.*?)[ \t]*$")

# Languages whose unnamed fenced block may stand for the single scope file.
_CODE_LANGS = {
    "", "python", "py", "python3", "triton", "cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "h", "hpp", "hip",
}
_DIFF_LANGS = {"diff", "patch", "udiff"}
_INFO_PATH_KEYS = {"path", "file", "filename", "filepath", "title", "name"}
# Extensions that make a bare token a claimed file path even when it matches no scope file.
_EXTS = {
    "py", "pyi", "cu", "cuh", "cpp", "cc", "cxx", "c", "h", "hpp", "hh", "hip", "triton", "ptx", "txt", "json",
    "yaml", "yml", "toml", "cfg", "ini", "sh", "cmake", "md", "mk",
}
_PATH_TOKEN = re.compile(r"^[\w.\-/\\~+@]+$")
_LIST_MARKER = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_COMMENT = re.compile(r"^(?:#+|//+|/\*+|--)\s*")
_LABEL = re.compile(r"^(?:file\s*name|file\s*path|file|path)\s*[:=]\s*", re.IGNORECASE)
_LANG_WORD = re.compile(r"^[A-Za-z][\w+#-]*$")

# --- paths -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hint:
    kind: Literal["scope", "outside", "ambiguous"]
    path: str  # the scope path, or the path as the model wrote it
    explicit: bool  # a bare path line or info string, not a mention inside a sentence


def _clean(token: str) -> str:
    """Strip the decoration models put around a path: bullets, headings, bold, backticks, labels."""
    s = _LIST_MARKER.sub("", token.strip())
    while True:
        before = s
        s = s.strip().strip("*`'\"()[]<>")
        s = _COMMENT.sub("", s)
        s = re.sub(r"\s*\*+/$", "", s)
        s = _LABEL.sub("", s)
        s = s.rstrip(":;,.").strip()
        if s == before:
            return s


def _pathish(token: str) -> bool:
    if not _PATH_TOKEN.match(token) or not any(c.isalnum() for c in token):
        return False
    return "/" in token or "\\" in token or token.rsplit(".", 1)[-1].lower() in _EXTS and "." in token


def _resolve(raw: str, scope: list[str]) -> _Hint | None:
    """Map a path as written to a scope path: exact, ./ a/ b/ prefixes, absolute, or a unique tail."""
    p = raw.replace("\\", "/").strip()
    if not p:
        return None
    if p in scope:
        return _Hint("scope", p, True)
    q = p
    while q.startswith("./"):
        q = q[2:]
    if q in scope:
        return _Hint("scope", q, True)
    if q[:2] in ("a/", "b/") and q[2:] in scope:
        return _Hint("scope", q[2:], True)
    if q.startswith("/"):
        # /app/repo/toy/kernel.py: the longest scope path it ends with is the one meant.
        tails = [s for s in scope if q.endswith("/" + s.lstrip("/"))]
        if tails:
            return _Hint("scope", max(tails, key=len), True)
        return None
    heads = [s for s in scope if s.endswith("/" + q)]  # "kernel.py" for "toy/kernel.py"
    if len(heads) == 1:
        return _Hint("scope", heads[0], True)
    if len(heads) > 1:
        return _Hint("ambiguous", q, True)
    return None


def _line_hint(line: str, scope: list[str]) -> _Hint | None:
    """What a line says about the file of the block after it, if anything."""
    c = _clean(line)
    if not c:
        return None
    if not any(ch.isspace() for ch in c):
        hint = _resolve(c, scope)
        if hint is not None:
            return hint
        return _Hint("outside", c, True) if _pathish(c) else None
    # A sentence ("Here is the new `toy/kernel.py`:") counts only when it names one scope file;
    # a sentence naming other paths is prose, not an edit.
    found = {h.path for t in c.split() if (h := _resolve(_clean(t), scope)) and h.kind == "scope"}
    return _Hint("scope", found.pop(), False) if len(found) == 1 else None


def _hint_before(recent: list[str], scope: list[str]) -> _Hint | None:
    """The nearest non-blank line decides; a bare scope path a few lines up still counts."""
    if not recent:
        return None
    hint = _line_hint(recent[-1], scope)
    if hint is not None:
        return hint
    for line in reversed(recent[-4:-1]):
        h = _line_hint(line, scope)
        if h is not None and h.kind == "scope" and h.explicit:
            return h
    return None


def _parse_info(info: str, scope: list[str]) -> tuple[str, _Hint | None]:
    """```python path=toy/kernel.py / ```python toy/kernel.py / ```python:toy/kernel.py -> (lang, hint)."""
    lang, raw = "", None
    for n, tok in enumerate(info.split()):
        if "=" in tok:
            key, _, val = tok.partition("=")
            if key.lower() in _INFO_PATH_KEYS and raw is None:
                raw = val.strip("\"'")
            continue
        if n == 0 and ":" in tok:
            left, _, right = tok.partition(":")
            if _LANG_WORD.match(left) and right:
                lang, raw = left.lower(), right
                continue
        if n == 0 and _LANG_WORD.match(tok):
            lang = tok.lower()
            continue
        if raw is None and _pathish(_clean(tok)):
            raw = _clean(tok)
    hint = _resolve(raw, scope) if raw else None
    if hint is not None:
        return lang, hint
    # title="Fast kernel" is a caption, not a path; only a path-shaped value claims a file.
    return lang, _Hint("outside", raw, True) if raw and _pathish(raw) else None


# --- parsing ---------------------------------------------------------------------------


@dataclass
class _Parser:
    scope: list[str]
    edits: list[SearchReplace | WholeFile] = field(default_factory=list)
    failures: list[EditFailure] = field(default_factory=list)
    sticky: str | None = None  # the path of the previous block, for blocks that name none
    unnamed: list[tuple[list[str], bool]] = field(default_factory=list)  # (body, closed)
    saw_markers: bool = False
    fences: int = 0
    diff_fences: int = 0

    def fail(self, path: str | None, kind: FailureKind, detail: str) -> None:
        self.failures.append(EditFailure(path=path, kind=kind, detail=detail))

    def blocks(self, lines: list[str], fence_hint: _Hint | None, in_fence: bool) -> int:
        """Read SEARCH/REPLACE blocks from `lines`; returns the index where reading stopped.

        Outside a fence this stops at the first fence opener that is not inside a block, so
        the caller can read that fence; inside a fence it reads to the end.
        """
        recent: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if _SEARCH.match(line):
                self.saw_markers = True
                i = self.block(lines, i, _hint_before(recent, self.scope), fence_hint)
                recent = []
            elif _REPLACE.match(line):
                self.saw_markers = True
                self.fail(None, "malformed_block",
                          f"line {line.strip()!r} ends a block that has no <<<<<<< SEARCH line")
                recent, i = [], i + 1
            elif not in_fence and _FENCE_OPEN.match(line) and not _is_inline_fence(line):
                return i
            else:
                if line.strip():
                    recent.append(line)
                i += 1
        return i

    def block(self, lines: list[str], start: int, hint: _Hint | None, fence_hint: _Hint | None) -> int:
        indent = _SEARCH.match(lines[start]).group(1)  # type: ignore[union-attr]
        search: list[str] = []
        i = start + 1
        while i < len(lines):
            d = _DIVIDER.match(lines[i])
            if d and d.group(1) == indent:
                break
            if _SEARCH.match(lines[i]):
                return self.malformed(hint, fence_hint, search, "a new <<<<<<< SEARCH begins before its =======", i)
            if _REPLACE.match(lines[i]):
                return self.malformed(hint, fence_hint, search, "it has no ======= line", i + 1)
            search.append(lines[i])
            i += 1
        else:
            return self.malformed(hint, fence_hint, search, "the answer ends before its ======= (truncated?)", i)
        replace: list[str] = []
        i += 1
        while i < len(lines):
            if _REPLACE.match(lines[i]):
                break
            if _SEARCH.match(lines[i]):
                why = "a new <<<<<<< SEARCH begins before its >>>>>>> REPLACE"
                return self.malformed(hint, fence_hint, search, why, i)
            replace.append(lines[i])
            i += 1
        else:
            why = "the answer ends before its >>>>>>> REPLACE (truncated?)"
            return self.malformed(hint, fence_hint, search, why, i)
        path = self.block_path(hint or fence_hint, search)
        if path is not None:
            text = _join(search) if any(s.strip() for s in search) else ""
            self.edits.append(SearchReplace(path=path, search=text, replace=_join(replace)))
        return i + 1

    def malformed(self, hint: _Hint | None, fence_hint: _Hint | None, search: list[str], why: str, resume: int) -> int:
        h = hint or fence_hint
        path = h.path if h is not None else self.sticky
        self.fail(path, "malformed_block", f"SEARCH block starting {_preview(_join(search))} is incomplete: {why}")
        return resume

    def block_path(self, hint: _Hint | None, search: list[str]) -> str | None:
        if hint is None:
            if self.sticky is not None:
                return self.sticky
            if len(self.scope) == 1:
                return self.scope[0]
            self.fail(None, "unknown_path", f"SEARCH block starting {_preview(_join(search))} names no file; "
                      f"put one of {', '.join(self.scope)} on the line before it")
            return None
        if hint.kind == "outside":
            self.fail(hint.path, "out_of_scope", f"{hint.path} is not a scope file (scope: {', '.join(self.scope)}); "
                      f"SEARCH block starting {_preview(_join(search))} not applied")
            return None
        if hint.kind == "ambiguous":
            self.fail(hint.path, "unknown_path", f"{hint.path} matches several scope files; write the full path")
            return None
        self.sticky = hint.path
        return hint.path

    def fence(self, info: str, before: _Hint | None, body: list[str], closed: bool) -> None:
        self.fences += 1
        lang, info_hint = _parse_info(info, self.scope)
        if any(_SEARCH.match(ln) or _REPLACE.match(ln) for ln in body):
            self.blocks(body, info_hint or before, in_fence=True)
            if not closed:
                self.fail(self.sticky, "malformed_block", "the answer ends inside a code block (truncated?)")
            return
        if lang in _DIFF_LANGS:
            self.diff_fences += 1
            return
        code = lang in _CODE_LANGS
        substantial = sum(1 for ln in body if ln.strip()) >= 3
        hint, content = info_hint, body
        if hint is None and before is not None and (before.explicit or (code and substantial)):
            hint = before
        if hint is None and body:
            first = _line_hint(body[0], self.scope)
            is_comment = bool(_COMMENT.match(body[0].strip()))
            if first is not None and first.explicit and not is_comment:
                hint, content = first, body[1:]  # a bare path line is not code: drop it
            elif first is not None and first.kind == "scope" and is_comment and code:
                hint = first  # "# toy/kernel.py" is valid code: keep it
        if hint is None:
            if code and substantial:
                self.unnamed.append((body, closed))
            return
        self.whole(hint, content, closed)

    def whole(self, hint: _Hint, content: list[str], closed: bool) -> None:
        if hint.kind == "outside":
            self.fail(hint.path, "out_of_scope", f"{hint.path} is not a scope file (scope: {', '.join(self.scope)}); "
                      "its code block was not applied")
        elif hint.kind == "ambiguous":
            self.fail(hint.path, "unknown_path", f"{hint.path} matches several scope files; write the full path")
        elif not closed:
            self.fail(hint.path, "malformed_block", f"the code block for {hint.path} is not closed (truncated?); "
                      "send the whole file again")
        else:
            self.edits.append(WholeFile(path=hint.path, content=_join(content)))


def _is_inline_fence(line: str) -> bool:
    """```python x = 1``` on one line, or a backtick fence whose info has backticks: not a fence."""
    m = _FENCE_OPEN.match(line)
    return m is not None and m.group(1)[0] == "`" and "`" in m.group(2)


def _fence_end(lines: list[str], start: int, marker: str) -> int:
    close = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
    for j in range(start + 1, len(lines)):
        if close.match(lines[j]):
            return j
    return len(lines)


def parse_edits(text: str, scope: list[str]) -> ParsedEdits:
    """Find every edit in an executor's answer; anything unusable becomes a named failure."""
    p = _Parser(scope=list(scope))
    lines = _normalize_newlines(text).split("\n")
    i = 0
    while i < len(lines):
        # Prose and bare blocks up to the next fence, then the fence itself.
        stop = p.blocks(lines[i:], None, in_fence=False) + i
        if stop >= len(lines):
            break
        m = _FENCE_OPEN.match(lines[stop])
        assert m is not None
        end = _fence_end(lines, stop, m.group(1))
        before = _hint_before(_prose_tail(lines, i, stop), p.scope)
        p.fence(m.group(2), before, lines[stop + 1:end], closed=end < len(lines))
        i = end + 1

    if not p.edits and not p.failures and not p.saw_markers and len(p.scope) == 1 and len(p.unnamed) == 1:
        body, closed = p.unnamed[0]
        p.whole(_Hint("scope", p.scope[0], True), body, closed)
    if not p.edits and not p.failures:
        p.fail(None, "no_code", _no_code_detail(p))
    return ParsedEdits(edits=p.edits, failures=p.failures)


def _prose_tail(lines: list[str], start: int, stop: int) -> list[str]:
    """Non-blank lines before a fence, back to the previous block or fence (they do not name it)."""
    tail: list[str] = []
    for j in range(stop - 1, start - 1, -1):
        ln = lines[j]
        if _REPLACE.match(ln) or _SEARCH.match(ln) or _DIVIDER.match(ln):
            break
        if ln.strip():
            tail.append(ln)
        if len(tail) >= 4:
            break
    return tail[::-1]


def _no_code_detail(p: _Parser) -> str:
    if p.diff_fences:
        return "found a diff, which is not accepted; write SEARCH/REPLACE blocks or whole files"
    if p.unnamed:
        return (f"found {len(p.unnamed)} code blocks but none names its file; put the path "
                f"({', '.join(p.scope)}) alone on the line before each block")
    if p.fences:
        return "no code block holds an edit; write SEARCH/REPLACE blocks or a whole file in a fenced block"
    return "the answer contains no SEARCH/REPLACE block and no code block"


