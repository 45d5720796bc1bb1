"""What the grading wrote that the guard could not see, read off its writable layer once the
grader is over.

The guard sees a write only where Python makes it; a shell, `cp` or a compiled helper the
candidate starts writes unseen. Whatever wrote it, a startup file (inside/pesflow_guard_startup.py:
a sitecustomize, a .pth in a site folder, a module named as pesflow's own) put where the
grading's later interpreters start runs before anything is watched there: guard_evasion. A
module the image holds, not the candidate's, rewritten, touched or removed changes what the
harness runs, or makes it read as the grading's own (which the guard does not watch):
harness_patched. A backend lists what the grading wrote (the local one walks its scratch in the
init, with every process of the grading dead; the docker one asks the engine for the
container's changes and lists the startup files of its scratch tmpfs, which those leave out;
Modal lists startup-named files before and after), with the text of each startup file found (a
grader's own, spelled out in its scripts, is not a finding: graders_own); this module holds the
rules' host side and turns what was found into the guard's event form (evaluator/trust/runtime.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any, Iterable

from evaluator.programs import WRITTEN_SCAN
from evaluator.sandbox import q
from evaluator.trust.instrument import INSIDE
from evaluator.trust.inside.pesflow_rules import family

RULE_FILE = INSIDE / "pesflow_guard_startup.py"
MAX_FOUND = 50  # named in full up to here: one is enough to be suspect
MAX_TEXT = 16384  # a found file's text is sent (graders_own) up to this many bytes
SCAN_FILE = "written-startup.json"  # scan_command's output, in a local grading's run folder

def _rules():
    spec = importlib.util.spec_from_file_location("pesflow_guard_startup", RULE_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.startup_file, mod.vcs_control


startup_file, vcs_control = _rules()


def scan_command(python: str, walk: list[tuple[Path, str]], image: list[tuple[Path, str, list[Path]]],
                 skip: list[str], out: Path) -> str:
    """The init's shell line that writes to `out` what the grading wrote that matters here:
    startup files in `walk` ((host folder, its path in the sandbox): the grading's writable
    layer), and modules of the image in `image` ((upper layer, its path, its lower layers) per
    writable path), less the candidate's own files (`skip`, candidate_paths). The scan is
    evaluator/programs/written_scan.py, run by the host's `python` (-I -S) with every process of
    the grading dead, without following links; it names the files as sandbox paths."""
    spec = {"walk": [[str(h), w] for h, w in walk],
            "image": [[str(u), w, [str(x) for x in lows]] for u, w, lows in image], "skip": sorted(skip),
            "max_found": MAX_FOUND, "max_text": MAX_TEXT}
    return f"{q(python)} -I -S {q(WRITTEN_SCAN)} {q(out)} {q(RULE_FILE)} {q(json.dumps(spec))}"


def read_scan(out: Path) -> list[dict[str, Any]] | None:
    """What scan_command found, as events (events()); None where it left nothing (the init was
    stopped before it ran)."""
    try:
        got = json.loads(out.read_text())
        return (events([(str(f[0]), bool(f[1])) for f in got["found"]],
                       [f[2] if len(f) > 2 else None for f in got["found"]])
                + image_events([(str(p), bool(r)) for p, r in got.get("image") or []])
                + vcs_events([(str(p), bool(r)) for p, r in got.get("vcs") or []]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def text_of(data: bytes | str | None) -> str | None:
    """A found file's text as the scan sends it (graders_own): UTF-8 of at most MAX_TEXT bytes,
    else None. `data` is what a backend read of it, MAX_TEXT + 1 bytes at most (a str decoded with
    replacement characters, as an engine's exec gives it back, counts as not UTF-8)."""
    if isinstance(data, str):
        data = None if "\ufffd" in data else data.encode("utf-8")
    if data is None or len(data) > MAX_TEXT:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def startup_changes(changes: Iterable[tuple[str, int]]) -> list[tuple[str, bool]]:
    """From an engine's list of a container's changes ((path, kind): 0 modified, 1 added, 2
    deleted), the startup files, as scan_command names them."""
    return [(p, k == 2) for p, k in changes if startup_file(p)][:MAX_FOUND]


def candidate_paths(scope: Iterable[str], files: Iterable[str]) -> set[str]:
    """The candidate's own files, as the ends of sandbox paths: its scope and whatever it handed
    in, wherever the grading puts them (a grader may check the scope out again, which rewrites
    it; an oracle's patch may land beside the source tree, /app/submission against /app/repo)."""
    return {rel.strip("/") for rel in [*scope, *files] if rel.strip("/")}


def _is_candidates(path: str, skip: set[str]) -> bool:
    return any(path.endswith("/" + rel) for rel in skip)


def image_changes(changes: Iterable[tuple[str, int]], writable: list[str], skip: set[str]) -> list[tuple[str, bool]]:
    """From an engine's list of changes, the Python files of the image under `writable` that
    were modified or deleted (not added), less the candidate's (`skip`), as scan_command names them."""
    return [(p, k == 2) for p, k in sorted(changes) if k in (0, 2) and p.endswith(".py") and not _is_candidates(p, skip)
            and any(p.startswith(w.rstrip("/") + "/") for w in writable)][:MAX_FOUND]


def vcs_changes(changes: Iterable[tuple[str, int]], writable: list[str]) -> list[tuple[str, bool]]:
    """From an engine's list of changes, the version-control files under `writable` written or
    removed in a repository or folder the image held (one the list names as added is the grading's own)."""
    changes = sorted(changes)
    added = {p.rstrip("/") for p, k in changes if k == 1}
    out = []
    for p, k in changes:
        anchor = vcs_control(p)
        under = any(p.startswith(w.rstrip("/") + "/") for w in writable)
        if anchor is None or anchor.rstrip("/") in added or not under:
            continue
        if not any(a == anchor or anchor.startswith(a + "/") for a in added):
            out.append((p, k == 2))
    return out[:MAX_FOUND]


def from_changes(changes: Iterable[tuple[str, int]], writable: list[str], skip: set[str],
                 texts: dict[str, str | None] | None = None) -> list[dict[str, Any]]:
    """The events of an engine's list of a grading's changes: its startup files (with `texts`,
    each one's text where the backend read it) and the image's modules it changed (both rules, as
    read_scan gives them for the local backend's scan)."""
    changes = list(changes)
    found = startup_changes(changes)
    return (events(found, [(texts or {}).get(p) for p, _ in found])
            + image_events(image_changes(changes, writable, skip)) + vcs_events(vcs_changes(changes, writable)))


def image_events(changed: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """The event form of each module of the image the grading changed: the harness's code (or
    the repository's, which it runs) is no longer what the package shipped, or its change time no
    longer says it is the image's, which the guard goes by."""
    return [{"kind": "finding", "rule": "written.image_module", "family": family("written.image_module"), "via": "host",
             "evidence": f"{path}, a module the image holds and not the candidate's, was "
                         f"{'removed' if removed else 'rewritten or its inode changed'} during the grading "
                         "(found on its writable layer after the grader)"} for path, removed in changed]


def vcs_events(changed: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """The event form of each version-control file the grading changed: what the harness's own
    `git checkout` or `git apply` writes (the baseline it restores, the patch it applies) is no
    longer only what the package's repository holds (a smudge filter runs any program)."""
    return [{"kind": "finding", "rule": "written.vcs_control", "family": family("written.vcs_control"), "via": "host",
             "evidence": f"{path}, git's own configuration, attributes or hooks in a repository the image holds, was "
                         f"{'removed' if removed else 'written'} during the grading (found on its writable layer "
                         "after the grader)"} for path, removed in changed]


def events(found: list[tuple[str, bool]], texts: list[str | None] | None = None) -> list[dict[str, Any]]:
    """The guard's event form of each startup file found (sent by the host, not the sandbox),
    with its text where the scan read it (graders_own)."""
    texts = texts or [None] * len(found)
    return [{"kind": "finding", "rule": "written.startup_file", "family": family("written.startup_file"), "via": "host",
             "evidence": f"{path}, a file interpreters run at start, was "
                         f"{'removed' if removed else 'written'} during the grading (found on its writable layer after "
                         "the grader)", **({"text": text} if text else {})}
            for (path, removed), text in zip(found, texts)]


# The grader's own scripts, where a file it writes for its later interpreters is spelled out
# (a heredoc in tests/test.sh): a sitecustomize that blocks an optional backend's import, say.
_GRADER_SUFFIXES = (".sh", ".bash", ".py")
MAX_GRADER_TEXT = 8 << 20


def grader_text(task_root: Path) -> str:
    """The text of the package's grader scripts (tests/, and environment/ less the source tree
    the candidate edits), up to MAX_GRADER_TEXT: what graders_own looks a planted file up in."""
    parts: list[str] = []
    total = 0
    for root in (task_root / "tests", task_root / "environment"):
        found = []
        for top, dirs, names in os.walk(root):  # the source tree not walked at all: it can hold thousands of files
            if Path(top) == task_root / "environment":
                dirs[:] = [d for d in dirs if d != "repo"]
            found += [Path(top) / n for n in names]
        for p in sorted(found):
            if not (p.is_file() and not p.is_symlink()
                    and (p.suffix in _GRADER_SUFFIXES or p.name.startswith("Dockerfile"))):
                continue
            try:
                data = p.read_bytes()[:1 << 20].decode("utf-8", "replace")
            except OSError:
                continue
            if total + len(data) > MAX_GRADER_TEXT:
                return "\n".join(parts)
            parts.append(data)
            total += len(data)
    return "\n".join(parts)


def graders_own(text: str | None, graders: str) -> bool:
    """A file the grading wrote whose whole text the grader's own scripts spell out (a heredoc):
    the grader wrote it, or a candidate wrote the grader's own code, which changes nothing."""
    body = (text or "").strip()
    return len(body) >= 16 and body in graders


# For a backend that can only run commands in the grading's machine (Modal): its startup-named
# files with their inode change times, listed before the grader and after; one added, changed
# (a ctime cannot be set back) or gone is one the grading wrote or removed.
# find's test
STARTUP_NAMES = "\\( -name 'sitecustomize*' -o -name 'usercustomize*' -o -name 'pesflow_*' -o -name '*.pth' \\)"
LIST_STARTUP = (f"find / /tmp /var/tmp /dev/shm -xdev {STARTUP_NAMES} -not -path '/proc/*' -printf "
                "'%p\\t%C@\\n' 2>/dev/null; true")
# the argv, less the path, that reads a found file's text in a sandbox
READ_TEXT = ("head", "-c", str(MAX_TEXT + 1), "--")


def listing_changes(before: str, after: str) -> list[tuple[str, bool]]:
    """The startup files that LIST_STARTUP's two listings say the grading wrote or removed."""
    def parse(text: str) -> dict[str, str]:
        return dict(line.rsplit("\t", 1) for line in text.splitlines() if "\t" in line)
    old, new = parse(before), parse(after)
    changed = [(p, False) for p, t in new.items() if old.get(p) != t] + [(p, True) for p in old if p not in new]
    return [(p, r) for p, r in sorted(changed) if startup_file(p)][:MAX_FOUND]
