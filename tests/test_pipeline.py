"""The steady state's parts on their own: the grader pool's order and sharing, the busy meters,
the candidate budget and the planner's bounded context (fast; the whole loop is pinned by
tests/test_loop.py and tests/test_durable.py)."""

from __future__ import annotations

import threading
import time

import pytest

from agent.config import LoopConfig
from agent.population.database import Solution
from agent.search import roles
from agent.search.pipeline import GraderPool, Pipeline, in_parallel
from agent.population.code_key import code_key
from agent.search.utilization import Busy, Depth, utilization
from evaluator.verdict import Verdict


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_busy_counts_union_and_slot_seconds_and_depth_its_time_weighted_mean():
    c = Clock()
    b, q = Busy(c), Depth(c)
    b.enter()
    q.add(2)
    c.t = 1.0
    b.enter()  # two at once from 1 s to 2 s
    c.t = 2.0
    b.exit()
    q.add(-2)
    c.t = 3.0
    b.exit()
    c.t = 4.0
    assert b.seconds() == (3.0, 4.0)  # 3 s with any running, 4 slot-seconds
    assert q.mean() == pytest.approx(1.0) and q.peak == 2  # 2 for 2 s of 4
    u = utilization(4.0, b, 2, Busy(c), q, 2)
    assert u["grader_busy_share"] == 0.5 and u["llm_busy_share"] == 0.0


def test_pool_grades_the_oldest_round_first_and_the_same_code_once():
    order: list[str] = []
    gate = threading.Event()

    def grade(files: dict[str, str], k: int) -> Verdict:
        gate.wait(5)
        order.append(files.get("f", "f.py"))
        return Verdict(task="t", status="ok", mode="candidate", backend="local", grader="dev")

    pool = GraderPool(grade, 1, Busy(), Depth())
    first = pool.submit({"f": "r3"}, (3, 0))  # the one grader takes it at once and waits at the gate
    time.sleep(0.05)
    late = pool.submit({"f": "r2c1"}, (2, 1))
    early = pool.submit({"f": "r2c0"}, (2, 0))
    again = pool.submit({"f": "r2c0"}, (5, 0))  # the same code in a later round: one grading, one future
    pool.known([code_key({"f": "old"})])
    assert pool.submit({"f": "old"}, (1, 0)).result(1) is None  # already in the population: never graded
    gate.set()
    assert again is early and early.result(5).status.value == "ok" and late.result(5) and first.result(5)
    moved = pool.submit({"f": "r9"}, (9, 0))
    assert order == ["r3", "r2c0", "r2c1"] and moved.result(5)
    # the same program spelled again (a comment, spacing): the first spelling's grading
    assert pool.submit({"f.py": "x = 1\n"}, (9, 1)) is pool.submit({"f.py": "x  =  1  # again\n"}, (9, 2))
    pool.close()
    assert pool.submit({"f": "new"}, (9, 0)).cancelled()  # after close nothing is graded


def test_pool_runs_n_gradings_at_once_and_a_failing_grading_fails_only_its_future():
    running, peak, lock = [0], [0], threading.Lock()

    def grade(files: dict[str, str], k: int) -> Verdict:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
        if files["f"] == "bad":
            raise RuntimeError("grader crashed")
        return Verdict(task="t", status="ok", mode="candidate", backend="local", grader="dev")

    pool = GraderPool(grade, 2, Busy(), Depth())
    fs = [pool.submit({"f": str(i)}, (1, i)) for i in range(4)] + [pool.submit({"f": "bad"}, (1, 9))]
    assert all(f.result(5).status.value == "ok" for f in fs[:4]) and peak[0] == 2
    with pytest.raises(RuntimeError, match="grader crashed"):
        fs[4].result(5)
    pool.close()
    assert len(pool.busy_each()) == 2 and all(0 < x <= 1 for x in pool.busy_each())


def test_pipeline_and_in_parallel_keep_order_and_hand_back_errors():
    p = Pipeline()
    p.start(2, lambda: "two")
    p.start(1, lambda: (_ for _ in ()).throw(ValueError("boom")))
    assert p.running(1) and p.result(2) == "two" and not p.running(2)
    with pytest.raises(ValueError, match="boom"):
        p.result(1)
    assert in_parallel([lambda: (time.sleep(0.05), "a")[1], lambda: "b"]) == ["a", "b"]


def test_the_budget_in_candidates_sets_the_rounds_and_the_last_round_gets_the_rest():
    loop = LoopConfig(candidates=5, children=2)
    assert loop.rounds == 3 and [loop.children_in(k) for k in (1, 2, 3)] == [2, 2, 1]
    assert LoopConfig(rounds=4, children=3).children_in(4) == 3


def sol(i: int, code: str, **kw) -> Solution:
    return Solution(id=f"r{i:02d}-c0", parent_id="baseline", island=0, round=i, files={"k.py": code},
                    content_hash=f"h{i}", status=kw.pop("status", "ok"), speedup=kw.pop("speedup", 1.5),
                    lessons="x" * 400, **kw)


def test_the_planner_prompt_stays_within_its_share_however_much_the_search_gathered():
    parent_code = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(60))
    ctx = roles.Context(instruction="Make it fast. " * 40, title="t", scope=["k.py"], context_share=0.25)
    parent = sol(0, parent_code).model_copy(update={"id": "baseline"})
    first = roles.planner_prompt(ctx, parent, [], [], [])
    big = [sol(i, parent_code.replace("+ 1\n", f"* {i}\n") + "# more\n" * 300) for i in range(1, 4)]
    fails = [sol(i, "x", status="hard_fail", hard_fail_reasons=["tests_failed:1/2"]) for i in range(4, 8)]
    memory = [f"lesson {i}: " + "y" * 390 for i in range(12)]
    later = roles.planner_prompt(ctx, parent, big, fails, memory)
    # bounded whatever the population: its share, and the floor that lets one failure's feedback through
    assert len(first) < len(later) <= 1.3 * len(first) + roles.MIN_FAILURES
    assert len(roles.planner_prompt(ctx, parent, big * 5, fails * 10, memory * 3)) <= 1.3 * len(first) + roles.MIN_FAILURES
    assert "lesson 0" in later and "r01-c0" in later and "```diff" in later  # each section still has its say


def test_code_an_older_round_also_needs_moves_up_the_queue():
    order: list[str] = []
    gate = threading.Event()

    def grade(files: dict[str, str], k: int) -> Verdict:
        gate.wait(5)
        order.append(f"{files['f']}@{k}")
        return Verdict(task="t", status="ok", mode="candidate", backend="local", grader="dev")

    pool = GraderPool(grade, 1, Busy(), Depth())
    busy = pool.submit({"f": "x"}, (1, 0))
    time.sleep(0.05)
    a = pool.submit({"f": "a"}, (5, 0))
    b = pool.submit({"f": "b"}, (4, 0))
    assert pool.submit({"f": "a"}, (2, 1)) is a  # round 2 needs the same code: one grading, now before b
    gate.set()
    assert busy.result(5) and a.result(5) and b.result(5)
    pool.close()
    assert order == ["x@1", "a@2", "b@4"] and pool.queue.peak == 2
