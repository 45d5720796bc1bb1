"""What the screen keeps between gradings, in the evaluator's cache: the package's oracle as
measured here (the plausibility reference, and how far its figure sits above pesflow's own
timing of it: the band a candidate's figure is reproduced within), and what a package's probe spent importing (whether
the warm probe starts beside the grader). Each record is written whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from evaluator.trust.probe_run import read_json


class ScreenCache:
    def __init__(self, cache: Path):
        self.cache = cache

    def imports_file(self, warm_key: str) -> Path:
        return self.cache / "trust" / f"imports-{warm_key}.json"

    def keep_import_cost(self, warm_key: str, checks: dict[str, Any]) -> None:
        """What this package's probe spent importing installed packages: what the warm probe
        preloaded (so that a package that pays for it keeps it), else a cold probe's imports of
        what its inputs hold (never the candidate's own module: its cost is the candidate's)."""
        warm = checks.get("warm") if isinstance(checks.get("warm"), dict) else {}
        if warm.get("preloaded"):
            seconds = sum(float(t) for _, t in warm["preloaded"])
        elif isinstance(checks.get("loads"), list):
            seconds = sum(float(t) for n, t in checks["loads"] if n in ("numpy", "torch"))
        else:
            return
        self._write(self.imports_file(warm_key), {"seconds": round(seconds, 4)})

    def import_seconds(self, warm_key: str) -> float:
        """What this package's probe was last seen to spend importing (0 where never seen)."""
        seen = read_json(self.imports_file(warm_key)) if warm_key else None
        return float(seen.get("seconds") or 0) if seen else 0.0

    @staticmethod
    def _write(p: Path, value: dict[str, Any]) -> None:
        p.parent.mkdir(parents=True, exist_ok=True)
        # a name of its own: gradings in parallel threads of one process write it at once (a
        # pid-named one was renamed away under the other, and that grading raised)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=p.name + ".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(value))
        os.replace(tmp, p)  # whole or absent

    def _oracle_file(self, task_key: str) -> Path:
        return self.cache / "trust" / f"oracle-{task_key}.json"

    def keep_oracle(self, task_key: str, speedup: float, gap: float | None = None) -> None:
        """The oracle's figure, and its gap where pesflow timed it again (the figure over
        pesflow's own ratio on the same calls: trust/screen.py `_gap`); a gap measured before is
        kept where this grading did not time it."""
        kept = read_json(self._oracle_file(task_key)) or {}
        gap = gap if gap is not None else kept.get("gap")
        self._write(self._oracle_file(task_key), {"speedup": speedup, **({"gap": round(gap, 4)} if gap else {})})

    def measured_gap(self, task_key: str) -> float | None:
        """The package's reference's gap as measured here, or None where it never was."""
        gap = (read_json(self._oracle_file(task_key)) or {}).get("gap")
        return float(gap) if isinstance(gap, (int, float)) and gap > 0 else None

    def reference_gap(self, task_key: str) -> float:
        """The package's reference's gap as measured here (at least 1), else 1."""
        return max(1.0, self.measured_gap(task_key) or 1.0)

    def reference_speedup(self, task_key: str, anchor: float | None) -> float | None:
        """The package's oracle as measured here (same grader and device), else its anchor."""
        got = read_json(self._oracle_file(task_key))
        if got and isinstance(got.get("speedup"), (int, float)) and got["speedup"] > 0:
            return float(got["speedup"])
        return anchor
