"""Candidates: a unified diff or a folder of replacement files -> a file set over the scope.

The scope gate runs here, on the text of the candidate, before anything is executed:
a path outside `primary_edit_paths`, a symlink, anything under .git, or a path that climbs
out of the tree is refused with a named reason.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from pydantic import BaseModel


class CandidateError(Exception):
    """The candidate itself is unusable (unreadable, not a patch, does not apply)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def candidate_hash(files: dict[str, str | None], baseline: dict[str, str | None] | None = None) -> str:
    """A candidate's one name, in the journal, the population and the verdict alike: sha256 over
    the scope files it changes. A file whose text is the baseline's is left out, so naming the
    whole scope or only the changed files gives the same hash (the unchanged baseline: {})."""
    changed = {p: t for p, t in files.items() if baseline is None or t != baseline.get(p)}
    return Candidate(files=changed).content_hash()


class Candidate(BaseModel):
    """The whole proposal: new text for each changed scope file (None: the file is deleted)."""

    files: dict[str, str | None]

    def content_hash(self) -> str:
        blob = json.dumps(sorted(self.files.items()), ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()

    def diff(self, baseline: dict[str, str | None]) -> str:
        """A `git apply`-able unified diff against the baseline text of the same files."""
        out = []
        for rel in sorted(self.files):
            old, new = baseline.get(rel), self.files[rel]
            if old == new:
                continue
            a = (old or "").splitlines(keepends=True)
            b = (new or "").splitlines(keepends=True)
            for seq in (a, b):
                if seq and not seq[-1].endswith("\n"):
                    seq[-1] += "\n\\ No newline at end of file\n"
            out.append(f"diff --git a/{rel} b/{rel}\n")
            if old is None:
                out.append("new file mode 100644\n")
            elif new is None:
                out.append("deleted file mode 100644\n")
            out.extend(
                difflib.unified_diff(
                    a, b, "/dev/null" if old is None else f"a/{rel}", "/dev/null" if new is None else f"b/{rel}"
                )
            )
        return "".join(out)


def _strip_prefix(path: str, source_root: str) -> str:
    path = path.strip().strip('"')
    if path.startswith(source_root.rstrip("/") + "/"):
        return path[len(source_root.rstrip("/")) + 1 :]
    return path


_DIFF_GIT = re.compile(r"^diff --git (\S+) (\S+)")


def diff_paths(diff: str, source_root: str = "/app/repo") -> tuple[set[str], set[str]]:
    """(paths a diff touches, paths it gives a symlink or non-regular mode), prefixes a/ b/ removed."""
    touched: set[str] = set()
    links: set[str] = set()
    current: str | None = None
    for line in diff.splitlines():
        m = _DIFF_GIT.match(line)
        if m:
            for p in m.groups():
                touched.add(_strip_prefix(p[2:] if p[:2] in ("a/", "b/") else p, source_root))
            current = _strip_prefix(m.group(2)[2:] if m.group(2)[:2] == "b/" else m.group(2), source_root)
            continue
        if line.startswith(("--- ", "+++ ")):
            p = line[4:].split("\t")[0]
            if p != "/dev/null":
                p = p[2:] if p[:2] in ("a/", "b/") else p
                current = _strip_prefix(p, source_root)
                touched.add(current)
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            touched.add(_strip_prefix(line.split(" ", 2)[2], source_root))
        elif re.match(r"^(new file mode|new mode|deleted file mode|old mode) ", line) and current:
            mode = line.rsplit(" ", 1)[1]
            if not mode.startswith("100"):
                links.add(current)
    return touched, links


def in_scope(rel: str, scope: list[str]) -> bool:
    return any(rel == s or fnmatch.fnmatchcase(rel, s) or (s.endswith("/") and rel.startswith(s)) for s in scope)


def scope_violations(paths: set[str], links: set[str], scope: list[str]) -> list[str]:
    """Named reasons, one per offending path; empty when the candidate may run."""
    reasons = []
    for rel in sorted(paths):
        parts = PurePosixPath(rel).parts
        if rel.startswith("/") or ".." in parts:
            reasons.append(f"path_escapes_tree:{rel}")
        elif ".git" in parts:
            reasons.append(f"touches_git:{rel}")
        elif not in_scope(rel, scope):
            reasons.append(f"out_of_scope:{rel}")
    reasons += [f"symlink_or_special_file:{rel}" for rel in sorted(links)]
    return reasons


def folder_files(folder: Path) -> tuple[dict[str, str], set[str]]:
    """A folder of replacement files laid out as in the repository; symlinks are reported."""
    files: dict[str, str] = {}
    links: set[str] = set()
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if "__pycache__" in p.parts or p.suffix == ".pyc":
            continue
        if p.is_symlink():
            links.add(rel)
        elif p.is_file():
            try:
                files[rel] = p.read_text()
            except UnicodeDecodeError:
                raise CandidateError("binary_file", rel) from None
    return files, links


def apply_diff(diff: str, baseline: dict[str, str | None]) -> dict[str, str | None]:
    """Apply a diff to the baseline text of the files it touches, with git apply (no repository)."""
    with tempfile.TemporaryDirectory(prefix="pesflow-apply-") as tmp:
        root = Path(tmp)
        for rel, text in baseline.items():
            if text is not None:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
        (root / ".candidate.diff").write_text(diff if diff.endswith("\n") else diff + "\n")
        errors = []
        for strip in ("-p1", "-p0"):
            r = subprocess.run(
                ["git", "apply", strip, "--whitespace=nowarn", "--recount", ".candidate.diff"],
                cwd=root, capture_output=True, text=True,
            )
            if r.returncode == 0:
                break
            errors.append(r.stderr.strip().splitlines()[0] if r.stderr.strip() else f"git apply {strip} failed")
            # a failed attempt may have left nothing: git apply is atomic
        else:
            raise CandidateError("patch_does_not_apply", errors[0])
        out: dict[str, str | None] = {}
        for rel in baseline:
            p = root / rel
            out[rel] = p.read_text() if p.is_file() else None
        for p in root.rglob("*"):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and rel != ".candidate.diff" and rel not in out:
                out[rel] = p.read_text()
        shutil.rmtree(root / ".git", ignore_errors=True)
        return out


class CandidateSource:
    """What the user handed in: a diff (text) or a folder of files, or an in-memory file set."""

    def __init__(self, diff: str | None = None, files: dict[str, str | None] | None = None,
                 links: set[str] = frozenset()):  # type: ignore[assignment]
        self.diff, self.files, self.links = diff, files, set(links)

    @classmethod
    def from_path(cls, path: Path) -> "CandidateSource":
        path = Path(path)
        if path.is_dir():
            files, links = folder_files(path)
            return cls(files=dict(files), links=links)
        if not path.is_file():
            raise CandidateError("candidate_missing", f"{path} is neither a patch file nor a folder")
        return cls(diff=path.read_text(errors="replace"))

    def paths(self, source_root: str) -> tuple[set[str], set[str]]:
        if self.diff is not None:
            return diff_paths(self.diff, source_root)
        return set(self.files or {}), self.links
