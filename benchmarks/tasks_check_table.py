"""The committed `tasks check` table: results of several machines merged into one, each package
classified again with the current rules (evaluator/package_check.py classify) from what was
graded, and the machine named.

    python3 benchmarks/tasks_check_table.py --tasks-root ~/LLM-Infra-Bench-faibench/tasks \
        --results "this CPU machine=DIR/results.jsonl" --results "H200=DIR2/results.jsonl" --out benchmarks/results/tasks-check

A package checked on more than one machine keeps the result of the first --results that graded
it (needs_gpu from a CPU machine yields to a GPU machine's result).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator.package_check import CLASSES, PackageCheck, classify, load_results, markdown  # noqa: E402
from evaluator.task import TaskError, load_task  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks-root", required=True)
    ap.add_argument("--results", action="append", default=[], metavar="MACHINE=RESULTS.jsonl")
    ap.add_argument("--out", required=True, help="writes OUT.md and OUT.json")
    args = ap.parse_args()
    merged: dict[str, tuple[str, PackageCheck]] = {}
    for spec in args.results:
        machine, _, path = spec.partition("=")
        for c in load_results(Path(path)).values():
            had = merged.get(c.task)
            if had is None or (had[1].klass == "needs_gpu" and c.klass != "needs_gpu"):
                merged[c.task] = (machine, c)
    rows = []
    for name in sorted(merged):
        machine, c = merged[name]
        if c.klass != "needs_gpu":
            try:
                task = load_task(name, [args.tasks_root])
                c.klass, c.evidence, c.oracle_over_anchor = classify(task, c.results, c.environment)
            except TaskError:
                pass
        rows.append((machine, c))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    checks = [c for _, c in rows]
    text = markdown(checks)
    by_machine = "\n".join(f"- {c.task}: {m}" for m, c in rows if c.klass != "needs_gpu")
    text += f"\n## Where each package was graded\n\n{by_machine}\n"
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps([{"machine": m, **c.model_dump(mode="json")} for m, c in rows], indent=1))
    counts = {k: sum(1 for c in checks if c.klass == k) for k in CLASSES}
    print(f"{len(checks)} packages: " + ", ".join(f"{k} {n}" for k, n in counts.items() if n))


if __name__ == "__main__":
    main()
