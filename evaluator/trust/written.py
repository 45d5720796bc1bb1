"""Startup files the grading wrote, found on its writable layer once the grader is over.

The guard sees a write only where Python makes it; a shell, `cp` or a compiled helper the
candidate starts writes unseen. Whatever wrote it, a startup file (inside/pesflow_guard_startup.py:
a sitecustomize, a .pth in a site folder, a module named as pesflow's own) put where the
grading's later interpreters start runs before anything is watched there: one that is on the
grading's writable layer after the grader is guard_evasion, whoever wrote it. A backend lists
what the grading wrote (the local one walks its scratch in the init, with every process of the
grading dead; the docker one asks the engine for the container's changes); this module holds the
rule's host side and turns what was found into the guard's event form (evaluator/trust/runtime.py).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Iterable

from evaluator.sandbox import q
from evaluator.trust.instrument import INSIDE

RULE_FILE = INSIDE / "pesflow_guard_startup.py"
MAX_FOUND = 50  # named in full up to here: one is enough to be suspect
SCAN_FILE = "written-startup.json"  # scan_command's output, in a local grading's run folder

# Run by a local grading's init (the host's python, -I -S) after the grader's processes are
# dead: walks each (folder, the path it is in the sandbox) without following links, and writes
# the startup files found there, as sandbox paths, to a JSON file (a whiteout, the mark of a
# removed file, counts: the guard's own .pth deleted is the guard switched off).
_SCAN = r"""
import json, os, stat, sys
out, rule, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
ns = {}
exec(compile(open(rule).read(), rule, "exec"), ns)
found, seen = [], 0
for folder, where in zip(pairs[0::2], pairs[1::2]):
    for top, dirs, names in os.walk(folder, followlinks=False):
        for n in dirs + names:
            seen += 1
            path = where.rstrip("/") + "/" + os.path.relpath(os.path.join(top, n), folder)
            if ns["startup_file"](path) and len(found) < %d:
                try:
                    removed = stat.S_ISCHR(os.lstat(os.path.join(top, n)).st_mode)
                except OSError:
                    removed = False
                found.append([path, removed])
with open(out, "w") as f:
    json.dump({"found": found, "seen": seen}, f)
""" % MAX_FOUND


def _rule():
    spec = importlib.util.spec_from_file_location("pesflow_guard_startup", RULE_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.startup_file


startup_file = _rule()


def scan_command(python: str, folders: list[tuple[Path, str]], out: Path) -> str:
    """The init's shell line that writes to `out` the startup files in `folders` ((host folder,
    its path in the sandbox) pairs: the grading's writable layer)."""
    pairs = " ".join(f"{q(host)} {q(where)}" for host, where in folders)
    return f"{q(python)} -I -S -c {q(_SCAN)} {q(out)} {q(RULE_FILE)} {pairs}"


def read_scan(out: Path) -> list[tuple[str, bool]] | None:
    """What scan_command found: (sandbox path, removed) pairs; None where it left nothing (the
    init was stopped before it ran)."""
    try:
        got = json.loads(out.read_text())
        return [(str(p), bool(r)) for p, r in got["found"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def startup_changes(changes: Iterable[tuple[str, int]]) -> list[tuple[str, bool]]:
    """From an engine's list of a container's changes ((path, kind): 0 modified, 1 added, 2
    deleted), the startup files, as scan_command names them."""
    return [(p, k == 2) for p, k in changes if startup_file(p)][:MAX_FOUND]


def events(found: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    """The guard's event form of each startup file found (sent by the host, not the sandbox)."""
    return [{"kind": "finding", "family": "guard_evasion", "via": "host",
             "evidence": f"{path}, a file interpreters run at start, was {'removed' if removed else 'written'} during the "
                         "grading (found on its writable layer after the grader)"} for path, removed in found]


# For a backend that can only run commands in the grading's machine (Modal): its startup-named
# files with their inode change times, listed before the grader and after; one added, changed
# (a ctime cannot be set back) or gone is one the grading wrote or removed.
LIST_STARTUP = ("find / /tmp /var/tmp /dev/shm -xdev \\( -name 'sitecustomize*' -o -name 'usercustomize*' "
                "-o -name 'pesflow_*' -o -name '*.pth' \\) -not -path '/proc/*' -printf '%p\\t%C@\\n' 2>/dev/null; true")


def listing_changes(before: str, after: str) -> list[tuple[str, bool]]:
    """The startup files that LIST_STARTUP's two listings say the grading wrote or removed."""
    def parse(text: str) -> dict[str, str]:
        return dict(line.rsplit("\t", 1) for line in text.splitlines() if "\t" in line)
    old, new = parse(before), parse(after)
    changed = [(p, False) for p, t in new.items() if old.get(p) != t] + [(p, True) for p in old if p not in new]
    return [(p, r) for p, r in sorted(changed) if startup_file(p)][:MAX_FOUND]
