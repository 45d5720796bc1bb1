"""One meaning for every verdict field: a dev engine's own figure is kept raw with its kind;
`speedup` is over the baseline and `reward` the benchmark's formula, whatever the engine wrote.
And the reviewer's modes as each package dispatches them."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.candidate import CandidateSource
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import Evaluator
from evaluator.modes import artifacts, mode_variables, request, self_dispatched
from evaluator.scoring import benchmark_reward, dev_figure, speedup_from_dev
from evaluator.task import load_task
from evaluator.verdict import Status, from_reward_json, with_engine_state
from tests.conftest import REPO, needs_root, toy_tasks_root
from tests.llm_server import ScriptedLLMServer


def test_dev_figure_kinds_from_the_baselines_own_figure():
    assert dev_figure({"speedup": 3.0}, {"speedup": 1.02}).kind == "vs_baseline"
    vs_oracle = dev_figure({"speedup": 0.9, "reward": 0.9}, {"speedup": 0.3})
    assert vs_oracle.kind == "vs_oracle" and vs_oracle.key == "speedup" and speedup_from_dev(vs_oracle) == pytest.approx(3.0)
    proxy = dev_figure({"dev_score": 440.0, "dev_metric": "GB/s"}, {"dev_score": 110.0})
    assert proxy.kind == "absolute:GB/s" and speedup_from_dev(proxy) == pytest.approx(4.0)
    broken_baseline = dev_figure({"speedup": 1.01}, {"speedup": 0.0})  # a stub baseline the engine scores 0
    assert broken_baseline.kind == "vs_oracle" and speedup_from_dev(broken_baseline) is None
    assert dev_figure({"reward": 2.0}, None).kind == "unknown"


def test_the_benchmarks_reward_formula():
    assert benchmark_reward(4.0, 4.0, True, False) == 0.0  # tying the anchor scores 0
    assert benchmark_reward(8.0, 4.0, True, False) == pytest.approx(0.5)  # ref ** 1.5
    assert benchmark_reward(64.0, 4.0, True, False) == 1.0  # capped
    assert benchmark_reward(8.0, 4.0, False, False) == 0.0 and benchmark_reward(None, 4.0, True, False) == 0.0
    assert benchmark_reward(None, None, True, True) == 1.0 and benchmark_reward(2.0, 1.0, True, False) == 0.0
    assert math.isclose(benchmark_reward(3.0, 2.0, True, False), math.log(1.5) / math.log(2.0))


def private_evaluator(tmp_path: Path, cache_dir: Path) -> Evaluator:
    """An evaluator over the private packages under tmp_path/tasks (the session's prepared cache)."""
    return Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[tmp_path / "tasks"],
                     log_root=tmp_path / "logs")


def vs_oracle_toy(root: Path) -> Path:
    """The toy whose dev engine reports the reference's time over the candidate's (its baseline
    about 0.02), and writes that figure as its `reward` too, as the benchmark's wre engines do."""
    pkg = toy_tasks_root(root)
    grade = pkg / "environment/loop/private/dev_tests/grade.py"
    text = grade.read_text()
    text = text.replace('out = {"mode": mode, "reward": reward, "speedup": round(speedup, 4),',
                        'out = {"mode": mode, "reward": round(speedup / 50, 6), "speedup": round(speedup / 50, 6),')
    assert "speedup / 50" in text
    grade.write_text(text)
    return pkg


def test_the_gates_a_dev_engine_writes_beside_its_reward_are_read_and_only_add():
    def verdict(raw):
        return from_reward_json(raw, task="t", mode="candidate", backend="local", grader="dev")

    bare = {"reward": 0.0, "speedup": 0.0}
    assert with_engine_state(bare, None) is bare
    assert verdict(with_engine_state(bare, {"correctness_ok": False, "hard_fail_reasons": ["correctness_failed"],
                                            "gates": {"correctness_ok": False}})).hard_fail_reasons == ["correctness_failed"]
    assert verdict(with_engine_state(bare, {"correctness_ok": False})).hard_fail_reasons == ["correctness_failed"]
    assert verdict(with_engine_state(bare, {"gates": {"correctness_ok": False}})).hard_fail_reasons == ["correctness_failed"]
    # speed alone: named as the engine named it, so the candidate stays correct
    slow = verdict(with_engine_state({"reward": 0.0, "speedup": 0.97},
                                     {"correctness_ok": False, "hard_fail_reasons": ["speedup_not_above_baseline"]}))
    assert slow.status == Status.hard_fail and slow.correct and slow.hard_fail_reasons == ["speedup_not_above_baseline"]
    # a state file never takes a reason away, nor passes what reward.json fails
    kept = with_engine_state({"reward": 0.0, "hard_fails": ["import_failed"]}, {"correctness_ok": True, "hard_fail_reasons": []})
    assert verdict(kept).hard_fail_reasons == ["import_failed"]
    assert with_engine_state({"reward": 1.0}, {"correctness_ok": True, "hard_fail_reasons": []}) == {"reward": 1.0}


def split_state_toy(root: Path) -> Path:
    """The toy whose dev engine writes as the benchmark's score_engine.sh normalizes a verifier's
    verdict: reward.json holds reward and speedup alone, the gates go to verifier_state.json."""
    pkg = toy_tasks_root(root)
    grade = pkg / "environment/loop/private/dev_tests/grade.py"
    text = grade.read_text()
    old = 'json.dump(out, open(os.path.join(log, "reward.json"), "w"))'
    assert old in text
    grade.write_text(text.replace(old, (
        'json.dump({"correctness_ok": not hard, "hard_fail_reasons": hard, "gates": {"correctness_ok": "correctness_failed" not in hard}}, '
        'open(os.path.join(log, "verifier_state.json"), "w"))\n'
        'json.dump({"reward": reward, "speedup": round(speedup, 4)}, open(os.path.join(log, "reward.json"), "w"))')))
    return pkg


@needs_root
def test_a_wrong_candidate_fails_where_the_dev_engine_keeps_its_gates_beside_reward_json(tmp_path, cache_dir):
    # Found on the benchmark: 28 packages' dev engines write so; the negative, and a child that
    # does not import, were `ok` with a speedup of 0 (the package's own loop said FAIL)
    split_state_toy(tmp_path / "tasks")
    ev = private_evaluator(tmp_path, cache_dir)
    negative = ev.evaluate("kfc/toy-sum", mode="negative", grader="dev")
    assert negative.status == Status.hard_fail and not negative.correct, (negative.status, negative.hard_fail_reasons)
    assert negative.hard_fail_reasons == ["correctness_failed"] and negative.reward == 0.0
    broken = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": "def sum_squares(n:\n"}), grader="dev")
    assert not broken.correct and "import_failed" in broken.hard_fail_reasons, (broken.status, broken.hard_fail_reasons)
    oracle = ev.evaluate("kfc/toy-sum", mode="oracle", grader="dev")
    assert oracle.status == Status.ok and oracle.correct and oracle.speedup > 1, (oracle.status, oracle.hard_fail_reasons)


@needs_root
def test_a_vs_oracle_dev_engine_is_named_and_turned_into_speedup_over_the_baseline(tmp_path, cache_dir):
    vs_oracle_toy(tmp_path / "tasks")
    ev = private_evaluator(tmp_path, cache_dir)
    noop = ev.evaluate("kfc/toy-sum", mode="noop", grader="dev")
    oracle = ev.evaluate("kfc/toy-sum", mode="oracle", grader="dev")
    hidden = ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")
    assert noop.dev.kind == "vs_oracle" and noop.speedup == pytest.approx(1.0) and noop.reward == 0.0
    assert oracle.dev.kind == "vs_oracle" and oracle.dev.value == pytest.approx(hidden.speedup / 50, rel=1e-3)
    assert oracle.speedup == pytest.approx(hidden.speedup, rel=1e-3)  # over the baseline, as the hidden grader says
    assert oracle.reward == pytest.approx(hidden.reward)  # the benchmark's formula, not the engine's "reward"
    assert oracle.raw["reward"] == oracle.dev.value  # the engine's own number stays raw


@needs_root
def test_a_search_on_a_vs_oracle_package_finds_the_reference_and_names_the_figure(tmp_path, cache_dir, monkeypatch):
    from tests.test_leak_guard import engineer
    from tests.test_loop import config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    from agent.search.session import start_run

    vs_oracle_toy(tmp_path / "tasks")
    with ScriptedLLMServer(engineer) as server:
        run_dir, status = start_run(config(tmp_path, cache_dir, server, **{"loop.rounds": 1}), "kfc/toy-sum",
                                    [str(tmp_path / "tasks")])
    run = json.loads((run_dir / "run.json").read_text())
    assert status == "finished" and run["best"]["id"] == "r01-c0" and run["best"]["dev_speedup"] > 100
    verdict = json.loads((run_dir / "rounds/01/executor/r01-c0/verdict.json").read_text())
    assert verdict["dev"]["kind"] == "vs_oracle" and verdict["speedup"] > 100


def test_modes_follow_the_packages_own_dispatch(toy_package):
    t = load_task(str(toy_package))
    assert [p.name for p in artifacts(t, "oracle")] == ["oracle.patch"] and mode_variables(t) == ["KERNELBENCH_VERIFY_MODE"]
    hidden = request(t, "oracle", "hidden", None)
    assert hidden.env["KERNELBENCH_ORACLE_PATCH"] == "/.pesflow-reviewer/oracle.patch" and hidden.source is None
    dev = request(t, "oracle", "dev", None)
    assert dev.source is not None and dev.env["KERNELBENCH_VERIFY_MODE"] == "candidate"
    # a grader that keeps its reference in tests/ and reads its mode from a variable of its own
    (toy_package / "solution/oracle.patch").unlink()
    sh = toy_package / "tests/test.sh"
    text = sh.read_text().replace('MODE="${KERNELBENCH_VERIFY_MODE:-candidate}"', 'MODE="${1:-${WRE_MODE:-candidate}}"')
    sh.write_text(text.replace('oracle) git apply "$KERNELBENCH_ORACLE_PATCH"', 'oracle) cp "$HERE/oracle_kernel.py" toy/kernel.py'))
    t = load_task(str(toy_package))
    assert mode_variables(t) == ["KERNELBENCH_VERIFY_MODE", "WRE_MODE"] and self_dispatched(t, "oracle")
    r = request(t, "oracle", "hidden", None)
    assert r.env == {"KERNELBENCH_VERIFY_MODE": "oracle", "WRE_MODE": "oracle"} and "held in tests/" in r.artifact
    from evaluator.modes import PackageLacks

    with pytest.raises(PackageLacks, match="only the hidden grader sees"):
        request(t, "oracle", "dev", None)


def test_a_search_without_a_dev_engine_is_refused_at_start_in_one_line(toy_package, tmp_path):
    shutil.rmtree(toy_package / "environment/loop")
    r = subprocess.run([sys.executable, "-m", "agent.cli", "run", str(toy_package), "--llm", "openai:m", "--out", str(tmp_path / "runs")],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "no dev engine" in r.stderr and "--grader hidden" in r.stderr and not (tmp_path / "runs").exists()


def test_a_reference_named_after_the_one_scope_file_is_the_oracle_and_its_negative(toy_package):
    """e2e packages ship solution/<scope file's name> and <stem>_negative<suffix>, taken by path."""
    (toy_package / "solution/oracle.patch").unlink()
    (toy_package / "solution/negative.patch").unlink()
    (toy_package / "solution/kernel.py").write_text("def sum_squares(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n")
    (toy_package / "solution/kernel_negative.py").write_text("def sum_squares(n):\n    return 0\n")
    t = load_task(str(toy_package))
    assert [p.name for p in artifacts(t, "oracle")] == ["kernel.py"]
    assert [p.name for p in artifacts(t, "negative")] == ["kernel_negative.py"]
    hidden = request(t, "oracle", "hidden", None)
    assert hidden.env["KERNELBENCH_ORACLE_FILE"] == "/.pesflow-reviewer/kernel.py" and hidden.artifact == "solution/kernel.py"
    dev = request(t, "negative", "dev", None)
    assert dev.source.files == {"toy/kernel.py": "def sum_squares(n):\n    return 0\n"}


@needs_root
def test_the_dev_reference_is_a_stage_graded_once_before_the_candidates(tmp_path, cache_dir):
    """One worker, two dev gradings of candidates asked at once and no reference yet: the unchanged
    code is graded once, before either candidate's grading takes the worker (none waits on another
    while it holds its sandbox), and both candidates' figures are over it."""
    import threading

    toy_tasks_root(tmp_path / "tasks")
    ev = Evaluator(EvaluatorConfig(workers=1, local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[tmp_path / "tasks"],
                   log_root=tmp_path / "logs")
    asked: list[tuple[str, bool]] = []
    grade = ev.backend.grade

    def spy(prepared, request):
        if request.trust is None:  # the official gradings (the screen watches gradings of its own)
            asked.append((request.grader, bool(request.files)))
        return grade(prepared, request)
    ev.backend.grade = spy
    fast = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
    out: dict[int, object] = {}

    def one(i: int) -> None:
        out[i] = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": fast + f"# {i}\n"}), grader="dev")
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
    finally:
        ev.close()
    assert not any(t.is_alive() for t in threads)
    dev = [files for grader, files in asked if grader == "dev"]
    assert dev[0] is False and dev.count(False) == 1 and dev.count(True) == 2, asked  # the reference first, once
    refs = list(ev.dev_reference_dir.glob("*.json"))
    assert len(refs) == 1 and json.loads((refs[0].with_suffix("") / "verdict.json").read_text())["mode"] == "noop"
    for v in out.values():
        assert v.status == Status.ok and v.dev is not None and v.speedup is not None and v.speedup > 1, (v.status, v.message)
