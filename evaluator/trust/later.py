"""The probes of a deferred grading, run later on what the grading kept.

Where the guard is inside the one grading (evaluator/trust/watch.py: same), a child whose
figure does not pass the search's best has its probes deferred (screen.py `defers`): the guard
ran in the grading and kept the calls into the candidate (their inputs, what the harness got),
only the probes did not run. Picked as a parent, the child needs them, not a second grading:
what the grading kept is saved beside its verdict, and the probes run later on it in a fresh
sandbox of the same candidate. The guard's events are the host's own copy (where the socket carried
them, only its copy of a record is believed), saved by the host in the grading's log folder,
which no sandbox sees; the inputs' files the probe checks against their recorded digests, as
it does when it runs at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluator.grading_records import GradeRun

KEPT_FILE = "deferred-run.json"  # beside the grading's trust/ folder, in its log folder


def keep(run: GradeRun, log_dir: Path) -> None:
    """What the probes will need of `run`, saved in `log_dir` (the grading's own)."""
    saved = {"trust_events": run.trust_events, "trust_socket": run.trust_socket, "grader_seconds": run.grader_seconds}
    (log_dir / KEPT_FILE).write_text(json.dumps(saved, default=str))


def kept(scored_dir: Path) -> GradeRun | None:
    """The run saved by `keep` in `scored_dir`, its kept calls read where the grading left them
    (`trust_dir`: the probe copies out only the calls it picks, up to 64 MiB each, not the
    whole record); None where nothing was saved or it cannot be read."""
    try:
        saved: dict[str, Any] = json.loads((scored_dir / KEPT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or not isinstance(saved.get("trust_events"), list):
        return None
    seconds = saved.get("grader_seconds")
    return GradeRun(reward=None, returncode=0, timed_out=False, seconds=0.0, output="",
                    grader_seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
                    trust_events=[e for e in saved["trust_events"] if isinstance(e, dict)],
                    trust_socket=bool(saved.get("trust_socket")), trust_dir=scored_dir / "trust")
