"""Where a package comes from: `pesflow tasks fetch` (a local git repository stands in for the
public one), the order roots are searched in, official vs re-created, and anchors of every shape."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.task import anchor_number, load_task, read_anchor
from tests.conftest import FIXTURES, REPO, needs_root

ROUTER = "kfc/wre-router-power-of-two-choices-loop16"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def remote(tmp_path) -> tuple[Path, str]:
    """A git repository laid out like the benchmark's, holding the toy and a copy of a bundled task."""
    src = tmp_path / "bench-src"
    shutil.copytree(FIXTURES / "kfc/toy-sum", src / "tasks/kfc/toy-sum")
    shutil.copytree(REPO / "tasks" / ROUTER, src / "tasks" / ROUTER)
    git("init", "-q", cwd=src)
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A", cwd=src)
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "bench", cwd=src)
    return src, git("rev-parse", "HEAD", cwd=src)


def cli(*args: str, env: dict, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict:
    import os

    home = tmp_path / "pesflow-home"
    monkeypatch.setenv("PESFLOW_CACHE_HOME", str(home))
    return {**os.environ, "PESFLOW_CACHE_HOME": str(home)}


def test_fetch_pins_a_commit_and_names_resolve_there_before_the_bundled_packages(remote, env, tmp_path):
    src, commit = remote
    dest = tmp_path / "checkout"
    r = cli("tasks", "fetch", "--dir", str(dest), "--ref", commit, "--set", f"benchmark.url={src}", env=env)
    assert r.returncode == 0, r.stderr
    assert commit[:12] in r.stdout and str(dest) in r.stdout
    assert git("rev-parse", "HEAD", cwd=dest) == commit
    rec = json.loads((tmp_path / "pesflow-home/benchmark.json").read_text())
    assert rec["commit"] == commit and rec["dir"] == str(dest)
    # a bundled name now resolves to the fetched official package, marked so
    t = load_task(ROUTER, official_url=str(src))
    assert t.root == dest / "tasks" / ROUTER / "task"
    assert t.source.official is True and t.source.commit == commit and t.source.repo == str(src)
    # an explicit root still wins
    assert load_task(ROUTER, [REPO / "tasks"], official_url=str(src)).source.official is False
    # a modified copy is not the official package any more
    (dest / "tasks" / ROUTER / "task/instruction.md").write_text("changed\n")
    from evaluator.benchmark import source_of

    source_of.cache_clear()
    t = load_task(ROUTER, official_url=str(src))
    assert t.source.official is False and "modified" in t.source.note


def test_fetch_failures_are_one_line(env, tmp_path):
    r = cli("tasks", "fetch", "--dir", str(tmp_path / "x"), "--set", f"benchmark.url={tmp_path / 'no-such-repo'}", env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "git clone failed" in r.stderr


def test_a_bundled_package_is_a_recreation_and_says_so(env):
    t = load_task(ROUTER)
    assert t.source.official is False and "re-creation" in (t.source.repo or "")


@needs_root
def test_verdicts_and_commands_name_the_source(remote, env, tmp_path, cache_dir):
    src, commit = remote
    assert cli("tasks", "fetch", "--dir", str(tmp_path / "co"), "--ref", commit, "--set", f"benchmark.url={src}", env=env).returncode == 0
    r = cli("evaluate", "kfc/toy-sum", "--mode", "noop", "--grader", "hidden", "--json", "--set", f"benchmark.url={src}",
            "--set", f"evaluator.local.cache_dir={cache_dir}", "--out", str(tmp_path / "logs"), env=env)
    v = json.loads(r.stdout.strip().splitlines()[-1])
    assert v["package"]["official"] is True and v["package"]["commit"] == commit
    assert v["environment"]["kind"] == "stand-in"
    # a bundled re-creation: one line on stderr says so
    r = cli("evaluate", ROUTER, "--mode", "noop", "--grader", "hidden", "--json", "--tasks-root", str(REPO / "tasks"),
            "--set", f"evaluator.local.cache_dir={cache_dir}", "--out", str(tmp_path / "logs2"), env=env)
    notes = [ln for ln in r.stderr.splitlines() if "re-creation" in ln]
    assert len(notes) == 1 and json.loads(r.stdout.strip().splitlines()[-1])["package"]["official"] is False


def test_anchors_of_every_shape(toy_package):
    assert anchor_number({"value": 2.58, "status": "calibrated", "metric": "x"}) == 2.58
    assert anchor_number("103.18\n") == 103.18 and anchor_number(None) is None and anchor_number({"status": "x"}) is None
    (toy_package / "tests/ref_speedup.txt").unlink()
    man = toy_package / "tests/verifier-correctness-manifest.json"
    for doc, want in (({"ref_speedup": {"value": 1.53, "metric": "tok/s"}}, 1.53),
                      ({"thresholds": {"ref_speedup": 1.23}}, 1.23), ({"reward_model": {"ref_speedup": 1.2}}, 1.2)):
        man.write_text(json.dumps(doc))
        t = load_task(str(toy_package))
        assert read_anchor(t.root, t.toml).value == want
