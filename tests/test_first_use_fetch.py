"""The mission's command as a newcomer meets it (issue 49, item 8).

First use: a command that resolves a catalog name fetches the pinned benchmark into pesflow's
cache (benchmark.fetch_on_first_use), and falls back to the bundled re-creation only where it
cannot, in one line on stderr, a failure remembered for benchmark.fetch_retry_hours. A local git
repository laid out like the benchmark stands in for the public one. Each command here is a real
`pesflow evaluate` whose candidate touches a path outside the scope: refused before anything is
prepared or graded, its verdict still names the package it resolved to.

No GPU: `pesflow run` on a GPU task names only commands the parsers accept, as does every
`pesflow ...` a message of agent/ or evaluator/ shows.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cliargs import build_parser, flags_of, walk
from tests.conftest import REPO
from tests.test_readme import check

ROUTER = "kfc/wre-router-power-of-two-choices-loop16"  # a catalog name with a bundled re-creation (no GPU)
SSM = "kfc/ssm-selective-scan-firstorder"  # the mission's task: a GPU package
OUTSIDE = "--- a/outside.txt\n+++ b/outside.txt\n@@ -0,0 +1 @@\n+x\n"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def make_benchmark(src: Path) -> str:
    """A git repository holding tasks/<ROUTER> (a copy of the bundled package); its commit."""
    shutil.copytree(REPO / "tasks" / ROUTER, src / "tasks" / ROUTER)
    git("init", "-q", "-b", "main", cwd=src)
    git("add", "-A", cwd=src)
    git("commit", "-qm", "bench", cwd=src)
    return git("rev-parse", "HEAD", cwd=src)


@pytest.fixture
def home(tmp_path) -> Path:
    """A cache of this test's own: nothing fetched, no failure remembered (unlike the suite's)."""
    return tmp_path / "pesflow-home"


def evaluate(tmp_path: Path, home: Path, url: Path, *extra: str, name: str = ROUTER, ref: str = "main",
             env: dict | None = None, rc: int = 1) -> tuple[subprocess.CompletedProcess, dict | None]:
    """`pesflow evaluate NAME` with benchmark.url=`url`: the process and its verdict (None: exit 2)."""
    diff = tmp_path / "outside.diff"
    diff.write_text(OUTSIDE)
    out = tmp_path / f"logs-{len(list(tmp_path.glob('logs-*')))}"
    r = subprocess.run([sys.executable, "-m", "agent.cli", "evaluate", name, "--candidate", str(diff), "--json",
                        "--out", str(out), "--set", f"benchmark.url={url}", "--set", f"benchmark.ref={ref}",
                        "--set", f"benchmark.dir={tmp_path / 'checkout'}",
                        "--set", f"evaluator.local.cache_dir={tmp_path / 'cache'}", *extra],
                       cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PESFLOW_CACHE_HOME": str(home), **(env or {})})
    assert r.returncode == rc, r.stderr  # 1: scope_violation, refused before anything ran
    return r, json.loads(r.stdout) if rc == 1 else None


def test_first_use_fetches_the_pinned_benchmark_and_resolves_there(tmp_path, home):
    src = tmp_path / "bench"
    commit = make_benchmark(src)
    r, v = evaluate(tmp_path, home, src, ref=commit)
    assert v["package"]["official"] is True and v["package"]["commit"] == commit, r.stderr
    assert v["package"]["path"] == str(tmp_path / "checkout" / "tasks" / ROUTER / "task")
    assert r.stderr.strip().splitlines() == [f"pesflow: fetching the pinned benchmark ({src} at {commit[:12]}) into "
                                             f"{tmp_path / 'checkout'}, once (benchmark.fetch_on_first_use)"]
    assert json.loads((home / "benchmark.json").read_text())["commit"] == commit
    r, v = evaluate(tmp_path, home, src, ref=commit)  # fetched: the next command just uses it
    assert v["package"]["official"] is True and r.stderr == ""


def test_unreachable_falls_back_in_one_line_and_is_not_retried_within_the_interval(tmp_path, home):
    src = tmp_path / "bench"  # nothing there yet: unreachable
    r, v = evaluate(tmp_path, home, src)
    assert v["package"]["official"] is False and v["package"]["repo"] == "pesflow (bundled re-creation)"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "re-creation" in lines[0] and "fetching the benchmark failed" in lines[0] and "ls-remote" in lines[0]
    assert "not tried again before" in lines[0] and "benchmark.fetch_retry_hours" in lines[0]
    assert "`pesflow tasks fetch` tries now" in lines[0]
    failed = json.loads((home / "benchmark-fetch-failed.json").read_text())
    make_benchmark(src)  # reachable now; within the interval no command tries again
    r, v = evaluate(tmp_path, home, src)
    assert v["package"]["official"] is False and len(r.stderr.strip().splitlines()) == 1
    assert json.loads((home / "benchmark-fetch-failed.json").read_text()) == failed
    assert not (home / "benchmark.json").exists()


def test_after_the_interval_the_next_command_tries_again(tmp_path, home):
    src = tmp_path / "bench"
    r, v = evaluate(tmp_path, home, src, "--set", "benchmark.fetch_retry_hours=0")
    assert v["package"]["official"] is False and "fetching the benchmark failed" not in r.stderr  # 0: not remembered
    make_benchmark(src)
    r, v = evaluate(tmp_path, home, src, "--set", "benchmark.fetch_retry_hours=0")
    assert v["package"]["official"] is True, r.stderr
    assert not (home / "benchmark-fetch-failed.json").exists()  # fetched: the failure is forgotten


@pytest.mark.parametrize("how", ["--tasks-root", "PESFLOW_TASKS_PATH", "folder", "knob off", "not in the catalog"])
def test_no_fetch_for_a_name_the_user_placed_or_with_the_knob_off(tmp_path, home, how):
    src = tmp_path / "bench"
    make_benchmark(src)  # reachable: only the rules keep the command off it
    name, extra, env, rc = ROUTER, [], {}, 1
    if how == "--tasks-root":
        extra = ["--tasks-root", str(REPO / "tasks")]
    elif how == "PESFLOW_TASKS_PATH":
        env = {"PESFLOW_TASKS_PATH": str(REPO / "tasks")}
    elif how == "folder":
        name = str(REPO / "tasks" / ROUTER / "task")
    elif how == "knob off":
        extra = ["--set", "benchmark.fetch_on_first_use=false"]
    else:
        name, rc = "kfc/no-such-task", 2  # a misspelt name is no reason to reach the network
    r, v = evaluate(tmp_path, home, src, *extra, name=name, env=env, rc=rc)
    assert (v["package"]["official"] is False) if v else "not found" in r.stderr
    assert "fetching" not in r.stderr
    assert not (home / "benchmark.json").exists() and not (home / "benchmark-fetch-failed.json").exists()
    assert not (tmp_path / "checkout").exists()


def test_the_suite_itself_never_fetches(tmp_path):
    """tests/conftest.py's cache holds a failure remembered past the session: a catalog name
    resolves to the bundled re-creation at once, with the default benchmark.url."""
    from evaluator.benchmark import fetch_failure

    assert "the test suite never fetches" in fetch_failure()["why"]
    diff = tmp_path / "outside.diff"
    diff.write_text(OUTSIDE)
    r = subprocess.run([sys.executable, "-m", "agent.cli", "evaluate", ROUTER, "--candidate", str(diff), "--json",
                        "--out", str(tmp_path / "logs"), "--set", f"evaluator.local.cache_dir={tmp_path / 'cache'}"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert json.loads(r.stdout)["package"]["official"] is False and "the test suite never fetches" in r.stderr


# ------------------------------------------------------------------ no GPU: what `run` says


def suggested(message: str) -> list[list[str]]:
    """The `pesflow ...` command lines a message shows in backticks, as argument lists (a bare
    `pesflow run` names a command, it suggests no command line)."""
    argvs = [shlex.split(span)[1:] for span in re.findall(r"`(pesflow [^`]+)`", message)]
    return [a for a in argvs if " ".join(a) not in walk()]


def test_run_of_a_gpu_task_without_a_gpu_names_commands_the_parsers_accept(tmp_path, monkeypatch, capsys):
    import agent.cli

    monkeypatch.setattr(agent.cli, "gpu_available", lambda: False)  # as on the machines CI and newcomers have
    assert agent.cli.main(["run", SSM, "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a GPU" in err[0] and "`pesflow run` has no --device" in err[0]
    cmds = suggested(err[0])
    assert ["evaluate", SSM, "--device", "cpu", "--candidate", "PATCH"] in cmds
    assert ["run", SSM, "--backend", "modal"] in cmds
    for argv in cmds:
        build_parser().parse_args(argv)  # a suggestion the parser refuses would exit 2 here
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_the_device_advice_of_every_command_names_commands_that_take_it(monkeypatch):
    from evaluator import device
    from evaluator.task import TaskError, load_task

    monkeypatch.setattr(device, "gpu_available", lambda: False)
    with pytest.raises(TaskError) as e:
        device.check_device(load_task(SSM, [REPO / "tasks"]), None)
    said = str(e.value)
    named = re.findall(r"`pesflow ([a-z ]+)`", said)
    assert "--device cpu" in said and {"evaluate", "tasks check"} <= set(named)
    for cmd in named:  # every command named beside --device takes it, but `run`, named as the one that does not
        assert ("--device" in flags_of(walk()[cmd])) == (cmd != "run"), cmd


def strings_of(path: Path) -> list[str]:
    """Every string literal of a module, f-strings with their fields as `{x}`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values))
    return out


def test_every_pesflow_command_a_message_shows_is_the_parsers():
    """The README's own check (tests/test_readme.py) over every string of agent/ and evaluator/."""
    problems, seen = [], 0
    for path in sorted([*(REPO / "agent").rglob("*.py"), *(REPO / "evaluator").rglob("*.py")]):
        for text in strings_of(path):
            if "`pesflow " in text:
                seen += 1
                problems += [f"{path.relative_to(REPO)}: {p}" for p in check(text)]
    assert seen > 20 and problems == []
    assert check("retry: `pesflow run TASK --device cpu`")  # the check does catch a flag the command lacks
