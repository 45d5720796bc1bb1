"""What the search and the readers do with a grading's trust (evaluator/trust/findings.py): a
suspect (or one awaiting review) is never fitness, parent, inspiration, best, pick or table
figure; its lesson names the exploit; no prompt shows its figures; run.json and the report list it.

The end-to-end search grades the toy package for real. Its scripted model offers exploits beside
honest answers: one stops the grader's trace counter (`sys.settrace(None)`, an exploit the toy
grader cannot tell), one is honest under the dev grader and only cheats the hidden one. Where the
evaluator's own screens do not flag them (they are another engineer's, still landing), a tiny
explicit seam does, `seam_grading`: it sets trust on verdicts whose candidate holds the marker,
as a screen would, before the verdict is journaled.
"""

from __future__ import annotations

import html
import json
import random
import re
from pathlib import Path

import pytest

from agent.cli import main
from agent.config import load_config
from agent.experiments.tables import aggregate, method_table, to_csv, to_markdown
from agent.population.database import Population, PopulationConfig, Solution
from agent.population.loongflow_format import loongflow_solution
from agent.readers.audit import audit
from agent.readers.report import write_report
from agent.rundir import journal
from agent.search import roles
from agent.search.grading import Grading
from agent.search.prompts import verdict_text
from agent.search.protocol import BENCHMARK
from agent.search.session import start_run
from evaluator.evaluation import Evaluator
from evaluator.trust.findings import FAMILIES, Finding, Trust, is_result
from evaluator.verdict import Status, Verdict
from tests.conftest import FIXTURES, needs_root, toy_tasks_root
from tests.llm_server import Reply, Request, ScriptedLLMServer

BASE = {"toy/kernel.py": "def sum_squares(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n"}
UNROLL = ("def sum_squares(n):\n    total = 0\n    i = 0\n    while i + 1 < n:\n        total += i * i + (i + 1) * (i + 1)\n"
          "        i += 2\n    if i < n:\n        total += i * i\n    return total\n")
CLOSED = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
# Honest under the dev grader, fewest trace events of all; the seam flags it under the hidden one only.
SNIFF = "def sum_squares(n):\n    return (n - 1) * n * (2 * n - 1) // 6  # GRADER_MODE_SNIFF\n"
# Exact, and the toy grader's trace counter stops at its first line: a huge "speedup".
SETTRACE = ("import sys\n\n\ndef sum_squares(n):\n    sys.settrace(None)\n    total = 0\n    for i in range(n):\n"
            "        total += i * i\n    return total\n")
SETTRACE_CLOSED = "import sys\n\n\ndef sum_squares(n):\n    sys.settrace(None)\n    return (n - 1) * n * (2 * n - 1) // 6\n"


# ---------------------------------------------------------------- the scripted model and the seam


def exploit_engineer(req: Request) -> Reply:
    """Executor 1 answers honestly, executor 2 cheats; the summarizer never names the exploit."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: f"lesson on {i}" for i in ids}, "memory": ["keep results exact"]}))
    if "You are the planner" in user:
        return Reply(text="Make it faster.")
    child = int(re.search(r"You are executor (\d+) of", user).group(1))
    parent = re.search(r"### toy/kernel.py\n```python\n(.*?)\n```", user, re.S).group(1)
    if "settrace" in parent:
        return Reply(text="")
    if "for i in range" in parent:
        code = UNROLL if child == 1 else SETTRACE
    elif "while" in parent:
        code = CLOSED if child == 1 else SNIFF
    else:  # a closed form already: nothing honest is left
        code = "" if child == 1 else SETTRACE_CLOSED
    return Reply(text=f"toy/kernel.py\n```python\n{code}```\n" if code else "")


def seam_grading(monkeypatch) -> None:
    """Trust on a verdict whose candidate holds a marker, unless a real screen flagged it already."""
    real = Grading._evaluate

    def graded(self, files, grader, out, loop=None, profiled=False, bar=None, scored=None):  # noqa: ANN001
        v = real(self, files, grader, out, loop, profiled, bar, scored)
        code = "\n".join(files.values())
        found = []
        if "sys.settrace(" in code:
            found.append(Finding(family="guard_evasion", evidence="sys.settrace called at toy/kernel.py:5 (test seam)",
                                 screen="static"))
        if "GRADER_MODE_SNIFF" in code and grader == "hidden":
            found.append(Finding(family="grader_sniffed", evidence="KERNELBENCH_VERIFY_MODE read by toy/kernel.py:2 "
                                 "(test seam)", screen="runtime"))
        if found and not v.trust.suspect:
            v.trust = Trust.of(found, {"seam": True})
        return v

    monkeypatch.setattr(Grading, "_evaluate", graded)


def search_config(tmp_path: Path, cache_dir: Path, server: ScriptedLLMServer, **sets: object):
    # The toy's honest closed form is ~1000x, far past its oracle: the plausibility screen would
    # ask for a review of it, and so would pesflow's own timing of it where a loaded machine reads
    # it 3x under the toy's traced figure, questions these tests do not ask (the review's tests
    # make their own).
    items = ["evaluator.trust.plausibility_ratio=1e9", "evaluator.trust.review_at_reward_cap=false",
             "evaluator.trust.reproduce_ratio=0", "llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}", "loop.rounds=3", "loop.children=2",
             "loop.pipeline_depth=1", "loop.context_share=2", "population.islands=1", "population.exploration_ratio=0",
             "population.exploitation_ratio=1", f"run.out={tmp_path / 'traces'}", "run.quiet=true",
             f"evaluator.local.cache_dir={cache_dir}", "llm.backoff_base_sec=0.01", "llm.timeout_sec=20"]
    return load_config(sets=items + [f"{k}={v}" for k, v in sets.items()])


# ---------------------------------------------------------------- the population


def sol(id: str, speedup: float, trust: Trust | None = None, round: int = 1) -> Solution:
    files = {"toy/kernel.py": BASE["toy/kernel.py"] + f"# {id}\n"} if round else dict(BASE)
    return Solution(id=id, parent_id=None if round == 0 else "baseline", island=0, round=round, files=files,
                    content_hash=f"h-{id}", status="ok", speedup=speedup, trust=trust or Trust())


SUSPECT = Trust(suspect=True, reasons=["timer_replaced: time.perf_counter by toy/kernel.py:3"])
REJECTED = Trust(review={"decision": "reject", "why": "hard-codes the dev sizes", "at": "t"})
REVIEW = Trust(needs_review=True, reasons=["implausible_speedup: 1234.5x where the reference reaches 2.71828x"])


def exploit_population() -> Population:
    pop = Population(PopulationConfig(islands=1, inspirations=3), BASE)
    pop.add(sol("baseline", 1.0, round=0))
    pop.add(sol("honest", 2.0))
    pop.add(sol("cheat", 1234.5, SUSPECT))
    pop.add(sol("rejected", 999.0, REJECTED))
    return pop


def test_a_suspect_is_never_fitness_parent_inspiration_or_best():
    pop = exploit_population()
    cheat, rejected = pop.get("cheat"), pop.get("rejected")
    assert cheat.fitness is None and rejected.fitness is None and pop.get("honest").fitness == 2.0
    assert pop.best().id == "honest" and [s.id for s in pop.top(5)] == ["honest", "baseline"]
    assert {s.id for s in pop.members(0)} == {"baseline", "honest"} and {s.id for s in pop.elites(0).values()} <= {"baseline", "honest"}
    assert {"cheat", "rejected"} <= {s.id for s in pop.failures()}  # kept, as failures, for the summarizer
    rng = random.Random(0)
    for _ in range(200):
        parent, insp = pop.sample(0, rng)
        assert parent.id not in ("cheat", "rejected") and not {s.id for s in insp} & {"cheat", "rejected"}
    assert loongflow_solution(pop, cheat)["score"] == 0.0
    assert Population.from_dict(pop.to_dict()).get("cheat").trust.suspect  # a checkpoint keeps it


def test_a_deferred_grading_is_a_member_never_the_best_and_leaves_when_its_full_screen_flags_it():
    """trust.deferred: a search's figure at or under its best so far, probes not run yet. It is a
    member (a parent picked from it is screened in full first: agent/search/steps.py select), never
    the best until settled; the final pick still ranks it (its regrade runs every probe)."""
    waiting = Trust(deferred=True, checks={"probes": {"ran": False, "deferred": True}})
    pop = exploit_population()
    pop.add(sol("waiting", 3.0, waiting))  # over the honest best: as after the best it was graded under is rejected
    assert pop.get("waiting").fitness == 3.0 and "waiting" in {s.id for s in pop.members(0)}
    assert pop.best().id == "honest" and pop.top(1)[0].id == "waiting"
    rng = random.Random(0)  # shown to no model as an inspiration before its full screen
    assert not any("waiting" in {s.id for s in pop.sample(0, rng)[1]} for _ in range(200))
    pop.settle("waiting", Trust(checks={"probes": {"ran": True}}), counts=True)
    assert not pop.get("waiting").trust.deferred and pop.best().id == "waiting"
    pop.add(sol("hidden-cheat", 1.5, waiting))
    pop.settle("hidden-cheat", SUSPECT, counts=False)
    gone = pop.get("hidden-cheat")
    assert gone.fitness is None and gone.trust.suspect and not gone.trust.deferred
    assert "hidden-cheat" not in {s.id for s in pop.members(0)} and "hidden-cheat" not in pop.cells(0).values()
    assert Population.from_dict(pop.to_dict()).get("hidden-cheat").trust.suspect  # a checkpoint keeps it
    pop.add(sol("flaky", 1.2, waiting))
    pop.settle("flaky", Trust(), counts=False)  # graded again, it was not correct: it leaves too, and says why
    assert pop.get("flaky").fitness is None and "not correct" in pop.get("flaky").trust.reasons[0]


def test_one_awaiting_review_follows_the_one_rule():
    """Whether a needs_review grading counts is evaluator.trust's call (is_result); the population obeys it."""
    pop = exploit_population()
    pop.add(sol("too-good", 999.0, REVIEW))
    counts = is_result(REVIEW)
    assert (pop.get("too-good").fitness == 999.0) is counts and (pop.best().id == "too-good") is counts
    text = verdict_text(pop.get("too-good"), BENCHMARK)
    assert "2.718" not in text and ("999" in text) is counts  # the evidence holds the reference's figure: never said


def test_a_review_accepts_one_back_and_rejects_one_out():
    pop = exploit_population()
    pop.review("h-cheat", {"decision": "accept", "why": "the clock patch is dead code", "at": "t"})
    assert pop.get("cheat").fitness == 1234.5 and pop.best().id == "cheat" and "cheat" in {s.id for s in pop.members(0)}
    pop.review("h-cheat", {"decision": "reject", "why": "on second look it is live", "at": "t"})
    pop.review("h-honest", {"decision": "reject", "why": "reads the grader's files", "at": "t"})
    assert pop.best().id == "baseline" and [s.id for s in pop.members(0)] == ["baseline"]
    assert {s.id for s in pop.elites(0).values()} == {"baseline"}  # the cells hold no rejected one either


# ---------------------------------------------------------------- what the model sees


class Said:
    def __init__(self, text: str):
        self.text, self.sent, self.error = text, "", None


class OneAnswer:
    """A gateway that answers every call with one text and keeps the prompts."""

    def __init__(self, text: str):
        self.text, self.prompts = text, []

    def call(self, role, system, user, tag):  # noqa: ANN001
        self.prompts.append(user)
        out = Said(self.text)
        out.sent = user
        return out


def test_prompts_show_no_forged_figure_and_the_lesson_names_the_family():
    pop = exploit_population()
    honest, cheat = pop.get("honest"), pop.get("cheat")
    too_good = sol("too-good", 999.0, REVIEW.model_copy(update={"review": {"decision": "reject", "why": "no", "at": "t"}}))
    text = verdict_text(cheat, BENCHMARK)
    assert "1234" not in text and "NOT COUNTED" in text and FAMILIES["timer_replaced"] in text and "perf_counter" in text
    review = verdict_text(too_good, BENCHMARK)
    assert "999" not in review and "1234" not in review and "2.718" not in review and "implausible_speedup" in review
    ctx = roles.Context(instruction="Make sum_squares fast. " * 400, title="toy", scope=["toy/kernel.py"])
    planner = roles.planner_prompt(ctx, honest, [], [cheat, too_good], [])
    assert "timer_replaced" in planner and not re.search(r"1234|999\.0|2\.718", planner)
    gw = OneAnswer(json.dumps({"children": {"cheat": "looked fast", "too-good": "great"}, "memory": ["m"]}))
    lessons, *_ = roles.summarize(gw, ctx, 1, honest, "plan", [cheat, too_good], {}, tag="r1/summary")
    assert not re.search(r"1234|999\.0|2\.718", gw.prompts[0])
    assert lessons["cheat"].startswith("NOT COUNTED") and FAMILIES["timer_replaced"] in lessons["cheat"]
    assert lessons["cheat"].endswith("looked fast") and "implausible_speedup" in lessons["too-good"]
    assert FAMILIES["timer_replaced"] in roles.default_lesson(cheat)


# ---------------------------------------------------------------- tables


def row(method: str, seed: int, speedup: float, trust: dict | None = None) -> dict:
    return {"task": "kfc/toy-sum", "reward_class": "performance", "method": method, "seed": seed, "reward": 0.5,
            "speedup": speedup, "correct": True, "usd": 0.0, "tokens": 10, "scorings": {"dev": 1, "hidden": 1},
            "over_budget": False, "wall_seconds": 1.0, "counted": trust is None, "trust": trust}


def test_a_suspect_cell_is_flagged_and_in_no_aggregate():
    flagged = {"suspect": True, "families": ["timer_replaced"], "reasons": ["timer_replaced: x"], "review": None}
    waits = {"suspect": False, "needs_review": True, "families": ["implausible_speedup"], "reasons": ["x"], "review": None}
    rows = [row("loop", 0, 2.0), row("loop", 1, 8.0), row("loop", 2, 1000.0, flagged), row("cheat", 0, 50.0, flagged),
            {**row("loop", 3, 4.0, waits), "counted": True}]
    table = method_table(rows)
    loop, cheat = table
    assert loop["speedup_geomean"] == pytest.approx(4.0) and loop["n"] == 3 and len(loop["left_out"]) == 1
    assert cheat["n"] == 0 and cheat["speedup_geomean"] is None and cheat["reward_mean"] is None
    md = to_markdown("t", table, per_task=True)
    assert "† seed 2: timer_replaced; ‡ seed 3: awaiting review" in md and "1000" not in md and "4.000x" in md
    assert "| cheat | - | 0 | - |" in md
    assert "kfc/toy-sum seed 2: timer_replaced" in to_csv(table)
    assert aggregate([])["n"] == 0


# ---------------------------------------------------------------- pesflow evaluate


@pytest.mark.parametrize("status,trust,code,line", [
    ("ok", Trust(suspect=True, reasons=["timer_replaced: a", "output_cached: b"]), 4, "suspect: timer_replaced: a; output_cached: b"),
    ("hard_fail", Trust(suspect=True, reasons=["timer_replaced: a"]), 1, "suspect: timer_replaced: a"),
    ("ok", Trust(needs_review=True, reasons=["implausible_speedup: far"]), 0, "needs review: implausible_speedup: far"),
])
def test_evaluate_says_suspect_in_one_line_and_exits_4(monkeypatch, capsys, status, trust, code, line):
    def graded(self, task, **kw):  # noqa: ANN001
        return Verdict(task=task.name, mode="candidate", backend="local", grader="dev", status=Status(status), speedup=9.0,
                       hard_fail_reasons=["correctness_failed"] if status == "hard_fail" else [], trust=trust)

    monkeypatch.setattr(Evaluator, "evaluate", graded)
    args = ["evaluate", "kfc/toy-sum", "--tasks-root", str(FIXTURES), "--mode", "noop"]
    assert main(args) == code
    assert line in capsys.readouterr().out.splitlines()
    assert main([*args, "--json"]) == code
    out, err = capsys.readouterr()
    assert json.loads(out)["trust"]["reasons"] == trust.reasons and err.splitlines()[-1] == line


# ---------------------------------------------------------------- the whole search


@pytest.fixture(scope="module")
def exploit_run(tmp_path_factory, cache_dir):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    seam_grading(mp)
    tmp = tmp_path_factory.mktemp("exploits")
    root = tmp / "tasks"
    toy_tasks_root(root)
    try:
        with ScriptedLLMServer(exploit_engineer) as server:
            run_dir, status = start_run(search_config(tmp, cache_dir, server), "kfc/toy-sum", [str(root)])
            requests = list(server.requests)
    finally:
        mp.undo()
    assert status == "finished"
    return run_dir, requests


@needs_root
def test_a_search_offered_exploits_ends_with_an_honest_best(exploit_run):
    run_dir, requests = exploit_run
    run = json.loads((run_dir / "run.json").read_text())
    events = journal.read(run_dir / "journal.jsonl")
    cheats = {"r01-c1", "r03-c1"}  # sys.settrace under every grader; r02-c1 cheats the hidden grader only
    # the pick: the dev-best (r02-c1) was dropped when its hidden score came back suspect, for the next honest one
    assert run["best"]["id"] == "r02-c0" and run["best"]["grader"] == "hidden" and run["best"]["trust"]["suspect"] is False
    assert [(d["id"], d["grader"]) for d in run["best"]["dropped"]] == [("r02-c1", "hidden")]
    final = (run_dir / "final/files/toy/kernel.py").read_text()
    assert final == CLOSED and "- r02-c1 (final-hidden, hidden grader): grader_sniffed" in (run_dir / "final/report.md").read_text()
    # never a parent, an inspiration or the best by round
    for e in events:
        if e["kind"] == "selection":
            assert e["data"]["parent_id"] not in cheats and not cheats & set(e["data"]["inspiration_ids"])
    assert not cheats & {b["best_id"] for b in run["best_by_round"]}
    # run.json names each suspect grading, its grader and why (and those awaiting review, where a screen says so)
    listed = {(s["candidate_id"], s["grader"], s["label"]): s for s in run["suspects"] if s["suspect"]}
    assert set(listed) == {("r01-c1", "dev", "search"), ("r03-c1", "dev", "search"), ("r02-c1", "hidden", "final-hidden")}
    assert all(not s["counts"] and s["reasons"] and len(s["content_hash"]) == 64 for s in listed.values())
    assert all(s["needs_review"] and s["reasons"] for s in run["suspects"] if not s["suspect"])
    assert any(r.startswith("guard_evasion:") for r in listed[("r01-c1", "dev", "search")]["reasons"])
    assert listed[("r02-c1", "hidden", "final-hidden")]["reasons"][0].startswith("grader_sniffed:")
    # the journal's verdict events carry the trust verdict
    verdicts = {e["data"]["content_hash"]: e["data"]["verdict"] for e in events if e["kind"] == "verdict" and e["data"]["label"] == ""}
    assert verdicts[listed[("r01-c1", "dev", "search")]["content_hash"]]["trust"]["suspect"] is True
    # the lesson names the family; no prompt shows the exploit's figure
    lessons = {k: v for e in events if e["kind"] == "summary" for k, v in e["data"]["lessons"].items()}
    assert lessons["r01-c1"].startswith("NOT COUNTED") and FAMILIES["guard_evasion"] in lessons["r01-c1"]
    forged = verdicts[listed[("r01-c1", "dev", "search")]["content_hash"]]["speedup"]
    assert forged > run["best"]["dev_speedup"]  # the exploit did fool the grader: counted, it would have won
    bodies = [json.dumps(r.body) for r in requests]
    assert not any(f"{forged:.3f}" in b or str(forged) in b for b in bodies)
    assert any("guard_evasion" in b and "You are the planner" in b for b in bodies)  # recent failures say why
    assert audit(run_dir).ok, audit(run_dir).violations


@needs_root
def test_the_report_lists_each_suspect_and_why(exploit_run):
    run_dir, _ = exploit_run
    page = write_report(run_dir, run_dir.parent / "report.html").read_text()
    section = page[page.index('id="suspects-table"'):]
    section = section[: section.index("</table>")]
    for cid in ("r01-c1", "r03-c1", "r02-c1"):
        assert f"<td>{cid}</td>" in section
    assert "guard_evasion" in section and "grader_sniffed" in section and html.escape(FAMILIES["grader_sniffed"]) in section
    data = json.loads(re.search(r'id="pesflow-data">(.*?)</script>', page, re.S).group(1))
    kinds = {c["id"]: c["kind"] for c in data["candidates"]}
    assert kinds["r01-c1"] == "suspect" and kinds["r02-c0"] in ("improved", "needs_review") and data["best_id"] == "r02-c0"


# ---------------------------------------------------------------- deferred probes in a search


def deferring_engineer(req: Request) -> Reply:
    """The closed form first (the best, probed), then variants of the unrolled loop: correct, faster
    than the baseline, never past the best, so their probes wait until one is picked."""
    user = req.messages[-1]["content"]
    if "You are the summarizer" in user:
        ids = re.findall(r"^## (r\d\d-c\d+):", user, re.M)
        return Reply(text=json.dumps({"children": {i: "noted" for i in ids}, "memory": []}))
    if "You are the planner" in user:
        return Reply(text="Make it faster.")
    rnd = int(re.search(r"round (\d+)", user).group(1)) if re.search(r"round (\d+)", user) else len(user)
    code = CLOSED if "You are executor 1 of" in user and "_v" not in user and "while" not in user and "n -= 1" not in user \
        else UNROLL + f"\n_v{rnd}_{len(user) % 997} = 1\n"
    return Reply(text=f"toy/kernel.py\n```python\n{code}```\n")


@needs_root
def test_a_child_under_the_best_is_probed_only_once_picked_as_a_parent(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    root = tmp_path / "tasks"
    toy_tasks_root(root)
    with ScriptedLLMServer(deferring_engineer) as server:
        cfg = search_config(tmp_path, cache_dir, server, **{"loop.rounds": 7, "loop.children": 1,
                                                             "population.exploration_ratio": 1, "population.exploitation_ratio": 0,
                                                             "evaluator.trust.defer_below_best": "always"})
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
    assert status == "finished"
    events = journal.read(run_dir / "journal.jsonl")
    children = {e["data"]["id"]: e["data"]["content_hash"] for e in events if e["kind"] == "candidate"}
    verdicts = [e["data"] for e in events if e["kind"] == "verdict" and not e["data"].get("reused")]
    waited = {d["content_hash"] for d in verdicts if d["label"] == "" and d["verdict"]["trust"].get("deferred")}
    assert waited, "no child under the best had its probes deferred"
    for d in verdicts:
        t = d["verdict"]["trust"]
        if d["content_hash"] in waited and d["label"] == "":
            assert t["checks"]["watch"] == {**t["checks"]["watch"], "watched": False, "deferred": True}
            assert not (Path(d["verdict"]["log_dir"]) / "watched").exists()
            assert d["verdict"]["speedup"] <= d["result_bar"]
    settled, order = set(), []
    for e in events:
        if e["kind"] == "settled":
            settled.add(e["data"]["id"])
            assert e["data"]["counts"]
        if e["kind"] == "selection" and children.get(e["data"]["parent_id"]) in waited:
            order.append(e["data"]["parent_id"])
            assert e["data"]["parent_id"] in settled, "a deferred child was used as a parent before its full screen"
    assert order, "no deferred child was picked as a parent (seed)"
    checks = [d for d in verdicts if d["label"] == "parent-check"]
    assert {d["content_hash"] for d in checks} == {children[i] for i in settled}
    assert all(d["verdict"]["trust"]["checks"]["probes"]["ran"] and not d["verdict"]["trust"]["deferred"] for d in checks)
    # the child's official grading stands: its check is the watched grading alone, its figure the child's
    child = {d["content_hash"]: d["verdict"] for d in verdicts if d["label"] == ""}
    for d in checks:
        w = d["verdict"]["trust"]["checks"]["watch"]
        assert w["watched"] and w["scored"] == child[d["content_hash"]]["log_dir"], w
        assert d["verdict"]["grader_seconds"] == child[d["content_hash"]]["grader_seconds"]
        assert d["verdict"]["speedup"] == child[d["content_hash"]]["speedup"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["best"]["id"] not in {i for i, h in children.items() if h in waited and i not in settled}
    assert audit(run_dir).ok, audit(run_dir).violations
