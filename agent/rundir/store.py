"""The run directory: where a search leaves everything it did (shared/DESIGN.md).

    traces/<task>/<run-id>/
      run.json                 config, task, versions, seed, timing, totals, status, best
      journal.jsonl            hash-chained events (agent/journal.py)
      rounds/<k>/planner/      prompt.md, response.md
      rounds/<k>/executor/<child>/   prompt.md, response.md, [repair_*], candidate.diff, verdict.json
      rounds/<k>/summarizer/   prompt.md, response.md, lessons.json
      evaluations/<hash>/      the grader's logs for each distinct candidate
      checkpoints/round-<k>/   LoongFlow layout (best_solution.json, metadata.json, solutions/)
                               + pesflow_state.json (population, RNG, memory, totals)
      final/                   the chosen candidate as a patch, its verdicts, report.md
Every file goes through `redact`; whole files are replaced atomically (write, fsync, rename).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agent.journal import Journal
from agent.secrets import redact


class RunDirError(Exception):
    """Not a run directory, or one that cannot be continued; one line naming the fix."""


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunStore:
    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(root / "journal.jsonl")

    @classmethod
    def create(cls, root: Path, run: dict[str, Any]) -> "RunStore":
        """A new run directory that appears with its run.json already in it (made aside, then
        renamed), so that no kill leaves a run folder that cannot be resumed."""
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
        RunStore(tmp).update_run(**run)
        os.rename(tmp, root)
        return cls(root)

    # -- files -----------------------------------------------------------------
    def write(self, rel: str, text: str) -> Path:
        p = self.root / rel
        atomic_write(p, redact(text))
        return p

    def write_json(self, rel: str, obj: Any) -> Path:
        return self.write(rel, json.dumps(obj, indent=1, ensure_ascii=False, default=str) + "\n")

    def read_json(self, rel: str) -> Any:
        return json.loads((self.root / rel).read_text())

    def round_dir(self, k: int) -> str:
        return f"rounds/{k:02d}"

    def evaluation_dir(self, content_hash: str, label: str = "") -> Path:
        p = self.root / "evaluations" / content_hash[:16] / label if label else self.root / "evaluations" / content_hash[:16]
        p.mkdir(parents=True, exist_ok=True)
        return p

    def checkpoint_dir(self, k: int) -> Path:
        return self.root / "checkpoints" / f"round-{k:02d}"

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        found = sorted(self.root.glob("checkpoints/round-*"))
        found = [p for p in found if (p / "pesflow_state.json").is_file()]
        if not found:
            return None
        p = found[-1]
        return int(p.name.split("-")[1]), p

    # -- run.json --------------------------------------------------------------
    def update_run(self, **fields: Any) -> dict[str, Any]:
        """Merge fields into run.json, keeping `status` and `best` as its last keys."""
        path = self.root / "run.json"
        data = json.loads(path.read_text()) if path.is_file() else {}
        data.update(fields)
        tail = {k: data.pop(k) for k in ("status", "best") if k in data}
        data.update(tail)
        self.write_json("run.json", data)
        return data
