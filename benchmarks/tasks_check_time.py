"""What `pesflow tasks check` costs over the benchmark's CPU packages here: first (an empty
cache: every package prepared from its Dockerfile, installs included where the network
allows) and warm (the prepared layers reused; only the gradings), in one run.

    python3 benchmarks/tasks_check_time.py --tasks-root ~/LLM-Infra-Bench-faibench/tasks [--tasks kfc/... ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cpu_packages(root: str) -> list[str]:
    out = []
    for toml in sorted(Path(root).glob("*/*/task/task.toml")) + sorted(Path(root).glob("lh/*/task.toml")):
        pkg = toml.parent.parent if toml.parent.name == "task" else toml.parent
        if not any(ln.replace(" ", "").startswith("gpus=") and ln.replace(" ", "") != "gpus=0"
                   for ln in toml.read_text().splitlines()):
            out.append(f"{pkg.parent.name}/{pkg.name}")
    return out


def check(names: list[str], root: str, cache: Path, out: Path) -> tuple[float, dict[str, int]]:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "agent.cli", "tasks", "check", *names, "--tasks-root", root, "--out", str(out),
                    "--set", f"evaluator.local.cache_dir={cache}"], cwd=REPO, check=True, capture_output=True, text=True)
    counts: dict[str, int] = {}
    for c in json.loads((out / "tasks-check.json").read_text()):
        counts[c["klass"]] = counts.get(c["klass"], 0) + 1
    return time.monotonic() - t0, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks-root", required=True)
    ap.add_argument("--tasks", nargs="*", help="default: every CPU package under the root")
    args = ap.parse_args()
    names = args.tasks or cpu_packages(args.tasks_root)
    with tempfile.TemporaryDirectory(prefix="pesflow-checktime-") as tmp:
        cache = Path(tmp) / "cache"
        first, c1 = check(names, args.tasks_root, cache, Path(tmp) / "first")
        warm, c2 = check(names, args.tasks_root, cache, Path(tmp) / "warm")
    print(f"pesflow tasks check over {len(names)} CPU packages")
    print(f"  first (empty cache): {first:8.1f} s  {c1}")
    print(f"  warm (layers kept):  {warm:8.1f} s  {c2}")
    print(f"  preparing cost {first - warm:.1f} s of the first run ({(first - warm) / max(first, 1e-9):.0%})")


if __name__ == "__main__":
    main()
