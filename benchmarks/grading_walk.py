"""Following one grading through pesflow's code (issue 50: "a grading you can follow"): the files
of agent/ and evaluator/ that one `Evaluator.evaluate` enters, in order, on the thread that asked.

A real local grading of the bundled toy package (a dev grading of a candidate, the screen on, the
dev reference graded first where the run has none, then the same again with it kept), traced with
sys.setprofile on the calling thread only (the sandbox's reader threads are not the grading's
path), calls at most --depth deep among pesflow's own frames (a reader following the stages and
what each calls). Consecutive calls within one file are one stay. Printed: the stays, the files, how many
stays re-enter a file already left, and how often evaluation.py is entered; then the walk.

    python3 benchmarks/grading_walk.py [--grader dev|hidden] [--depth N] [--walk]

Needs root (the local backend's namespaces).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evaluator.candidate import CandidateSource  # noqa: E402
from evaluator.config import EvaluatorConfig, LocalConfig  # noqa: E402
from evaluator.evaluation import Evaluator  # noqa: E402

OURS = tuple(str(REPO / d) + "/" for d in ("agent", "evaluator"))
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"


def walk_of(fn, depth: int) -> list[str]:
    """The files of ours entered while fn() runs, by calls at most `depth` deep among our own
    frames (evaluate's body is 1), consecutive calls within one file collapsed; a property or a
    dunder read is no step of the walk (a reader does not follow it)."""
    stays: list[str] = []
    level = [0]

    def profiler(frame, event, _arg):
        if event not in ("call", "return") or not frame.f_code.co_filename.startswith(OURS):
            return
        if event == "return":
            level[0] -= 1
            return
        level[0] += 1
        name = frame.f_code.co_name
        if level[0] <= depth and not name.startswith("__") and not _is_property(frame):
            rel = str(Path(frame.f_code.co_filename).relative_to(REPO))
            if not stays or stays[-1] != rel:
                stays.append(rel)
    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return stays


def _is_property(frame) -> bool:
    this = frame.f_locals.get("self")
    attr = getattr(type(this), frame.f_code.co_name, None) if this is not None else None
    return isinstance(attr, property)


def figures(stays: list[str]) -> dict[str, int]:
    seen: set[str] = set()
    again = 0
    for i, f in enumerate(stays):
        if f in seen and stays[i - 1] != f:
            again += 1
        seen.add(f)
    return {"stays": len(stays), "files": len(seen), "re-entries": again,
            "evaluation.py entered": Counter(stays)["evaluator/evaluation.py"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grader", default="dev", choices=("dev", "hidden"))
    ap.add_argument("--walk", action="store_true", help="print every stay, in order")
    ap.add_argument("--depth", type=int, default=3, help="calls this deep among our own frames (evaluate's body: 1)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(Path(tmp) / "cache"))),
                       tasks_roots=[REPO / "tests" / "fixtures" / "tasks"], log_root=Path(tmp) / "logs")
        try:
            ev.prepare(ev.task("kfc/toy-sum"))  # preparing is not grading
            for label in ("first (its dev reference graded too)", "again (the reference kept)"):
                v = None

                def one() -> None:
                    nonlocal v
                    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}),
                                    grader=args.grader)
                stays = walk_of(one, args.depth)
                print(f"{args.grader} grading, {label}: {v.status.value}; " +
                      ", ".join(f"{k} {n}" for k, n in figures(stays).items()))
                if args.walk:
                    print("  " + "\n  ".join(stays))
        finally:
            ev.close()


if __name__ == "__main__":
    main()
