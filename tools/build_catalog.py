#!/usr/bin/env python3
"""Build tasks/catalog.json, pesflow's catalog of the 85 Φ-Bench (FAI-Bench) tasks.

Joins, on (bench, task dir):
  * the benchmark's task index   (fai_bench_tasks_index.json, schema fai_bench_task_index_v3)
  * the benchmark's task catalog (fai_bench_task_catalog.json, schema fai_bench_task_catalog_v2)
  * our own wording              (tools/catalog_descriptions.yaml)
and marks a task `bundled` when this repository holds its package on disk.

Usage (from anywhere):
  python3 tools/build_catalog.py [--index PATH] [--catalog PATH]
                                 [--descriptions PATH] [--out PATH]

Exits 1 with a one-line error when the inputs do not line up.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
SEEDS_DIR = REPO_ROOT.parent / "shared" / "seeds"
DEFAULT_INDEX = SEEDS_DIR / "fai_bench_tasks_index.json"
DEFAULT_CATALOG = SEEDS_DIR / "fai_bench_task_catalog.json"
DEFAULT_DESCRIPTIONS = REPO_ROOT / "tools" / "catalog_descriptions.yaml"
DEFAULT_OUT = REPO_ROOT / "tasks" / "catalog.json"

SCHEMA = "pesflow_task_catalog_v1"
SOURCE = "Φ-Bench (FAI-Bench) index v3 + catalog v2"
EXPECTED_INDEX_SCHEMA = "fai_bench_task_index_v3"
EXPECTED_CATALOG_SCHEMA = "fai_bench_task_catalog_v2"

LAYOUTS = {"task/", "flat"}
ANCHOR_HARDWARE = {"NVIDIA H20", "CPU lane", None}
MAX_DESCRIPTION_CHARS = 140
# Fields that both seed files carry; they must agree.
SHARED_FIELDS = ("reward_class", "gpus", "max_submissions", "ref_speedup")

Key = tuple[str, str]  # (bench, task dir)


class CatalogError(Exception):
    """An input problem; reported as one line."""


def load_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CatalogError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise CatalogError(f"{path}: expected an object with a 'tasks' list")
    return data


def load_descriptions(path: Path) -> dict[str, dict[str, Any]]:
    try:
        with path.open(encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise CatalogError(f"cannot read {path}: {' '.join(str(e).split())}") from e
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping of '<bench>/<dir>' to entries")
    return data


def keyed(tasks: list[dict[str, Any]], dir_field: str, label: str) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for t in tasks:
        key = (t["bench"], t[dir_field])
        if key in out:
            raise CatalogError(f"{label} lists {key[0]}/{key[1]} twice")
        out[key] = t
    return out


def names(keys: set[Key]) -> str:
    return ", ".join(f"{b}/{d}" for b, d in sorted(keys))


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(?:\s|$)", text.strip(), re.DOTALL)
    return (match.group(1) if match else text).strip()


def expected_package_root(bench: str, task_dir: str, layout: str) -> str:
    return f"tasks/{bench}/{task_dir}" + ("/task" if layout == "task/" else "")


def check_description(name: str, entry: Any, summary: str) -> tuple[str, str | None]:
    if not isinstance(entry, dict):
        raise CatalogError(f"{name}: description entry must be a mapping")
    desc = entry.get("description")
    if not isinstance(desc, str) or not desc.strip():
        raise CatalogError(f"{name}: description is missing or empty")
    if "\n" in desc or len(desc) > MAX_DESCRIPTION_CHARS:
        raise CatalogError(f"{name}: description must be one line of <= {MAX_DESCRIPTION_CHARS} chars")
    if desc.strip() == first_sentence(summary):
        raise CatalogError(f"{name}: description copies the benchmark summary's first sentence")
    if "anchor_hardware" not in entry or entry["anchor_hardware"] not in ANCHOR_HARDWARE:
        raise CatalogError(f"{name}: anchor_hardware must be \"NVIDIA H20\", \"CPU lane\" or null")
    return desc.strip(), entry["anchor_hardware"]


def build(index: dict[str, Any], catalog: dict[str, Any],
          descriptions: dict[str, dict[str, Any]], repo_root: Path) -> dict[str, Any]:
    if index.get("schema") != EXPECTED_INDEX_SCHEMA:
        raise CatalogError(f"index schema is {index.get('schema')!r}, expected {EXPECTED_INDEX_SCHEMA!r}")
    if catalog.get("schema") != EXPECTED_CATALOG_SCHEMA:
        raise CatalogError(f"catalog schema is {catalog.get('schema')!r}, expected {EXPECTED_CATALOG_SCHEMA!r}")

    idx = keyed(index["tasks"], "task", "index")
    cat = keyed(catalog["tasks"], "task_dir", "catalog")
    if idx.keys() != cat.keys():
        raise CatalogError(
            "seed files disagree on the task set: "
            f"only in index: [{names(idx.keys() - cat.keys())}]; "
            f"only in catalog: [{names(cat.keys() - idx.keys())}]")

    wanted = {f"{b}/{d}" for b, d in idx}
    if missing := sorted(wanted - descriptions.keys()):
        raise CatalogError(f"no description for {len(missing)} task(s): {', '.join(missing)}")
    if extra := sorted(descriptions.keys() - wanted):
        raise CatalogError(f"description(s) for unknown task(s): {', '.join(extra)}")

    tasks: list[dict[str, Any]] = []
    for bench, task_dir in sorted(idx):
        i, c = idx[(bench, task_dir)], cat[(bench, task_dir)]
        name = f"{bench}/{task_dir}"
        for field in SHARED_FIELDS:
            if i[field] != c[field]:
                raise CatalogError(f"{name}: seed files disagree on {field} ({i[field]!r} vs {c[field]!r})")
        layout = i["layout"]
        if layout not in LAYOUTS:
            raise CatalogError(f"{name}: unknown layout {layout!r}")
        package_root = i["package_root"]
        if package_root != expected_package_root(bench, task_dir, layout):
            raise CatalogError(f"{name}: package_root {package_root!r} does not match layout {layout!r}")
        description, anchor_hardware = check_description(name, descriptions[name], c["summary"])

        tasks.append({
            "name": name,
            "bench": bench,
            "dir": task_dir,
            "package_root": package_root,
            "layout": layout,
            "infra_name": c["infra_name"],
            "reward_class": i["reward_class"],
            "task_kind": i["task_kind"],
            "gpus": i["gpus"],
            "min_submissions": i["min_submissions"],
            "max_submissions": i["max_submissions"],
            "ref_speedup": i["ref_speedup"],
            "anchor_hardware": anchor_hardware,
            "scope": list(i["primary_edit_paths"]),
            "has_oracle": bool(i["has_oracle"]),
            "description": description,
            "bundled": (repo_root / package_root / "task.toml").is_file(),
        })

    seen: dict[str, str] = {}
    for t in tasks:
        if (other := seen.setdefault(t["description"], t["name"])) != t["name"]:
            raise CatalogError(f"{t['name']} and {other} share the same description")

    return {"schema": SCHEMA, "source": SOURCE, "task_count": len(tasks), "tasks": tasks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=DEFAULT_INDEX, help="fai_bench_tasks_index.json")
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG, help="fai_bench_task_catalog.json")
    parser.add_argument("--descriptions", type=Path, default=DEFAULT_DESCRIPTIONS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    try:
        result = build(load_json(args.index), load_json(args.catalog),
                       load_descriptions(args.descriptions), REPO_ROOT)
    except CatalogError as e:
        print(f"build_catalog: error: {e}", file=sys.stderr)
        return 1
    except KeyError as e:
        print(f"build_catalog: error: a seed task entry lacks field {e}", file=sys.stderr)
        return 1

    text = json.dumps(result, indent=1, ensure_ascii=False) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    bundled = [t["name"] for t in result["tasks"] if t["bundled"]]
    print(f"wrote {args.out} ({result['task_count']} tasks, {len(bundled)} bundled"
          + (f": {', '.join(bundled)}" if bundled else "") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
