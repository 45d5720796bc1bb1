"""The command line as a user meets it: a subprocess, its stdout, its stderr, its exit code."""

import json
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, needs_root

VERDICT_KEYS = {"task", "mode", "backend", "grader", "status", "reward", "speedup", "ref_speedup",
                "hard_fail_reasons", "tests", "hardware", "seconds", "log_dir"}


def pesflow(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, timeout=300, **kw)


@needs_root
def test_evaluate_json_is_one_object_with_the_promised_keys(cache_dir, tmp_path):
    r = pesflow("evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--mode", "oracle", "--grader", "hidden",
                "--json", "--out", str(tmp_path / "out"), "--set", f"evaluator.local.cache_dir={cache_dir}")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert VERDICT_KEYS <= set(v) and v["status"] == "ok" and v["tests"] == {"passed": 5, "total": 5}
    assert (tmp_path / "out" / "verdict.json").is_file()


@needs_root
def test_negative_exits_1_and_names_the_reason(cache_dir):
    r = pesflow("evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--mode", "negative", "--json",
                "--set", f"evaluator.local.cache_dir={cache_dir}")
    assert r.returncode == 1 and json.loads(r.stdout)["hard_fail_reasons"] == ["correctness_failed"]


@pytest.mark.parametrize("args, needle", [
    (["evaluate", "kfc/no-such-task"], "not found"),
    (["evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--set", "evaluator.nope=1"], "evaluator.nope"),
    (["evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--mode", "noop", "--candidate", "x.diff"], "--mode candidate"),
])
def test_bad_input_is_one_line_on_stderr_and_exit_2(args, needle):
    r = pesflow(*args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_tasks_lists_all_85_and_where_each_is(tmp_path):
    r = pesflow("tasks", "--json", "--tasks-root", str(FIXTURES))
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    names = {row["name"] for row in rows}
    assert len([row for row in rows if row.get("description") != "(not in the catalog)"]) == 85
    assert "kfc/toy-sum" in names  # a package the catalog lacks is listed too, with its place
    bundled = {row["name"] for row in rows if row["bundled"]}
    for name in ("kfc/wre-router-power-of-two-choices-loop16", "kfc/wro-sbert-paraphrase-mining-loop16",
                 "lh/wro-vllm-v1-priority-request-queue"):
        assert name in bundled
        assert next(row for row in rows if row["name"] == name)["location"]
    human = pesflow("tasks")
    assert human.returncode == 0 and "wro-vllm-v1-priority-request-queue" in human.stdout
