"""`pesflow review RUN_DIR ID --accept|--reject --why TEXT`: a person's decision on a grading,
journaled through the run's one writer, applied by every reader at once and by a resumed search
to its population; `pesflow audit` checks each decision names a graded candidate and says why.

One real search on the toy package (the scripted model and the trust seam of
tests/test_trust_search.py): r01-c0 is honest (the pick), r01-c1 stops the grader's trace
counter (a suspect). Each test works on its own copy of the run directory.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from agent.cli import main
from agent.experiments.matrix import Cell, cell_line
from agent.experiments.tables import method_table, to_markdown
from agent.readers.audit import audit
from agent.readers.run_view import load_run
from agent.rundir import journal
from agent.rundir.journal import Journal
from agent.search.session import resume_run, start_run
from tests.conftest import needs_root, toy_tasks_root
from tests.llm_server import ScriptedLLMServer
from tests.test_trust_search import exploit_engineer, search_config, seam_grading


@pytest.fixture(scope="module")
def one_round(tmp_path_factory, cache_dir):
    """The run directory of a one-round search; the scripted server and the seam stay up for resumes."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the local backend needs root and unshare")
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    seam_grading(mp)
    tmp = tmp_path_factory.mktemp("review")
    toy_tasks_root(tmp / "tasks")
    with ScriptedLLMServer(exploit_engineer) as server:
        run_dir, status = start_run(search_config(tmp, cache_dir, server, **{"loop.rounds": 1}), "kfc/toy-sum",
                                    [str(tmp / "tasks")])
        assert status == "finished"
        yield run_dir
    mp.undo()


@pytest.fixture
def run_dir(one_round, tmp_path) -> Path:
    d = tmp_path / "traces" / "kfc" / "toy-sum" / one_round.name
    shutil.copytree(one_round, d)
    return d


def suspects(d: Path) -> dict[str, dict]:
    return {s["candidate_id"]: s for s in json.loads((d / "run.json").read_text())["suspects"] if s["label"] == "search"}


def hash_of(d: Path, cid: str) -> str:
    return next(e["data"]["content_hash"] for e in journal.read(d / "journal.jsonl")
                if e["kind"] == "candidate" and e["data"]["id"] == cid)


def test_reject_and_accept_are_journaled_and_every_reader_applies_them(run_dir, capsys):
    before = suspects(run_dir)
    assert set(before) == {"r01-c1"} and not before["r01-c1"]["counts"]
    assert load_run(run_dir)["best_id"] == "r01-c0"
    assert main(["review", str(run_dir), "r01-c0", "--reject", "--why", "  it reads\nthe anchor  "]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("review: r01-c0 (") and "rejected: it reads the anchor" in out[0]
    prefix = hash_of(run_dir, "r01-c1")[:10]
    assert main(["review", str(run_dir), prefix, "--accept", "--why", "the settrace call is the kernel's own"]) == 0
    capsys.readouterr()
    events = journal.read(run_dir / "journal.jsonl")
    reviews = [e["data"] for e in events if e["kind"] == "review"]
    assert [(r["candidate_id"], r["decision"]) for r in reviews] == [("r01-c0", "reject"), ("r01-c1", "accept")]
    assert reviews[0]["why"] == "it reads the anchor" and journal.verify(run_dir / "journal.jsonl") == []
    # run.json: the rejected one is listed now, the accepted one counts
    now = suspects(run_dir)
    assert now["r01-c0"]["review"]["decision"] == "reject" and not now["r01-c0"]["counts"]
    assert now["r01-c1"]["review"]["decision"] == "accept" and now["r01-c1"]["counts"]
    # the report: kinds follow the decisions, and a rejected pick is no best
    view = load_run(run_dir)
    kinds = {c["id"]: c["kind"] for c in view["candidates"]}
    assert kinds["r01-c0"] == "rejected" and kinds["r01-c1"] == "improved" and view["best_id"] is None
    # a baselines table: the cell's pick was rejected, so it is flagged and in no aggregate
    line = cell_line(run_dir, Cell("kfc/toy-sum", "loop", 0), "loop", "performance", run_dir.parents[3])
    assert line["counted"] is False and line["trust"]["review"]["decision"] == "reject"
    table = method_table([line])
    assert table[0]["n"] == 0 and "† seed 0: rejected by a person" in to_markdown("t", table, per_task=True)
    rep = audit(run_dir)
    assert rep.ok, rep.violations
    assert any("reviews: 2 decision(s)" in f for f in rep.findings)


@needs_root
def test_a_resumed_search_applies_the_decisions_to_its_population(run_dir, capsys):
    assert main(["review", str(run_dir), "r01-c1", "--accept", "--why", "a person read it: the clock is untouched"]) == 0
    assert main(["review", str(run_dir), "r01-c0", "--reject", "--why", "hard-codes the dev sizes"]) == 0
    capsys.readouterr()
    _, status = resume_run(run_dir, rounds=2, quiet=True)
    assert status == "finished"
    events = journal.read(run_dir / "journal.jsonl")
    second = [e["data"] for e in events if e["kind"] == "selection" and e["data"]["round"] == 2]
    assert second[0]["parent_id"] == "r01-c1"  # the accepted one is the island's best now
    state = json.loads(sorted(run_dir.glob("checkpoints/round-*"))[-1].joinpath("pesflow_state.json").read_text())
    pop = state["population"]
    members = set(pop["members"][0])
    assert "r01-c1" in members and "r01-c0" not in members
    # its re-grade and hidden score come back suspect from the screens, and the decision holds
    run = json.loads((run_dir / "run.json").read_text())
    assert run["best"]["id"] == "r01-c1" and "dropped" not in run["best"]
    rep = audit(run_dir)
    assert rep.ok, rep.violations


@pytest.mark.parametrize("args,words", [
    (["/nonexistent/run", "r01-c0", "--accept", "--why", "x"], "is not a pesflow run directory"),
    (["RUN", "r09-c9", "--accept", "--why", "x"], "no graded candidate 'r09-c9'"),
    (["RUN", "abc", "--accept", "--why", "x"], "no graded candidate 'abc'"),
    (["RUN", "r01-c0", "--accept", "--reject", "--why", "x"], "exactly one of --accept or --reject"),
    (["RUN", "r01-c0", "--why", "x"], "exactly one of --accept or --reject"),
    (["RUN", "r01-c0", "--reject", "--why", "  "], "--why TEXT is required"),
    (["RUN", "r01-c0", "--reject"], "--why TEXT is required"),
])
def test_bad_input_is_one_line_and_exit_2(run_dir, capsys, args, words):
    lines_before = len(journal.read(run_dir / "journal.jsonl"))
    assert main(["review", *[str(run_dir) if a == "RUN" else a for a in args]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("pesflow review: ") and words in err
    assert len(journal.read(run_dir / "journal.jsonl")) == lines_before


@pytest.mark.parametrize("forge,words", [
    ("by_hand", "hash does not match its content"),
    ("unknown_candidate", "names candidate 'r09-c9', which no candidate event records"),
    ("wrong_hash", "the hash it names is not candidate r01-c0's code"),
    ("no_why", "carries no why"),
])
def test_audit_catches_a_forged_review_event(run_dir, forge, words):
    path = run_dir / "journal.jsonl"
    h0, h1 = hash_of(run_dir, "r01-c0"), hash_of(run_dir, "r01-c1")
    if forge == "by_hand":  # appended without the chain: whoever wrote it did not know the hash
        last = journal.read(path)[-1]
        line = {"seq": last["seq"] + 1, "ts": last["ts"], "kind": "review", "prev": last["hash"], "hash": "0" * 64,
                "data": {"candidate_id": "r01-c1", "content_hash": h1, "decision": "accept", "why": "trust me"}}
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")
    else:  # chained correctly, but naming what is not there
        data = {"unknown_candidate": ("r09-c9", h1, "accept", "x"), "wrong_hash": ("r01-c0", h1, "accept", "x"),
                "no_why": ("r01-c0", h0, "reject", "")}[forge]
        Journal(path).append("review", candidate_id=data[0], content_hash=data[1], decision=data[2], why=data[3])
    rep = audit(run_dir)
    assert not rep.ok and any(words in v for v in rep.violations), rep.violations


def test_two_writers_keep_one_chain(tmp_path):
    """A review journaled while the search's own writer is open: each chains onto the other's lines."""
    path = tmp_path / "journal.jsonl"
    search = Journal(path)
    search.append("warning", message="round 1")
    person = Journal(path)
    person.append("review", candidate_id="r01-c0", content_hash="h", decision="reject", why="x")
    search.append("warning", message="round 2")
    assert journal.verify(path) == [] and [e["seq"] for e in journal.read(path)] == [0, 1, 2]
