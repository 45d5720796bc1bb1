"""Several models for a role, chosen by what they earn per dollar (issue 40): UCB1 over the
executor's models (agent/llm/bandit.py), each choice journaled with its reason, a replay taking
the recorded choices. Real searches against the scripted server, whose models differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.config import ConfigError, load_config
from agent.llm.bandit import ModelBandit, gain
from agent.search.session import replay_run, start_run
from tests.conftest import toy_tasks_root
from tests.llm_server import Reply, ScriptedLLMServer, roles

CLOSED = "def sum_squares(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n"
BROKEN = "def sum_squares(n):\n    return n * n\n"


def test_ucb_sends_later_calls_to_the_better_buy():
    def play(value_of, usd_of, n=60):
        b = ModelBandit(["a", "b"], explore=1.0)
        picks = []
        for _ in range(n):
            m, why = b.choose()
            picks.append(m)
            b.chosen(m)
            b.paid(m, usd_of[m])
            b.credit(m, value_of[m])
        return picks[n // 2:], why
    later, why = play({"a": 0.0, "b": 1.0}, {"a": 0.01, "b": 0.01})  # b answers well, a badly: same price
    assert later.count("b") >= 0.8 * len(later) and why["rule"] == "ucb1" and set(why["arms"]) == {"a", "b"}
    later, _ = play({"a": 1.0, "b": 1.0}, {"a": 0.10, "b": 0.01})  # as good, ten times the price
    assert later.count("b") >= 0.8 * len(later)
    assert ModelBandit(["x", "y"]).choose()[0] == "x"  # a model not yet called goes first, in order


@pytest.mark.parametrize("counts,fit,parent,want", [(True, 2.0, 1.0, 2.0), (True, 1.0, 1.0, 1.0), (True, 0.5, 1.0, 0.0),
                                                    (False, 9.0, 1.0, 0.0), (True, None, 1.0, 0.0)])
def test_a_child_earns_only_where_it_counts_and_is_no_slower_than_its_parent(counts, fit, parent, want):
    assert gain(counts, fit, parent) == pytest.approx(want)


def test_a_role_s_models_must_be_two_or_more_of_provider_model():
    with pytest.raises(ConfigError, match="two or more"):
        load_config(sets=['llm.models={"executor": ["openai:a"]}'])
    with pytest.raises(ConfigError, match="only planner and executor"):
        load_config(sets=['llm.models={"summarizer": ["openai:a", "openai:b"]}'])


def _search(tmp_path: Path, cache_dir: Path, answers: dict[str, str], prices: str, monkeypatch) -> tuple[Path, list[str]]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
    root = tmp_path / "tasks"
    toy_tasks_root(root)
    table = tmp_path / "prices.yaml"
    table.write_text(prices)
    n = [0]

    def executor(req):
        n[0] += 1
        code = answers["openai:" + req.model]
        return Reply(text=f"toy/kernel.py\n```python\n{code}_pesflow_variant = {n[0]}\n```\n")
    with ScriptedLLMServer(roles(executor, "Use the closed form.")) as server:
        cfg = load_config(sets=["llm.default=openai:good", f"llm.base_url={server.openai_base_url}", f"llm.prices={table}",
                                f'llm.models={json.dumps({"executor": sorted(answers)})}', "loop.rounds=8", "loop.children=2",
                                f"run.out={tmp_path / 'traces'}", "run.quiet=true", f"evaluator.local.cache_dir={cache_dir}",
                                "llm.timeout_sec=20", "loop.score_final_with_hidden=false", "loop.pipeline_depth=1",
                                # every round's two executor calls, and no others: the bandit's choices are counted
                                "loop.fix_turns=0", "loop.resample_duplicates=0", "loop.patience=null"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
    assert status == "finished"
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]
    return run_dir, [e["data"]["model"] for e in events if e["kind"] == "model_choice"]


def test_a_search_sends_most_later_calls_to_the_model_that_answers_well_and_a_replay_repeats_its_choices(
        tmp_path, cache_dir, monkeypatch):
    run_dir, chosen = _search(tmp_path, cache_dir, {"openai:bad": BROKEN, "openai:good": CLOSED},
                              "bad: {input_per_mtok: 1.0, output_per_mtok: 1.0}\ngood: {input_per_mtok: 1.0, output_per_mtok: 1.0}\n",
                              monkeypatch)
    assert len(chosen) == 16 and chosen[:2] == ["openai:bad", "openai:good"]  # each tried once, in order
    assert chosen[8:].count("openai:good") >= 6, chosen
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]
    credits = {e["data"]["model"]: 0.0 for e in events if e["kind"] == "model_credit"}
    for e in events:
        if e["kind"] == "model_credit":
            credits[e["data"]["model"]] += e["data"]["gain"]
    assert credits["openai:bad"] == 0 and credits["openai:good"] > 0
    replayed, _, _ = replay_run(run_dir, quiet=True)

    def by_tag(d: Path) -> dict[str, str]:  # executors of a round run at once: compare call by call, not line by line
        rows = [json.loads(ln) for ln in (d / "journal.jsonl").read_text().splitlines() if ln.strip()]
        return {r["data"]["tag"]: r["data"]["model"] for r in rows if r["kind"] == "model_choice"}
    assert by_tag(replayed) == by_tag(run_dir) and len(by_tag(run_dir)) == 16


def test_as_good_at_ten_times_the_price_loses_most_later_calls(tmp_path, cache_dir, monkeypatch):
    _, chosen = _search(tmp_path, cache_dir, {"openai:cheap": CLOSED, "openai:dear": CLOSED},
                        "cheap: {input_per_mtok: 1.0, output_per_mtok: 1.0}\ndear: {input_per_mtok: 10.0, output_per_mtok: 10.0}\n",
                        monkeypatch)
    assert chosen[8:].count("openai:cheap") >= 6, chosen


def test_a_resumed_gateway_rebuilds_each_model_s_calls_usd_and_gain_from_the_journal(tmp_path):
    from agent.llm.gateway import Gateway
    from agent.llm.leak_guard import LeakGuard
    from agent.rundir.journal import Journal

    def ev(kind, **d):
        return {"kind": kind, "data": d}
    history = [ev("model_choice", role="executor", tag="r1/c0", model="openai:a", reason={"rule": "not yet called"}),
               ev("llm_call", role="executor", tag="r1/c0", provider="openai", model="a", text="x", cost_usd=0.5),
               ev("model_choice", role="executor", tag="r1/c1", model="openai:b", reason={"rule": "not yet called"}),
               ev("llm_call", role="executor", tag="r1/c1", provider="openai", model="b", text="x", cost_usd=0.25),
               ev("model_credit", role="executor", tag="r1/c0", model="openai:a", gain=2.0),
               ev("model_credit", role="executor", tag="r1/c0", model="openai:a", gain=2.0),  # one credit a call
               # a resumed process served r1/c1 again from the record: neither a new choice nor a new call
               ev("model_choice", role="executor", tag="r1/c1", model="openai:b", reason={"rule": "recorded"}),
               ev("llm_call", role="executor", tag="r1/c1", provider="openai", model="b", text="x", cost_usd=0.0, replayed=True)]
    gw = Gateway({"default": None}, Journal(tmp_path / "journal.jsonl"), LeakGuard.__new__(LeakGuard),  # type: ignore[arg-type]  # no call is made
                 models={"executor": ["openai:a", "openai:b"]}, history=history)
    arms = gw.bandits["executor"].arms
    assert (arms["openai:a"].calls, arms["openai:a"].usd, arms["openai:a"].gain) == (1, 0.5, 2.0)
    assert (arms["openai:b"].calls, arms["openai:b"].usd, arms["openai:b"].gain) == (1, 0.25, 0.0)
