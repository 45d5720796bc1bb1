"""`pesflow tasks check` classifies each package with evidence, resumes where it stopped, and
writes its table; toy packages broken on purpose stand for the benchmark's defects."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.config import EvaluatorConfig, LocalConfig, TrustConfig
from evaluator.evaluation import Evaluator
from evaluator.hardware import gpu_available
from evaluator.package_check import run_checks
from evaluator.task import load_task
from tests.conftest import REPO, needs_root, toy_tasks_root

pytestmark = [needs_root, pytest.mark.slow]
ORACLE_TRACE_SPEEDUP = "1001.25"  # the toy's oracle on its deterministic metric


def variants(root: Path) -> dict[str, Path]:
    """kfc/<name> packages: a sound one, and one broken in each way the benchmark's are."""
    made = {}
    for name in ("sound", "far-anchor", "no-baseline", "scoring-negative", "gpu"):
        pkg = toy_tasks_root(root, f"toy-{name}")
        (pkg / "tests/ref_speedup.txt").write_text(ORACLE_TRACE_SPEEDUP + "\n")
        made[name] = pkg
    (made["far-anchor"] / "tests/ref_speedup.txt").write_text("3.0\n")  # measured on other hardware
    df = made["no-baseline"] / "environment/Dockerfile"  # the frozen baseline never baked
    df.write_text(df.read_text().replace("RUN mkdir -p /opt/verifier-baseline && cp /app/repo/toy/kernel.py "
                                         "/opt/verifier-baseline/kernel.py\n", ""))
    shutil.copyfile(made["scoring-negative"] / "solution/oracle.patch", made["scoring-negative"] / "solution/negative.patch")
    (made["scoring-negative"] / "tests/ref_speedup.txt").write_text("900\n")  # the oracle (and the negative) beat it
    toml = made["gpu"] / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 0", "gpus = 1"))
    return made


def test_each_package_gets_its_class_with_evidence_and_a_stopped_check_resumes(tmp_path, cache_dir):
    root = tmp_path / "tasks"
    made = variants(root)
    # the classes alone: a traced-events metric counts the trust guard's watcher in the first calls
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir)), trust=TrustConfig(enabled=False)),
                   tasks_roots=[root], log_root=tmp_path / "g")
    tasks = [load_task(f"kfc/toy-{n}", [root]) for n in made]
    seen: list[tuple[str, bool]] = []
    checks = run_checks(ev, tasks, ("hidden",), tmp_path / "out", on_done=lambda c, reused: seen.append((c.task, reused)))
    got = {c.task.split("/")[1].removeprefix("toy-"): c for c in checks}
    assert got["sound"].klass == "ok" and got["sound"].oracle_over_anchor == pytest.approx(1.0)
    assert got["far-anchor"].klass == "anchor_differs" and "anchor 3" in got["far-anchor"].evidence
    assert got["no-baseline"].klass == "package_defect" and "noop and oracle fail the same way" in got["no-baseline"].evidence
    assert got["scoring-negative"].klass == "package_defect" and "negative scores" in got["scoring-negative"].evidence
    assert got["gpu"].klass == ("needs_gpu" if not gpu_available() else got["gpu"].klass)
    assert got["sound"].environment["kind"] == "stand-in" and got["sound"].official is False
    md = (tmp_path / "out/tasks-check.md").read_text()
    assert "| kfc/toy-sound | ok |" in md and "| anchor_differs | 1 |" in md
    assert len(json.loads((tmp_path / "out/tasks-check.json").read_text())) == 5
    # stopped after two packages: the next check keeps them and grades the rest
    lines = (tmp_path / "out/results.jsonl").read_text().splitlines()
    (tmp_path / "out/results.jsonl").write_text("\n".join(lines[:2]) + "\n{torn line")
    seen.clear()
    graded = sorted(tmp_path.glob("g/*/*/*"))
    # ... and its finished gradings too: the last one's record torn, only that one is graded again
    kept = (tmp_path / "out/gradings.jsonl").read_text().splitlines()
    assert len(kept) == len(graded)
    (tmp_path / "out/gradings.jsonl").write_text("\n".join(kept[:-1]) + "\n{torn")
    again = run_checks(ev, tasks, ("hidden",), tmp_path / "out", on_done=lambda c, reused: seen.append((c.task, reused)))
    assert [r for _, r in seen] == [True, True, False, False, False]
    assert [c.klass for c in again] == [c.klass for c in checks]
    # the kept gradings come back as they were (timings included); only the torn one differs
    torn = next(i for i, c in enumerate(checks) if c.key == json.loads(kept[-1])["key"])
    assert [c.results for i, c in enumerate(again) if i != torn] == [c.results for i, c in enumerate(checks) if i != torn]
    assert again[torn].results[:-1] == checks[torn].results[:-1]
    # graded again, not kept: a new grading folder (its time may round to the same figure)
    regraded = sorted(set(tmp_path.glob("g/*/*/*")) - set(graded))
    assert len(regraded) == 1 and regraded[0].parent.name == checks[torn].task.split("/")[1], regraded
    ev.close()


def test_the_command_prints_one_line_per_package_and_no_traceback(tmp_path, cache_dir):
    root = tmp_path / "tasks"
    toy_tasks_root(root, "toy-sound")
    r = subprocess.run([sys.executable, "-m", "agent.cli", "tasks", "check", "kfc/toy-sound", "kfc/no-such-task",
                        "--tasks-root", str(root), "--out", str(tmp_path / "out"),
                        "--set", f"evaluator.local.cache_dir={cache_dir}"], cwd=REPO, capture_output=True, text=True, timeout=600)
    # the name that is no package is bad input (exit 2, named in one line); the others are still checked
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "kfc/no-such-task" in r.stderr and "kfc/toy-sound: anchor_differs" in r.stderr
    assert "not checked (bad input, named above): kfc/no-such-task" in r.stderr
    assert (tmp_path / "out/tasks-check.md").is_file() and "anchor_differs 1" in r.stdout

