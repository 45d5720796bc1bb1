"""The catalog of all Φ-Bench tasks (tasks/catalog.json) and where each package can be found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluator.task import BUNDLED_TASKS, package_root_in, task_roots

CATALOG = BUNDLED_TASKS / "catalog.json"


def load_catalog(path: Path = CATALOG) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["tasks"]


def locate(roots: list[str | Path] | None = None) -> list[dict[str, Any]]:
    """Every catalog task, plus any package found in a root that the catalog lacks, with `location`
    (the package root that would be used, first root wins) or None."""
    searched = task_roots(roots)
    rows = []
    seen = set()
    for entry in load_catalog():
        found = next((p for r in searched if (p := package_root_in(r, entry["name"])) is not None), None)
        rows.append({**entry, "location": str(found) if found else None})
        seen.add(entry["name"])
    for root in searched:
        for toml in sorted(root.glob("*/*/task.toml")) + sorted(root.glob("*/*/task/task.toml")):
            pkg = toml.parent.parent if toml.parent.name == "task" else toml.parent
            name = f"{pkg.parent.name}/{pkg.name}"
            if name not in seen:
                seen.add(name)
                rows.append({"name": name, "bench": pkg.parent.name, "dir": pkg.name,
                             "description": "(not in the catalog)", "reward_class": None, "gpus": None,
                             "max_submissions": None, "ref_speedup": None, "bundled": root == BUNDLED_TASKS.resolve(),
                             "location": str(toml.parent)})
    return rows
