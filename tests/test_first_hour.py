"""A newcomer's first hour (issue 19): what the README promises, the program does.

Real `python3 -m agent.cli` processes on the tiny fixture package: options kept at whichever
level of `pesflow tasks` they are given, a backend's missing SDK said in one line, bad input of
every command one line and exit 2, `pesflow calibrate` writing only where the package reads its
anchor (and saying so on an official checkout), the verdict naming the calibrated anchor, and a
search whose dev engine gives no speedup shown on a scale a person can read.
(The disk-full and torn-journal runs are in tests/test_machine_faults.py.)
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agent.cli import main
from agent.cliargs import parse
from agent.experiments.figures import best_by_round_plot, dev_scale, method_colours
from agent.population.database import Solution
from agent.search.progress import Progress, best_entry, best_shown
from evaluator.calibrate import Calibration, _write, official_note
from evaluator.config import EvaluatorConfig
from evaluator.evaluation import Evaluator
from evaluator.task import load_task
from tests.conftest import FIXTURES, REPO, needs_root


def pesflow(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def in_process(capsys, *args: str) -> subprocess.CompletedProcess:
    """agent.cli's main() in this process (the same code as the program, without a new interpreter's
    start-up: seconds each on a loaded machine), as a CompletedProcess for `one_line_error`."""
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's own usage errors
        code = e.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def one_line_error(p: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The command failed with `code` and said why in its last stderr line, no traceback."""
    assert p.returncode == code, (p.returncode, p.stdout[-500:], p.stderr[-1500:])
    assert "Traceback" not in p.stderr, p.stderr[-1500:]
    last = p.stderr.strip().splitlines()[-1]
    for n in needles:
        assert n in last, last
    return last


# -- 3. one level owns each option ---------------------------------------------------------------

def test_tasks_options_are_kept_at_either_level():
    a = parse(["tasks", "--tasks-root", "/X", "--set", "a=b", "check", "kfc/t"])
    assert a.tasks_root == ["/X"] and a.set == ["a=b"] and a.tasks == ["kfc/t"]
    a = parse(["tasks", "--tasks-root", "/X", "--json", "check", "--tasks-root", "/Y", "--set", "c=d"])
    assert a.tasks_root == ["/X", "/Y"] and a.set == ["c=d"] and a.json is True
    a = parse(["tasks", "--config", "a.yaml", "fetch", "--ref", "main"])
    assert a.config == "a.yaml" and a.ref == "main"


def test_a_flag_given_where_it_is_not_read_names_where_it_goes(capsys):
    p = pesflow("tasks", "fetch", "--tasks-root", str(FIXTURES))
    one_line_error(p, 2, "--tasks-root", "`pesflow tasks check`", "`pesflow evaluate`")
    assert "usage:" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    one_line_error(in_process(capsys, "tasks", "--tasks-root", str(FIXTURES), "fetch"), 2, "not read by `pesflow tasks fetch`")
    one_line_error(in_process(capsys, "tasks", "--config", "a.yaml", "fetch", "--config", "b.yaml"), 2, "--config given twice")
    listed = in_process(capsys, "tasks", "--tasks-root", str(FIXTURES), "--json")
    assert listed.returncode == 0 and any(r["location"] and str(FIXTURES) in r["location"] for r in json.loads(listed.stdout))


# -- 2. a backend's missing dependency --------------------------------------------------------------

@pytest.mark.parametrize("backend", ["docker", "modal", "ray"])
def test_a_backend_without_its_sdk_is_one_line_naming_the_extra(tmp_path, backend):
    # The SDK made unimportable for this process alone: a package of its name that refuses to load,
    # first on the path, as an environment without the extra has none.
    shadow = tmp_path / backend
    shadow.mkdir()
    (shadow / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{backend}'\", name={backend!r})\n")
    env = {"PYTHONPATH": str(tmp_path)}
    cmds = [["evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--mode", "noop", "--backend", backend]]
    if backend == "docker":
        cmds.append(["run", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--backend", backend, "--out", str(tmp_path / "t")])
    for args in cmds:
        one_line_error(pesflow(*args, env=env), 2, f"pip install -e '.[{backend}]'")
    assert not (tmp_path / "t").exists()  # refused before a run directory was made


# -- 5. bad input of every command ----------------------------------------------------------------

def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "broken.yaml").write_text("loop: [unclosed\n")
    root = tmp_path / "tasks"
    shutil.copytree(FIXTURES / "kfc" / "toy-sum", root / "kfc" / "toy-sum")
    (root / "kfc" / "toy-sum" / "task" / "solution" / "negative.patch").unlink()  # a package with no negative
    toy = ["kfc/toy-sum", "--tasks-root", str(root)]
    one_line_error(pesflow("evaluate", *toy, "--candidate", str(tmp_path / "nope.patch")), 2,
                   "nope.patch: no such file or folder", "unified diff")
    one_line_error(in_process(capsys, "evaluate", *toy, "--mode", "negative", "--grader", "hidden"), 2, "ships no negative", "--mode")
    not_a_package = tmp_path / "not-a-package"
    not_a_package.mkdir()
    for cmd in (["evaluate", str(not_a_package), "--mode", "noop"], ["run", str(not_a_package)],
                ["calibrate", str(not_a_package)], ["tasks", "check", str(not_a_package)]):
        one_line_error(in_process(capsys, *cmd), 2, "not-a-package")
    for cmd in (["evaluate", *toy, "--mode", "noop"], ["run", *toy], ["baselines", "configs/baselines.yaml"]):
        one_line_error(in_process(capsys, *cmd, "--config", str(tmp_path / "broken.yaml")), 2, "broken.yaml", "not valid YAML")
    one_line_error(in_process(capsys, "resume", str(tmp_path)), 2, "not a pesflow run directory")
    one_line_error(in_process(capsys, "baselines", str(tmp_path / "broken.yaml")), 2, "broken.yaml")


# -- 4. calibrate writes where the package reads its anchor, and says so on an official checkout ---

def test_calibrate_writes_only_the_anchor_says_so_on_an_official_checkout_and_verdicts_name_it(tmp_path):
    root = tmp_path / "bench" / "tasks"
    shutil.copytree(FIXTURES / "kfc" / "toy-sum", root / "kfc" / "toy-sum")
    pkg = root / "kfc" / "toy-sum" / "task"
    url = "https://github.com/example/fai-bench.git"
    git = ["git", "-C", str(tmp_path / "bench"), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["remote", "add", "origin", url], ["add", "-A"], ["commit", "-qm", "bench"]):
        subprocess.run([*git, *args], check=True)
    task = load_task("kfc/toy-sum", [root], url)
    assert task.source.official
    note = official_note(task)
    assert "official checkout" in note and f"{pkg}/tests/ref_speedup.txt" in note and "--dry-run" in note
    before = {p: p.read_bytes() for p in pkg.rglob("*") if p.is_file() and "tests" not in p.relative_to(pkg).parts}
    # What `calibrate` writes once its oracle gradings are measured (the gradings: test_bundled_tasks.py)
    cal = Calibration(task=task.name, speedups=[3.1, 3.3, 3.2], median=3.2, spread=0.0625, hardware="cpu:Test CPU",
                      previous=task.anchor.value, previous_source=task.anchor.source, written=[])
    ev = Evaluator(EvaluatorConfig(), tasks_roots=[root], official_url=url)
    try:
        written = _write(task, cal, ev)
    finally:
        ev.close()
    assert sorted(Path(w).name for w in written) == ["ref_speedup.caveat.md", "ref_speedup.txt"]
    assert {q: q.read_bytes() for q in before} == before  # task.toml, manifests, everything else: untouched
    after = load_task("kfc/toy-sum", [root], url)
    assert after.anchor.value == 3.2 and not after.source.official  # as the line said
    # what every later verdict's ref_speedup_source says (evaluator/evaluation.py sets it from this)
    assert after.anchor.describe().startswith("tests/ref_speedup.txt (pesflow calibrate on cpu:Test CPU, ")
    (pkg / "tests" / "ref_speedup.txt").write_text("3.5\n")  # edited by hand: the stamp no longer speaks for it
    assert "pesflow calibrate" not in load_task("kfc/toy-sum", [root], url).anchor.describe()
    subprocess.run(note.split("afterwards `", 1)[1].rstrip("`"), shell=True, check=True)  # the line's way back
    assert load_task("kfc/toy-sum", [root], url).source.official


# -- 6. a dev engine that gives no speedup, on a scale a person reads -------------------------------

def _solution(**kw) -> Solution:
    return Solution(id="r01-c0", parent_id="baseline", island=0, round=1, files={}, content_hash="h", status="ok", **kw)


def test_the_progress_line_shows_the_dev_figure_named_never_a_dash():
    dev_only = _solution(speedup=None, dev_figure=0.94, dev_kind="vs_oracle")
    assert best_shown(dev_only) == "0.94 dev vs_oracle"
    assert best_shown(_solution(speedup=2.5)) == "2.500x" and best_shown(None) == "none yet"
    assert best_entry(1, dev_only) == {"round": 1, "best_id": "r01-c0", "speedup": None,
                                       "dev": {"value": 0.94, "kind": "vs_oracle"}}
    out = io.StringIO()
    prog = Progress(quiet=True, console=Console(file=out, width=200), task="kfc/t", rounds=2)
    prog.round_done(1, proposed=2, graded=2, failed=0, best=dev_only, totals={})
    prog.round_done(0, proposed=0, graded=1, failed=1, best=None, totals={})
    lines = out.getvalue().splitlines()
    assert "best r01-c0 0.94 dev vs_oracle;" in lines[0] and "best none yet;" in lines[1]
    assert not any(" -;" in ln for ln in lines)


def _rows(kind: str, with_oracle: bool) -> list[dict]:
    rows = [{"task": "kfc/t", "method": m, "seed": s, "best_by_round": [[0, None], [1, None], [2, None]],
             "dev_by_round": [[1, 0.1 + s / 20, kind], [2, 0.2 + s / 20, kind]]} for m in ("single", "loop") for s in (0, 1)]
    if with_oracle:  # the oracle graded by the hidden grader (a speedup) and by the dev engine (its own vs_oracle)
        rows.append({"task": "kfc/t", "method": "oracle", "seed": 0, "speedup": 3.0, "correct": True, "grader": "hidden",
                     "best_by_round": [[0, 3.0]], "dev_by_round": []})
        rows.append({"task": "kfc/t", "method": "oracle-dev", "seed": 0, "speedup": None, "correct": True, "grader": "dev",
                     "best_by_round": [[0, None]], "dev_by_round": [[0, 0.25, "vs_oracle"]]})
    return rows


def test_vs_oracle_figures_are_drawn_as_speedups_through_the_oracles_two_gradings():
    # The public router's dev engine, measured here: its oracle scores vs_oracle 0.21 (the reference
    # time is a constant from elsewhere), the unchanged code 0; so vs_oracle alone is no speedup.
    rows = _rows("vs_oracle", with_oracle=True)
    kinds = {"single": "single_shot", "loop": "loop", "oracle": "oracle", "oracle-dev": "oracle"}
    assert dev_scale([r for r in rows if r["method"] == "loop"], 3.0, 0.25) == (12.0, "dev vs_oracle / oracle's 0.25 x oracle 3x")
    assert dev_scale([r for r in rows if r["method"] == "loop"], 3.0, None) is None
    fig = best_by_round_plot("kfc/t", rows, kinds, method_colours(list(kinds)))
    ax = fig.axes[0]
    assert len(fig.axes) == 1  # one scale: every line is a speedup over the baseline
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    loop = next(ln for label, ln in lines.items() if label.startswith("loop"))
    assert "dev vs_oracle / oracle's 0.25 x oracle 3x" in loop.get_label()
    # round 2: the seeds' vs_oracle 0.2 and 0.25, geometric mean, over the oracle's 0.25, x its 3.0x
    assert list(loop.get_xdata()) == [1, 2] and loop.get_ydata()[1] == pytest.approx(3.0 / 0.25 * (0.2 * 0.25) ** 0.5)
    assert any(label.startswith("oracle (hidden") for label in lines)
    only_hidden = [r for r in rows if r["method"] != "oracle-dev"]  # the matrix: the dev figure, named
    fig = best_by_round_plot("kfc/t", only_hidden, kinds, method_colours(list(kinds)))
    assert len(fig.axes) == 2 and "vs_oracle" in fig.axes[1].get_ylabel() and len(fig.axes[1].get_lines()) == 2


def test_other_dev_figures_go_on_an_axis_named_by_their_kind():
    rows = _rows("absolute:req/s", with_oracle=False)
    fig = best_by_round_plot("kfc/t", rows, {"single": "single_shot", "loop": "loop"}, method_colours(["single", "loop"]))
    assert len(fig.axes) == 2
    right = fig.axes[1]
    assert "absolute:req/s" in right.get_ylabel() and len(right.get_lines()) == 2
    assert all(len(ln.get_xdata()) == 2 for ln in right.get_lines())
    empty = best_by_round_plot("kfc/t", [{"task": "kfc/t", "method": "loop", "seed": 0, "best_by_round": [[0, None]]}],
                               {"loop": "loop"}, method_colours(["loop"]))
    assert "no round's best has a figure yet" in [t.get_text() for t in empty.axes[0].texts]


# -- 5. the grading machinery that cannot start is the machine's fault: one line, exit 3 -----------

def test_a_search_whose_grader_cannot_start_is_one_line_naming_resume(tmp_path, capsys):
    p = in_process(capsys, "run", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--out", str(tmp_path / "t"), "--quiet",
                   "--set", "evaluator.local.python=/nonexistent/python3", "--set", "evaluator.infra_retries=0")
    run_dir = p.stdout.strip().splitlines()[-1].removeprefix("run: ")
    one_line_error(p, 3, "/nonexistent/python3", "evaluator.local.python", f"pesflow resume {run_dir}")
    assert Path(run_dir, "run.json").is_file()


# -- 1. the main line without a reachable model reaches the model-configuration line -----------

@needs_root
def test_a_model_never_reached_stops_the_search_in_one_line(tmp_path, cache_dir, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-...")  # the README's line, pasted, on a machine that cannot reach the server
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = in_process(capsys, "run", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--llm", "openai:gpt-4o-mini",
                   "--out", str(tmp_path / "t"), "--quiet", "--set", f"llm.base_url=http://127.0.0.1:{port}/v1",
                   "--set", "llm.backoff_base_sec=0.01", "--set", "llm.max_attempts=2",
                   "--set", f"evaluator.local.cache_dir={cache_dir}")
    run_dir = p.stdout.strip().splitlines()[-1].removeprefix("run: ")
    one_line_error(p, 2, "has not answered once", "OPENAI_BASE_URL", f"pesflow resume {run_dir}")
    assert json.loads(Path(run_dir, "run.json").read_text())["status"] == "stopped"
