"""`pesflow baselines`: a small real matrix (2 tasks x noop, oracle, single-shot, best-of-2, a
2-round loop) graded in the local sandbox, the LLM answers coming from the scripted server
through the real OpenAI client; then its summary, tables and figures, and a resume that runs
nothing again."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from pathlib import Path

import pytest
import yaml

from agent.experiments.matrix import BaselinesConfig, Cell, cell_config, load_baselines
from agent.experiments.methods import kind_overrides
from agent.experiments.tables import aggregate, geomean, tex_escape
from agent.cli import main
from agent.config import ConfigError, load_config
from tests.conftest import needs_root, toy_tasks_root
from tests.llm_server import Reply, Request, ScriptedLLMServer

UNROLLED = """def sum_squares(n):
    total = 0
    i = 0
    while i + 1 < n:
        total += i * i + (i + 1) * (i + 1)
        i += 2
    if i < n:
        total += i * i
    return total
"""
CLOSED = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
WRONG = "def sum_squares(n):\n    return n * n\n"
METHODS = ["noop", "oracle", "single-shot", "best-of-2", "loop"]
TASKS = {"kfc/toy-sum": "performance", "kfc/toy-spec": "implementation"}


def engineer(req: Request) -> Reply:
    """Executor 1 improves its parent one step (loop -> unrolled -> closed form); executor 2 is wrong."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: f"lesson on {i}" for i in ids}, "memory": ["unroll, then close the form"]}))
    if "You are the planner" in user:
        return Reply(text="Unroll the loop; then find the closed form.")
    child = int(re.search(r"You are executor (\d+) of", user).group(1))
    parent = re.search(r"### toy/kernel.py\n```python\n(.*?)\n```", user, re.S).group(1)
    code = WRONG if child == 2 else CLOSED if "while" in parent else UNROLLED
    return Reply(text=f"toy/kernel.py\n```python\n{code}```\n")


@pytest.fixture()
def two_tasks(tmp_path) -> Path:
    """toy-sum with its deterministic metric, and a copy of it labelled an implementation task."""
    root = tmp_path / "tasks"
    for name, kind in (("toy-sum", "performance"), ("toy-spec", "implementation")):
        pkg = toy_tasks_root(root, name)
        toml = pkg / "task.toml"
        toml.write_text(toml.read_text().replace('task_kind = "performance"', f'task_kind = "{kind}"'))
    return root


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")


def write_config(path: Path, root: Path, out: Path, cache_dir: Path, base_url: str) -> Path:
    path.write_text(yaml.safe_dump({
        "out": str(out), "tasks": list(TASKS), "tasks_roots": [str(root)], "seeds": [0],
        "llm": {"default": "openai:gpt-4o-mini", "base_url": base_url, "backoff_base_sec": 0.01, "backoff_max_sec": 0.05,
                "timeout_sec": 20},
        "config": {"evaluator": {"local": {"cache_dir": str(cache_dir)}}, "loop": {"children": 2, "final_regrade_top": 1}},
        "methods": {"noop": {"kind": "noop"}, "oracle": {"kind": "oracle"}, "single-shot": {"kind": "single_shot"},
                    "best-of-2": {"kind": "best_of_n", "n": 2},
                    # round 2 builds on round 1 only with one round in flight (depth 2 selects it after round 0)
                    "loop": {"kind": "loop", "rounds": 2, "set": {"population": {"islands": 1}, "loop": {"pipeline_depth": 1}}}},
    }, sort_keys=False))
    return path


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    return {r["method"]: r for r in csv.DictReader(path.open())}


@needs_root
@pytest.mark.slow
def test_small_matrix_summary_tables_figures_and_resume(two_tasks, tmp_path, cache_dir, capsys):
    out = tmp_path / "bl"
    with ScriptedLLMServer(engineer) as server:
        cfg = write_config(tmp_path / "baselines.yaml", two_tasks, out, cache_dir, server.openai_base_url)
        assert main(["baselines", str(cfg)]) == 0
        first_requests = len(server.requests)
    assert "cells: 10 run, 0 already done, 0 failed" in capsys.readouterr().out

    # summary.jsonl: one line per task, method and seed, in matrix order
    rows = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert [(r["task"], r["method"], r["seed"]) for r in rows] == [(t, m, 0) for t in TASKS for m in METHODS]
    by = {(r["task"], r["method"]): r for r in rows}
    for r in rows:
        assert r["reward_class"] == TASKS[r["task"]] and r["status"] == "finished" and r["task_budget"] == 3
        assert (out / r["run_dir"] / "run.json").is_file() and r["wall_seconds"] > 0
        assert r["grader"] == "hidden" and r["scorings"]["hidden"] == 1 and not r["over_budget"]
    for t in TASKS:
        noop, oracle = by[(t, "noop")], by[(t, "oracle")]
        assert noop["speedup"] == 1.0 and noop["correct"] and noop["reward"] == 0.0
        assert noop["hard_fails"] == ["speedup_not_above_baseline"] and noop["llm_calls"] == 0 and noop["usd"] == 0
        assert oracle["correct"] and oracle["speedup"] > 100 and oracle["reward"] > 0 and oracle["tokens"] == 0
        single, best2, loop = by[(t, "single-shot")], by[(t, "best-of-2")], by[(t, "loop")]
        assert single["llm_calls"] == 1 and best2["llm_calls"] == 2 and loop["llm_calls"] == 11  # 2 x (plan, 2 execs, summary),
        # and the default fix turns and second asks (loop.fix_turns, loop.resample_duplicates) the loop method keeps
        assert 1.2 < single["speedup"] < 2 and best2["speedup"] == single["speedup"]  # the unrolled loop
        assert best2["failed_candidates"] == 1 and best2["candidates"] == 2
        assert loop["speedup"] > 100 and [round(s) for _, s in loop["best_by_round"]][-1] > 100  # the closed form in round 2
        assert all(r["usd"] > 0 and r["tokens"] > 0 for r in (single, best2, loop))
        assert loop["scorings"]["dev"] >= 4

    # tables: numbers match summary.jsonl; performance and implementation kept apart
    tables = out / "tables"
    for cls, task in (("performance", "kfc/toy-sum"), ("implementation", "kfc/toy-spec")):
        mine = [r for r in rows if r["reward_class"] == cls]
        assert {r["task"] for r in mine} == {task}
        table = read_csv(tables / f"{cls}.csv")
        assert list(table) == METHODS
        for m in METHODS:
            cell = [r for r in mine if r["method"] == m]
            got = table[m]
            assert int(got["tasks"]) == 1 and int(got["n"]) == len(cell)
            assert math.isclose(float(got["reward_mean"]), statistics.fmean(r["reward"] for r in cell), rel_tol=1e-9)
            assert math.isclose(float(got["usd_mean"]), statistics.fmean(r["usd"] for r in cell), rel_tol=1e-9)
            assert math.isclose(float(got["correct_share"]), sum(r["correct"] for r in cell) / len(cell))
            if cls == "performance":  # correct cells contribute their speedup, failed ones 1x
                expect = math.exp(statistics.fmean(math.log(r["speedup"] if r["correct"] else 1.0) for r in cell))
                assert math.isclose(float(got["speedup_geomean"]), expect, rel_tol=1e-9)
        md = (tables / f"{cls}.md").read_text()
        tex = (tables / f"{cls}.tex").read_text()
        loop_reward = float(table["loop"]["reward_mean"])
        assert re.search(rf"^\| loop \| engineer \| 1 \| 1 \| {loop_reward:.3f} ± 0\.000 \|", md, re.M), md
        assert re.search(rf"^loop & engineer & 1 & 1 & {loop_reward:.3f} \$\\pm\$ 0\.000 & ", tex, re.M), tex
        assert r"\begin{tabular}" in tex and r"\bottomrule" in tex and "\\caption{" in tex
        per_task = read_csv(tables / f"task-{task.replace('/', '-')}.csv")
        assert per_task["oracle"]["reward_mean"] == table["oracle"]["reward_mean"]
    perf, impl = read_csv(tables / "performance.csv"), read_csv(tables / "implementation.csv")
    assert math.isclose(float(perf["oracle"]["speedup_geomean"]), by[("kfc/toy-sum", "oracle")]["speedup"])
    assert math.isclose(float(impl["oracle"]["speedup_geomean"]), by[("kfc/toy-spec", "oracle")]["speedup"])
    all_md = (tables / "all.md").read_text()
    assert all_md.index("Performance tasks") < all_md.index("Implementation tasks") < all_md.index("kfc/toy-sum (performance)")

    # figures: real PNG and PDF files that decode
    import matplotlib.image

    figs = out / "figures"
    for stem in ("best-by-round-kfc-toy-sum", "best-by-round-kfc-toy-spec", "cost-vs-speedup"):
        png, pdf = figs / f"{stem}.png", figs / f"{stem}.pdf"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        h, w, _ = matplotlib.image.imread(png).shape
        assert w > 400 and h > 300
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF") and len(data) > 2000

    # a one-candidate "run" is a run directory like any other: `pesflow report` reads it
    oracle_dir = out / by[("kfc/toy-sum", "oracle")]["run_dir"]
    assert main(["report", str(oracle_dir)]) == 0
    assert "// 6" in (oracle_dir / "report.html").read_text()

    def resume_runs_nothing() -> None:
        capsys.readouterr()
        with ScriptedLLMServer(engineer) as server:
            write_config(tmp_path / "baselines.yaml", two_tasks, out, cache_dir, server.openai_base_url)
            assert main(["baselines", str(cfg), "--out", str(out)]) == 0
            assert server.requests == []
        assert "cells: 0 run, 10 already done, 0 failed" in capsys.readouterr().out

    # resume: nothing runs again, no LLM request is made, nothing is rewritten
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("cells/**/run.json")}
    summary = (out / "summary.jsonl").read_text()
    resume_runs_nothing()
    assert {p: p.stat().st_mtime_ns for p in out.glob("cells/**/run.json")} == stamps
    assert (out / "summary.jsonl").read_text() == summary

    # a matrix written before the cell's key was renamed (`baseline`, now `cell`) resumes the same way
    for p in out.glob("cells/**/run.json"):
        run = json.loads(p.read_text())
        p.write_text(json.dumps({("baseline" if k == "cell" else k): v for k, v in run.items()}))
    resume_runs_nothing()
    assert (out / "summary.jsonl").read_text() == summary

    # an unfinished cell (a crash mid-run) is run again from scratch, and only that one
    cell = out / by[("kfc/toy-sum", "single-shot")]["run_dir"]
    run = json.loads((cell / "run.json").read_text())
    (cell / "run.json").write_text(json.dumps({**run, "status": "running"}))
    (cell / "leftover.txt").write_text("from the crashed attempt")
    with ScriptedLLMServer(engineer) as server:
        write_config(tmp_path / "baselines.yaml", two_tasks, out, cache_dir, server.openai_base_url)
        assert main(["baselines", str(cfg)]) == 0
        assert len(server.requests) == 1 and first_requests > 1
    assert "cells: 1 run, 9 already done, 0 failed" in capsys.readouterr().out
    assert not (cell / "leftover.txt").exists() and json.loads((cell / "run.json").read_text())["status"] == "finished"


# ---------------------------------------------------------------- without a sandbox


def test_kinds_mean_the_documented_config():
    bc = BaselinesConfig.model_validate({"tasks": ["kfc/toy-sum"], "llm": {"default": "openai:m"}, "methods": {
        "ss": {"kind": "single_shot"}, "b8": {"kind": "best_of_n", "n": 8}, "u": {"kind": "uniform_parent", "rounds": 5},
        "i": {"kind": "one_island"}, "w": {"kind": "whole_file"}, "ns": {"kind": "no_summarizer"},
        "custom": {"kind": "loop", "set": {"loop": {"children": 3}}}}})
    base = load_config()
    cfg = {name: cell_config(base, bc, name, 7, Path("/tmp/cells")) for name in bc.methods}
    assert (cfg["ss"].loop.rounds, cfg["ss"].loop.children, cfg["ss"].loop.use_planner, cfg["ss"].loop.use_summarizer) == (1, 1, False, False)
    assert (cfg["b8"].loop.rounds, cfg["b8"].loop.children, cfg["b8"].loop.use_planner) == (1, 8, False)
    assert cfg["u"].population.exploration_ratio == 1.0 and cfg["u"].loop.rounds == 5 and cfg["u"].loop.use_summarizer
    assert cfg["i"].population.islands == 1 and cfg["w"].loop.edit_format == "whole_file"
    assert cfg["ns"].loop.use_summarizer is False and cfg["ns"].loop.use_planner is True
    assert cfg["custom"].loop.children == 3 and all(c.loop.seed == 7 and c.run.quiet for c in cfg.values())
    assert all(c.llm.default == "openai:m" for c in cfg.values())
    assert kind_overrides(bc.methods["i"]) == {"loop": {}, "population": {"islands": 1}}


@pytest.mark.parametrize("methods, words", [
    ({"b": {"kind": "best_of_n"}}, "needs n"),
    ({"x": {"kind": "single_shot", "rounds": 3}}, "rounds is only for the loop"),
    ({"x": {"kind": "loopy"}}, "methods.x.kind"),
    ({"bad name": {"kind": "noop"}}, "must be letters"),
    ({"x": {"kind": "noop", "colour": 1}}, "methods.x.colour"),
])
def test_bad_baselines_files_are_one_line_errors(tmp_path, methods, words):
    p = tmp_path / "b.yaml"
    p.write_text(yaml.safe_dump({"tasks": ["kfc/toy-sum"], "methods": methods}))
    with pytest.raises(ConfigError) as e:
        load_baselines(p)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_bad_config_override_names_the_method(tmp_path):
    bc = BaselinesConfig.model_validate({"tasks": ["t/x"], "methods": {"fast": {"kind": "loop", "set": {"loop": {"rounds": 0}}}}})
    with pytest.raises(ConfigError, match=r"^baselines method fast: key loop.rounds: .*greater than or equal to 1"):
        cell_config(load_config(), bc, "fast", 0, tmp_path)


def test_the_documented_example_file_loads():
    bc = load_baselines(Path(__file__).resolve().parent.parent / "configs" / "baselines.yaml")
    assert {m.kind for m in bc.methods.values()} == {"noop", "oracle", "single_shot", "best_of_n", "loop", "no_summarizer",
                                                       "uniform_parent", "one_island", "whole_file"}
    for name in bc.methods:
        cell_config(load_config(), bc, name, bc.seeds[0], Path("/tmp/cells"))
    assert Cell("kfc/a", "loop", 2).rel == "cells/kfc/a/loop/seed-2"


def test_aggregates_count_failures_as_the_unchanged_code():
    rows = [{"task": "a", "reward_class": "performance", "reward": r, "speedup": s, "correct": ok, "usd": 0.5, "tokens": 10,
             "scorings": {"hidden": 1}, "over_budget": False, "wall_seconds": 2.0}
            for r, s, ok in ((1.0, 8.0, True), (0.0, 0.0, False), (0.5, 2.0, True))]
    a = aggregate(rows)
    assert math.isclose(a["speedup_geomean"], (8.0 * 1.0 * 2.0) ** (1 / 3))
    assert math.isclose(a["reward_mean"], 0.5) and math.isclose(a["reward_sd"], 0.5) and math.isclose(a["correct_share"], 2 / 3)
    assert geomean([]) is None and tex_escape("a_b & 50%") == r"a\_b \& 50\%"


@pytest.mark.parametrize("body, words", [
    ({"tasks": ["kfc/nope"], "methods": {"noop": {"kind": "noop"}}}, "task 'kfc/nope' not found"),
    ({"tasks": ["kfc/wre-router-power-of-two-choices-loop16"], "methods": {"l": {"kind": "loop"}}}, "method l (loop) needs an LLM"),
])
def test_the_command_refuses_before_grading_anything(tmp_path, capsys, body, words):
    p = tmp_path / "b.yaml"
    p.write_text(yaml.safe_dump(body))
    assert main(["baselines", str(p), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and not (tmp_path / "out").exists()
