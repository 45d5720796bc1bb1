"""Applying parsed edits to the parent's scope files: strict about what is applied (a SEARCH
that matches nowhere or in several places is a named failure, never a guess), lenient about
indentation the model shifted."""

from __future__ import annotations

import difflib

from agent.search.edits.parse import parse_edits
from agent.search.edits.types import (
    _PREVIEW_CHARS,
    EditFailure,
    EditResult,
    ParsedEdits,
    SearchReplace,
    WholeFile,
    _join,
    _lines,
    _normalize_newlines,
    _preview,
)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _shift(file_lines: list[str], search: list[str]) -> tuple[str, str] | None:
    """The one uniform indentation change that maps `search` onto `file_lines`, or None.

    Returns (added, removed): a prefix the file has on every non-blank line beyond the
    SEARCH's, or one the SEARCH has beyond the file's.
    """
    shift: tuple[str, str] | None = None
    for f, s in zip(file_lines, search):
        if not s.strip():
            if f.strip():
                return None
            continue
        if f.strip() != s.strip():
            return None
        fi, si = _indent(f), _indent(s)
        if fi.endswith(si):
            this = (fi[: len(fi) - len(si)], "")
        elif si.endswith(fi):
            this = ("", si[: len(si) - len(fi)])
        else:
            return None
        if shift is None:
            shift = this
        elif shift != this:
            return None
    return shift


def _reindent(lines: list[str], shift: tuple[str, str]) -> list[str]:
    added, removed = shift
    out = []
    for ln in lines:
        if not ln.strip():
            out.append("")
        elif added:
            out.append(added + ln)
        else:
            cut = min(len(removed), len(_indent(ln)))
            out.append(ln[cut:])
    return out


def _find(file_lines: list[str], search: list[str]) -> tuple[list[int], tuple[str, str] | None, str]:
    """Where `search` matches: exact lines first, then ignoring trailing spaces, then re-indented."""
    n = len(search)
    starts = range(len(file_lines) - n + 1)
    passes = [
        ("exact", lambda i: file_lines[i:i + n] == search),
        ("rstrip", lambda i: [ln.rstrip() for ln in file_lines[i:i + n]] == [ln.rstrip() for ln in search]),
    ]
    for name, test in passes:
        hits = [i for i in starts if test(i)]
        if hits:
            return hits, None, name
    shifted = [(i, s) for i in starts if (s := _shift(file_lines[i:i + n], search)) is not None]
    if shifted:
        return [i for i, _ in shifted], shifted[0][1], "indent"
    return [], None, ""


def _trim_blank(search: list[str], replace: list[str]) -> tuple[list[str], list[str]]:
    """Drop blank lines the model padded SEARCH with, and as many blank lines of REPLACE."""
    lead = next((k for k, ln in enumerate(search) if ln.strip()), len(search))
    trail = next((k for k, ln in enumerate(reversed(search)) if ln.strip()), 0)
    s = search[lead:len(search) - trail]
    r = list(replace)
    while lead and r and not r[0].strip():
        r.pop(0)
        lead -= 1
    while trail and r and not r[-1].strip():
        r.pop()
        trail -= 1
    return s, r


def _closest(file_lines: list[str], search: list[str]) -> str:
    first = next((ln.strip() for ln in search if ln.strip()), "")
    stripped = [ln.strip() for ln in file_lines]
    best = difflib.get_close_matches(first, stripped, n=1, cutoff=0.6)
    if not best:
        return ""
    return f"; closest file line {stripped.index(best[0]) + 1}: {best[0][:_PREVIEW_CHARS]!r}"


def _apply_search_replace(text: str, edit: SearchReplace, nth: int) -> tuple[str | None, EditFailure | None]:
    file_lines = _lines(text)
    search, replace = _lines(_normalize_newlines(edit.search)), _lines(_normalize_newlines(edit.replace))
    label = f"SEARCH block {nth} for {edit.path}"
    if not any(ln.strip() for ln in search):
        if text.strip():
            return None, EditFailure(path=edit.path, kind="malformed_block", detail=(
                f"{label} has an empty SEARCH but the file is not empty; copy the lines to replace into SEARCH"))
        return _join(replace), None
    hits, shift, how = _find(file_lines, search)
    if not hits:
        trimmed, replace_t = _trim_blank(search, replace)
        if trimmed != search:
            hits, shift, how = _find(file_lines, trimmed)
            search, replace = trimmed, replace_t
    if not hits:
        return None, EditFailure(path=edit.path, kind="search_not_found", detail=(
            f"{label} starting {_preview(edit.search)} matches no lines of the file{_closest(file_lines, search)}; "
            "copy SEARCH lines exactly from the current file"))
    if len(hits) > 1:
        where = ", ".join(str(h + 1) for h in hits[:5])
        return None, EditFailure(path=edit.path, kind="ambiguous_search", detail=(
            f"{label} starting {_preview(edit.search)} matches {len(hits)} places (lines {where}); "
            "add surrounding lines so it matches exactly one"))
    start = hits[0]
    new = replace if shift is None else _reindent(replace, shift)
    out = file_lines[:start] + new + file_lines[start + len(search):]
    ends_nl = text.endswith("\n") or not text
    joined = "\n".join(out)
    return (joined + "\n" if out and ends_nl else joined), None


def apply_edits(files: dict[str, str], parsed: ParsedEdits) -> EditResult:
    """Apply edits in order, each on the result of the previous; `files` is not modified."""
    crlf = {p: "\r\n" in t for p, t in files.items()}
    work = {p: _normalize_newlines(t) for p, t in files.items()}
    failures = list(parsed.failures)
    applied = 0
    seen: dict[str, int] = {}
    for edit in parsed.edits:
        if edit.path not in work:
            failures.append(EditFailure(path=edit.path, kind="unknown_path",
                                        detail=f"{edit.path} is not one of the files given ({', '.join(files)})"))
            continue
        before = work[edit.path]
        if isinstance(edit, WholeFile):
            content = _normalize_newlines(edit.content)
            if not content.strip():
                failures.append(EditFailure(path=edit.path, kind="empty_file",
                                            detail=f"the whole-file block for {edit.path} is empty; send its text"))
                continue
            after = content if content.endswith("\n") else content + "\n"
        else:
            seen[edit.path] = seen.get(edit.path, 0) + 1
            new, failure = _apply_search_replace(before, edit, seen[edit.path])
            if failure is not None:
                failures.append(failure)
                continue
            after = new or ""
        if after != before:
            applied += 1
            work[edit.path] = after

    changed: dict[str, str] = {}
    for path, text in work.items():
        if text == _normalize_newlines(files[path]):
            continue
        if not text.strip():
            failures.append(EditFailure(path=path, kind="empty_file",
                                        detail=f"the edits leave {path} empty; keep its code or send the whole file"))
            continue
        changed[path] = text.replace("\n", "\r\n") if crlf[path] else text
    return EditResult(files=changed, failures=failures, applied=applied if changed else 0)


def extract_and_apply(text: str, files: dict[str, str]) -> EditResult:
    return apply_edits(files, parse_edits(text, list(files)))


def format_failures(failures: list[EditFailure]) -> str:
    """The failures as a short numbered list for the repair prompt."""
    if not failures:
        return ""
    head = f"{len(failures)} edit{'s' if len(failures) != 1 else ''} could not be used:"
    rows = [f"{n}. {f.path or '(answer)'} [{f.kind}]: {f.detail}" for n, f in enumerate(failures, 1)]
    return "\n".join([head, *rows])
