import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tasks"
REPO = Path(__file__).resolve().parent.parent

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="the local backend needs root and unshare"
)


@pytest.fixture(scope="session", autouse=True)
def no_benchmark_fetch(tmp_path_factory) -> Path:
    """The suite never reaches the network for the benchmark (evaluator/benchmark.py first_use):
    its own cache (PESFLOW_CACHE_HOME, inherited by every `pesflow` it starts), holding a fetch
    failure remembered past the session, so that catalog names resolve to the bundled
    re-creations at once, online or not, and never to a developer's own fetched checkout."""
    import json
    from datetime import datetime, timezone

    from agent.config import load_config

    home = tmp_path_factory.mktemp("pesflow-home")
    b = load_config().benchmark
    (home / "benchmark-fetch-failed.json").write_text(json.dumps(
        {"url": b.url, "ref": b.ref, "why": "the test suite never fetches (tests/conftest.py)",
         "tried": datetime.now(timezone.utc).isoformat(timespec="seconds"), "retry_after": "9999-01-01T00:00:00+00:00"}))
    os.environ["PESFLOW_CACHE_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    # One prepared-layer cache for the whole session: preparing is what is slow.
    return Path(os.environ.get("PESFLOW_TEST_CACHE") or tmp_path_factory.mktemp("pesflow-cache"))


@pytest.fixture(scope="session")
def evaluator(cache_dir, tmp_path_factory):
    from evaluator.config import EvaluatorConfig, LocalConfig
    from evaluator.evaluation import Evaluator

    cfg = EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir)))
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path_factory.mktemp("evaluations"))
    yield ev
    ev.close()


@pytest.fixture
def toy_package(tmp_path) -> Path:
    """A private copy of the toy package, to break or edit without touching the fixture."""
    dest = tmp_path / "tasks" / "kfc" / "toy-sum"
    shutil.copytree(FIXTURES / "kfc" / "toy-sum", dest)
    return dest / "task"


def toy_tasks_root(root: Path, name: str = "toy-sum") -> Path:
    """A private copy of the toy package at root/kfc/<name>/task whose graders (hidden and dev)
    measure a deterministic cost (traced Python events) instead of time: same code, same speedup,
    so whole searches can be compared exactly. Returns the package root."""
    pkg = root / "kfc" / name / "task"
    shutil.copytree(FIXTURES / "kfc" / "toy-sum" / "task", pkg)
    for d in ("tests", "environment/loop/private/dev_tests"):
        (pkg / d / "metric.txt").write_text("trace\n")
    return pkg


def scores_nothing(v) -> bool:
    """Reward 0; and when a gate says the grading was tampered with, no figures at all (speedup
    and reward null), so that no forged number can be shown anywhere."""
    from evaluator.trust.findings import untrusted_reasons

    if untrusted_reasons(v.hard_fail_reasons):
        return v.reward is None and v.speedup is None
    return v.reward == 0.0


def policy_gist(v) -> tuple:  # noqa: ANN001
    """What the one grading policy (evaluator/grading_policy.py) decides, as a user reads it: the
    status, the reasons it named (first, before the grader's own) and their sentences; a stray's
    pid and name are the machine's, so they are left out of the sentence."""
    import re

    from evaluator.grading_policy import WORDS

    said = {r: re.sub(r"\d+:\S+", "PID:NAME", text) for r, text in (v.raw.get("pesflow_limits") or {}).items()}
    named = [r for r in v.hard_fail_reasons if r in WORDS or r == "timeout"]
    return v.status, named, said, scores_nothing(v)


@pytest.fixture
def loopback_unproxied(monkeypatch):
    """A proxy in the developer's environment must not swallow the scripted server's loopback traffic."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def inside_module(name: str):
    """One of the scripts that run inside gradings (evaluator/trust/inside/), imported here as the
    sandbox imports it (its folder on sys.path): a fixture's generator."""
    import importlib
    import sys

    from evaluator.trust.instrument import INSIDE

    sys.path.insert(0, str(INSIDE))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(INSIDE))
