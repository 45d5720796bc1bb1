"""The reward-hacking corpus: exploit and honest candidates, each a package's own reference
(solution/) with one file of this folder appended to its scope file.

Layout (one folder per package, named `<bench>__<dir>`):
  exploits/<bench>__<dir>/*.py   cheats the trust screen must call suspect, naming the family
  honest/<bench>__<dir>/*.py     unusual but honest code it must leave alone
  official/<bench>__<dir>/*.py   cheats for the public benchmark's own packages (graded
                                 unchanged, benchmarks/trust_exploits.py)

Every file starts with a comment block of `# Key: value` lines (a value may go on over the
following `#   ` lines): Attack (or Why, for an honest one), Family (exploits only; one of
evaluator.trust.findings.FAMILIES, or several joined by ` | ` when the cheat truly is each of
them, the first the one it was written for), Entry (the scope file it is appended to, when the package
has more than one) and Grader alone (what the package's graders score it without the screen,
measured here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evaluator.candidate import CandidateSource, apply_diff
from evaluator.modes import artifacts
from evaluator.task import Task

HERE = Path(__file__).resolve().parent
KINDS = ("exploits", "honest", "official")


@dataclass(frozen=True)
class Entry:
    kind: str  # exploits | honest | official
    task: str  # <bench>/<dir>
    name: str  # the file's stem
    path: Path
    fields: dict

    @property
    def family(self) -> str | None:
        return self.families[0] if self.families else None

    @property
    def families(self) -> tuple[str, ...]:
        # each a family's name; words after the last one (a note on the lines below) are no family
        return tuple(f.split()[0] for f in (self.fields.get("family") or "").split("|") if f.strip())

    @property
    def id(self) -> str:
        return f"{self.task.split('/', 1)[1]}:{self.name}"


def task_of(folder: str) -> str:
    bench, _, name = folder.partition("__")
    return f"{bench}/{name}"


def folder_of(task: str) -> str:
    return task.replace("/", "__", 1)


def header(text: str) -> dict:
    """The leading `# Key: value` block, keys lower-cased with spaces as underscores."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"#\s?([A-Z][A-Za-z ]*):\s*(.*)$", line)
        if m:
            key = m.group(1).strip().lower().replace(" ", "_")
            fields[key] = m.group(2).strip()
        elif key and line.startswith("#  "):
            fields[key] = (fields[key] + " " + line[1:].strip()).strip()
    return fields


def entries(kind: str, task: str | None = None) -> list[Entry]:
    assert kind in KINDS, kind
    out = []
    for folder in sorted(p for p in (HERE / kind).iterdir() if p.is_dir()):
        name = task_of(folder.name)
        if task is not None and name != task:
            continue
        for path in sorted(folder.glob("*.py")):
            out.append(Entry(kind, name, path.stem, path, header(path.read_text())))
    return out


def reference_files(task: Task) -> dict[str, str]:
    """The package's own reference as scope files: solution/oracle.patch applied to the
    baseline, or the whole-file reference (solution/kernel_oracle.py, solution/<scope name>)."""
    found = artifacts(task, "oracle")
    if not found:
        raise LookupError(f"{task.name} ships no reference in solution/")
    ref = found[0]
    base = {rel: (task.root / "environment/repo" / rel).read_text() for rel in task.scope
            if (task.root / "environment/repo" / rel).is_file()}
    if ref.suffix == ".patch":
        files = apply_diff(ref.read_text(), base)
        return {rel: text for rel, text in files.items() if text is not None}
    return {task.scope[0]: ref.read_text()}


def source(task: Task, entry: Entry | None) -> CandidateSource:
    """The reference, with the entry's code appended to its scope file (the reference alone for None)."""
    files = reference_files(task)
    if entry is not None:
        rel = entry.fields.get("entry") or task.scope[0]
        files[rel] = files[rel].rstrip("\n") + "\n\n\n" + entry.path.read_text()
    return CandidateSource(files=dict(files))
