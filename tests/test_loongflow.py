"""LoongFlow traces: the audit's findings on a fixture with planted faults, and the import into a run."""

from __future__ import annotations

import filecmp
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.rundir import journal
from agent.population.database import Population, PopulationConfig, Solution
from agent.readers.loongflow.audit import audit_loongflow
from agent.readers.loongflow.importer import import_loongflow
from agent.readers.loongflow.trace import LoongFlowError, failure_kind, is_loongflow_trace
from agent.population.loongflow_format import loongflow_files
from agent.rundir.store import write_dir_atomically
from evaluator.candidate import candidate_hash

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TRACE = FIXTURES / "loongflow"
_spec = importlib.util.spec_from_file_location("make_loongflow_trace", FIXTURES / "make_loongflow_trace.py")
gen = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(gen)  # type: ignore[union-attr]
CP4 = "checkpoint-checkpoint-iter-4-10"


@pytest.fixture
def trace(tmp_path) -> Path:
    """A private copy of the fixture, to break without touching it."""
    return Path(shutil.copytree(TRACE, tmp_path / "trace"))


def _cp(root: Path, name: str) -> Path:
    return root / "database" / "checkpoints" / name


def _edit(path: Path, **fields) -> None:
    d = json.loads(path.read_text())
    d.update(fields)
    path.write_text(json.dumps(d, indent=2))


# ---------------------------------------------------------------- the fixture itself


def test_fixture_is_what_the_generator_writes(tmp_path):
    fresh = gen.write(tmp_path / "fresh")
    cmp = filecmp.dircmp(fresh, TRACE)

    def diffs(c: filecmp.dircmp) -> list[str]:
        out = c.left_only + c.right_only + c.diff_files + c.funny_files
        for sub in c.subdirs.values():
            out += diffs(sub)
        return out

    # shallow=False: compare bytes, not stat signatures
    _, mismatch, errors = filecmp.cmpfiles(fresh, TRACE, [str(p.relative_to(fresh)) for p in fresh.rglob("*") if p.is_file()],
                                           shallow=False)
    assert diffs(cmp) == [] and mismatch == [] and errors == [], "run: python3 tests/fixtures/make_loongflow_trace.py"


def test_is_loongflow_trace(tmp_path, trace):
    assert is_loongflow_trace(TRACE)
    assert not is_loongflow_trace(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    assert not is_loongflow_trace(tmp_path / "empty")
    assert not is_loongflow_trace(trace / "iteration" / "1" / "planner" / "plan_1.txt")
    assert is_loongflow_trace(trace / "database")  # LoongFlow's database folder given alone
    run = import_loongflow(trace, tmp_path / "run")
    assert not is_loongflow_trace(run)  # a pesflow run is not mistaken for a trace


# ---------------------------------------------------------------- the audit on the fixture


def test_audit_finds_each_planted_fault():
    r = audit_loongflow(TRACE)
    want = [
        "checkpoint checkpoint-checkpoint-iter-2-4 has no metadata.json",
        "iteration/3 has no summarizer/",
        f"1 evaluator dir(s) with no result file (evaluation_result.json or result.json): eval_{gen.KILLED}",
        "checkpoint checkpoint-checkpoint-iter-3-7: metadata says 7 solutions generated; solutions/ holds 6",
        "checkpoint checkpoint-checkpoint-iter-3-7: metadata says 5 valid solutions; solutions/ holds 4 with a non-zero score",
        "checkpoint checkpoint-checkpoint-iter-3-7: metadata lists 1b0c0de1 (islands[1], elites, island_feature_map[1]) "
        "but solutions/1b0c0de1.json is missing",
        "checkpoint checkpoint-checkpoint-iter-3-7: metadata lists dead0000 (islands[1]), which is no solution in the trace",
        f"solution 3c0c0de3: parent {gen.MISSING_PARENT} is in no checkpoint (the parent chain is broken)",
    ]
    assert sorted(r.violations) == sorted(want)
    assert not r.ok


def test_audit_counts_and_trajectory():
    s = audit_loongflow(TRACE).stats
    assert (s["checkpoints"], s["iterations"], s["solutions"], s["passed"], s["failed"]) == (4, 4, 10, 6, 4)
    assert (s["evaluator_dirs"], s["evaluator_results"], s["islands"]) == (12, 11, 2)
    assert s["roots"] == ["1a0c0de1", "1b0c0de1"] and s["orphans"] == ["3c0c0de3"] and s["cycles"] == []
    assert s["max_depth"] == 2
    kinds = {sid: gen.KIND[k] for sid, *_, k in gen.SOLUTIONS if k != "ok"}
    assert s["failures_by_kind"]["solutions"] == {k: 1 for k in kinds.values()}
    # the retry that was not kept failed to compile too
    assert s["failures_by_kind"]["evaluator"] == {"compile_error": 2, "incorrect": 1, "score_0": 1, "timeout": 1}
    assert [(t["iteration"], t["best_id"], t["best_score"]) for t in s["trajectory"]] == \
        [(k, sid, score) for k, (sid, score) in sorted(gen.BEST_BY_ITERATION.items())]
    assert [b["running_best"] for b in s["by_iteration"]] == [1.2, 1.5, 1.8, 2.1]
    assert s["best"] == {"id": "4a0c0de4", "score": 2.1}


def test_audit_findings_name_failures_by_kind_and_roots():
    f = "\n".join(audit_loongflow(TRACE).findings)
    for sid, *_, kind in gen.SOLUTIONS:
        if kind != "ok":
            assert f"{gen.KIND[kind]} 1 ({sid})" in f
    assert "2 root(s) (1a0c0de1, 1b0c0de1)" in f
    assert "10 evaluated a stored solution's code, 2 did not" in f
    assert "1: 1.2 (1a0c0de1), 2: 1.5 (2a0c0de2), 3: 1.8 (3b0c0de3), 4: 2.1 (4a0c0de4)" in f


# ---------------------------------------------------------------- the audit on broken copies


def test_best_solution_that_is_not_the_best(trace):
    cp = _cp(trace, CP4)
    (cp / "best_solution.json").write_text((cp / "solutions" / "3b0c0de3.json").read_text())
    v = audit_loongflow(trace).violations
    assert f"checkpoint {CP4}: best_solution.json is 3b0c0de3 (score 1.8) but 4a0c0de4 scores 2.1" in v
    assert f"checkpoint {CP4}: best_solution.json is 3b0c0de3 but metadata names 4a0c0de4" in v


def test_best_solution_whose_code_differs(trace):
    best = _cp(trace, CP4) / "best_solution.json"
    _edit(best, solution=json.loads(best.read_text())["solution"] + "# edited\n")
    v = audit_loongflow(trace).violations
    assert f"checkpoint {CP4}: best_solution.json's code differs from solutions/4a0c0de4.json" in v


def test_parent_cycle_is_found_and_import_still_works(trace, tmp_path):
    for f in (trace / "database" / "checkpoints").glob("*/solutions/1a0c0de1.json"):
        _edit(f, parent_id="2a0c0de2")
    for f in (trace / "database" / "checkpoints").glob("*/best_solution.json"):
        if json.loads(f.read_text())["solution_id"] == "1a0c0de1":
            _edit(f, parent_id="2a0c0de2")
    r = audit_loongflow(trace)
    assert [v for v in r.violations if v.startswith("parent cycle")] == ["parent cycle: 1a0c0de1 -> 2a0c0de2 -> 1a0c0de1"]
    assert r.stats["roots"] == ["1b0c0de1"]
    run = import_loongflow(trace, tmp_path / "run")
    assert journal.verify(run / "journal.jsonl") == []
    pop = Population.from_dict(json.loads((run / "checkpoints/round-04/pesflow_state.json").read_text())["population"])
    assert pop.get("1a0c0de1").parent_id is None and pop.get("2a0c0de2").parent_id == "1a0c0de1"


def test_counts_that_do_not_reconcile(trace):
    meta = _cp(trace, CP4) / "metadata.json"
    d = json.loads(meta.read_text())
    d["total_generated_solutions"] = 11
    d["island_capacity"][0] = 9
    d["island_best_solution"] = d["island_best_solution"][:1]
    meta.write_text(json.dumps(d))
    v = audit_loongflow(trace).violations
    assert f"checkpoint {CP4}: metadata says 11 solutions generated; solutions/ holds 10" in v
    assert f"checkpoint {CP4}: island_capacity[0] is 9 but islands[0] lists 3" in v
    assert f"checkpoint {CP4}: 2 islands but island_best_solution has 1 entries" in v


def test_unreadable_and_error_only_files_are_reported_not_fatal(trace):
    (_cp(trace, CP4) / "solutions" / "4c0c0de4.json").write_text("{ torn")
    killed = trace / "evaluator" / f"eval_{gen.KILLED}" / "evaluation_result.json"
    killed.write_text(json.dumps({"error": "Evaluation process exited with non-zero code: -9", "traceback": ""}))
    r = audit_loongflow(trace)
    assert any(v.startswith(f"database/checkpoints/{CP4}/solutions/4c0c0de4.json: unreadable") for v in r.violations)
    assert f"checkpoint {CP4}: metadata says 10 solutions generated; solutions/ holds 9" in r.violations
    assert r.stats["failures_by_kind"]["evaluator"]["crash"] == 1
    assert not any("no result file" in v for v in r.violations)


def test_a_partial_mirror_is_read(tmp_path):
    """Only a checkpoint's best_solution.json survives, as in some published mirrors."""
    src = _cp(TRACE, CP4) / "best_solution.json"
    cp = _cp(tmp_path / "mirror", CP4)
    cp.mkdir(parents=True)
    shutil.copy(src, cp / "best_solution.json")
    r = audit_loongflow(tmp_path / "mirror")
    assert f"checkpoint {CP4} has no metadata.json" in r.violations
    assert f"checkpoint {CP4} has no solutions/ folder" in r.violations
    assert "no iteration/ folder: the planner, executor and summarizer records are missing" in r.violations
    assert "no evaluator/ folder: the evaluation records are missing" in r.violations
    assert "solution 4a0c0de4: parent 2a0c0de2 is in no checkpoint (the parent chain is broken)" in r.violations
    run = import_loongflow(tmp_path / "mirror", tmp_path / "run")
    assert json.loads((run / "run.json").read_text())["best"]["id"] == "4a0c0de4"
    assert (run / "final/files/solution.py").read_text() == json.loads(src.read_text())["solution"]


# ---------------------------------------------------------------- failure kinds


@pytest.mark.parametrize("evaluation,score,kind", [
    ({"status": "success", "score": 97.0, "metrics": {"correctness": 1.0}}, 97.0, None),
    ({"status": "execution_failed", "summary": "Compilation failed: Shard 2 failed", "score": 0.0}, 0.0, "compile_error"),
    ({"status": "validation_failed", "summary": "wrong output", "score": 0.0}, 0.0, "incorrect"),
    ({"status": "success", "score": 3.0, "artifacts": {"correctness_check": "Failed"}}, 3.0, "incorrect"),
    ({"status": "framework_error", "summary": "Evaluation execution timed out."}, 0.0, "timeout"),
    ({"status": "framework_error", "summary": "User's evaluate function returned a non-dict"}, 0.0, "framework_error"),
    ({"status": "success", "score": 0.0}, 0.0, "score_0"),
    ({"error": "Evaluation process exited with non-zero code: 1", "traceback": "..."}, None, "crash"),
    ({"status": "ok", "speedup": 1.4, "hard_fail_reasons": []}, 1.4, None),  # pesflow's own checkpoints
    ({"status": "hard_fail", "hard_fail_reasons": ["wrong_answer"]}, 0.0, "wrong_answer"),
    ({}, 2.0, None),  # no evaluation recorded: the score decides
    ({"summary": "Initial file, not evaluated"}, 0.0, "score_0"),
])
def test_failure_kind(evaluation, score, kind):
    assert failure_kind(evaluation, score) == kind


# ---------------------------------------------------------------- import


def test_import_makes_a_run_the_other_commands_accept(tmp_path):
    run = import_loongflow(TRACE, tmp_path / "run")
    assert journal.verify(run / "journal.jsonl") == []
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "imported" and meta["source"]["path"] == str(TRACE)
    assert meta["best"] == {"id": "4a0c0de4", "speedup": 2.1, "score": 2.1, "reward": None, "grader": "loongflow",
                            "loongflow_id": "4a0c0de4"}
    assert [(b["round"], b["best_id"], b["speedup"]) for b in meta["best_by_round"]] == \
        [(k, sid, score) for k, (sid, score) in sorted(gen.BEST_BY_ITERATION.items())]
    assert meta["totals"]["solutions"] == 10 and meta["totals"]["evaluations"] == 12

    events = journal.read(run / "journal.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end" and kinds.count("candidate") == 10
    assert kinds.count("verdict") == 12 and kinds.count("checkpoint") == 4
    cands = {e["data"]["id"]: e["data"] for e in events if e["kind"] == "candidate"}
    assert cands["2a0c0de2"]["parent_id"] == "1a0c0de1"
    assert cands["3c0c0de3"]["parent_id"] is None and cands["3c0c0de3"]["loongflow_parent_id"] == gen.MISSING_PARENT
    seen: set[str] = set()
    for e in events:  # every parent is journaled before its child
        if e["kind"] == "candidate":
            assert e["data"]["parent_id"] in seen | {None}
            seen.add(e["data"]["id"])

    records = gen.solution_records()
    for k, (best_id, score) in gen.BEST_BY_ITERATION.items():
        state = json.loads((run / f"checkpoints/round-{k:02d}/pesflow_state.json").read_text())
        assert state["round"] == k and state["rng_state"] is None and state["memory"] == []
        pop = Population.from_dict(state["population"])
        assert pop.best().id == best_id and pop.best().speedup == score
        assert len(pop) == len(gen.CHECKPOINTS[f"checkpoint-checkpoint-iter-{k}-{[2, 4, 7, 10][k - 1]}"])
        for s in pop.all():
            assert s.files == {"solution.py": records[s.id]["solution"]} and s.content_hash == candidate_hash(s.files, pop.baseline_files)
            assert s.correct == (records[s.id]["score"] > 0)
            if not s.correct:
                assert s.status == "hard_fail" and s.hard_fail_reasons == [gen.KIND[dict((r[0], r[5]) for r in gen.SOLUTIONS)[s.id]]]
    # LoongFlow's files travel as they are
    assert (run / "checkpoints/round-04/solutions/4a0c0de4.json").read_text() == \
        (_cp(TRACE, CP4) / "solutions/4a0c0de4.json").read_text()
    assert not (run / "checkpoints/round-02/metadata.json").exists()
    assert (run / "rounds/03/planner/best_plan.txt").is_file() and not (run / "rounds/03/summarizer").exists()
    assert (run / "rounds/04/executor/best_solution.py").read_text() == records["4a0c0de4"]["solution"]
    assert (run / "final/files/solution.py").read_text() == records["4a0c0de4"]["solution"]
    assert json.loads((run / "final/best_solution.json").read_text())["solution_id"] == "4a0c0de4"
    # every verdict has its logs, where the verdict says
    for e in events:
        if e["kind"] == "verdict":
            assert (Path(e["data"]["verdict"]["log_dir"]) / "verdict.json").is_file()
    by_label = {e["data"]["label"]: e["data"]["verdict"] for e in events if e["kind"] == "verdict"}
    assert by_label[f"eval_{gen.KILLED}"]["hard_fail_reasons"] == ["no_result"]
    assert by_label[f"eval_{gen.hexid('eval-3b0c0de3')}"]["status"] == "ok"  # read from result.json


def test_lead_audit_passes_on_the_import(tmp_path):
    audit = pytest.importorskip("agent.readers.audit")
    run = import_loongflow(TRACE, tmp_path / "run")
    rep = audit.audit(run)
    assert rep.kind == "pesflow" and rep.violations == []
    lf = audit.audit(TRACE)
    assert lf.kind == "loongflow" and len(lf.violations) == 8


def test_import_refuses_a_used_directory(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("")
    with pytest.raises(LoongFlowError, match="already exists and is not empty"):
        import_loongflow(TRACE, tmp_path / "run")
    with pytest.raises(LoongFlowError, match="is not a LoongFlow trace"):
        import_loongflow(tmp_path, tmp_path / "other")


def test_pesflow_written_checkpoints_read_back(tmp_path):
    """pesflow writes LoongFlow's layout too: its files object and status words are understood."""
    base = {"k.py": "def f():\n    return 1\n"}
    child = {"k.py": "def f():\n    return 2\n"}
    pop = Population(PopulationConfig(islands=1), base)
    pop.add(Solution(id="baseline", parent_id=None, island=0, round=0, files=base, content_hash=candidate_hash(base, base),
                     status="ok", speedup=1.0))
    pop.add(Solution(id="r01-c0", parent_id="baseline", island=0, round=1, files=child, content_hash=candidate_hash(child, base),
                     status="ok", speedup=1.7))
    pop.add(Solution(id="r01-c1", parent_id="baseline", island=0, round=1, files=child | {"k.py": "oops"},
                     content_hash="h", status="hard_fail", hard_fail_reasons=["wrong_answer"]))
    write_dir_atomically(_cp(tmp_path / "t", "checkpoint-checkpoint-iter-1-1"), loongflow_files(pop, iteration=1, extra_metadata={}))
    r = audit_loongflow(tmp_path / "t")
    assert not [v for v in r.violations if "checkpoint-" in v]  # consistent with itself
    assert r.stats["failures_by_kind"]["solutions"] == {"wrong_answer": 1}
    run = import_loongflow(tmp_path / "t", tmp_path / "run")
    back = Population.from_dict(json.loads((run / "checkpoints/round-01/pesflow_state.json").read_text())["population"])
    assert back.get("r01-c0").files == child and back.best().id == "r01-c0"
    assert back.get("baseline").round == 0 and back.get("r01-c1").hard_fail_reasons == ["wrong_answer"]


# ---------------------------------------------------------------- the command line


def pesflow(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def test_cli_import(tmp_path):
    r = pesflow("import", str(TRACE), "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == str(tmp_path / "run")
    assert journal.verify(tmp_path / "run" / "journal.jsonl") == []
    bad = pesflow("import", str(tmp_path / "run"))  # a pesflow run is no LoongFlow trace
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "is not a LoongFlow trace" in bad.stderr
