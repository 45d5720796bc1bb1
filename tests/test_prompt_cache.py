"""Prompt caching priced right (issue 40): a round's prompts open with the same block byte for
byte, Anthropic requests mark it (at most four breakpoints), each provider's cached tokens are
read from its response and priced at their rate, and the USD cap counts them. The real SDK
clients over HTTP against the scripted server, whose caches behave as tests/llm_cache.py says."""

from __future__ import annotations

import json

import pytest

from agent.config import load_config
from agent.llm import Budget, LLMError, LLMRequest, Message, PriceTable, RetryPolicy
from agent.llm.anthropic_provider import MAX_BREAKPOINTS, AnthropicProvider
from agent.llm.openai_provider import OpenAIProvider
from agent.llm.pricing import usd_of
from agent.llm.types import Usage
from agent.rundir.schema import journal_totals
from agent.search.session import start_run
from tests.conftest import toy_tasks_root
from tests.llm_server import Reply, ScriptedLLMServer, commenting_children, roles

KEY = "sk-test-0123456789abcdef"
FAST = RetryPolicy(max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=10)
MODELS = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-6"}  # both priced with cached rates
PRICES = PriceTable.load()


pytestmark = pytest.mark.usefixtures("loopback_unproxied")


@pytest.fixture
def srv():
    with ScriptedLLMServer(lambda req: Reply(text="ok", output_tokens=10)) as s:
        yield s
        assert not s.errors and not s.unmatched


def client(api: str, srv: ScriptedLLMServer, budget: Budget | None = None):
    cls, url = (OpenAIProvider, srv.openai_base_url) if api == "openai" else (AnthropicProvider, srv.anthropic_base_url)
    return cls(MODELS[api], base_url=url, api_key=KEY, retry=FAST, budget=budget, prices=PRICES)


def asked(stable: str, tail: str, cuts: int = 2) -> LLMRequest:
    """A request whose user text opens with `stable`, marked at `cuts` places inside it, then `tail`."""
    step = len(stable) // cuts
    return LLMRequest(role="executor", messages=[
        Message(role="system", content="You write kernels."),
        Message(role="user", content=stable + tail, breaks=[step * (i + 1) for i in range(cuts)])])


STABLE = "".join(f"line {i}: the task and the parent's code, the same in every call of a round\n" for i in range(400))  # ~7k tokens


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_cached_tokens_are_read_from_the_response_and_priced_at_their_rate(api, srv):
    c = client(api, srv)
    first = c.complete(asked(STABLE, "executor 1 of 2: the plain variant"))
    second = c.complete(asked(STABLE, "executor 2 of 2: a bolder variant"))
    price = PRICES.lookup(MODELS[api])
    assert first.usage.cache_read_tokens == 0 and second.usage.cache_read_tokens > 0.9 * len(STABLE) // 4
    assert second.usage.input_tokens >= second.usage.cache_read_tokens + second.usage.cache_write_tokens
    if api == "anthropic":  # Anthropic writes what a mark ends and bills the write; OpenAI bills reads only
        assert abs(first.usage.cache_write_tokens - len(STABLE) // 4) < 20 and second.usage.cache_write_tokens == 0
    for r in (first, second):
        assert r.cost_usd == pytest.approx(usd_of(price, r.usage))
    # the same tokens at the plain input rate would cost more: the cache is priced, not ignored
    plain = usd_of(price, Usage(input_tokens=second.usage.input_tokens, output_tokens=second.usage.output_tokens))
    assert second.cost_usd < 0.3 * plain


def test_an_anthropic_request_carries_at_most_four_breakpoints_at_its_longest_stable_prefixes(srv):
    client("anthropic", srv).complete(asked(STABLE, "the variant", cuts=6))
    (seen,) = srv.requests
    blocks = seen.body["messages"][0]["content"]
    marked = [i for i, b in enumerate(blocks) if b.get("cache_control")]
    assert len(blocks) == 7 and len(marked) == MAX_BREAKPOINTS == 4
    assert marked == [2, 3, 4, 5]  # the last four: the longest prefixes (the API finds a shorter one it holds itself)
    assert "".join(b["text"] for b in blocks) == STABLE + "the variant"


def test_the_usd_cap_stops_on_the_call_that_cached_prices_reach(srv):
    # gpt-4.1: $2.00/Mtok in, $0.50 cached; a 15k-token prompt costs $0.03 in full. At full price
    # the cap would stop the third call; read from the cache, later calls cost a quarter and more fit
    budget = Budget(0.06)
    c = client("openai", srv, budget)
    costs = []
    with pytest.raises(LLMError) as stopped:
        for i in range(50):
            costs.append(c.complete(asked(STABLE * 2, f"call {i}")).cost_usd)
    assert stopped.value.kind == "budget"
    # the cap is checked before each call: the calls made are those that began under it
    expected = next(k for k in range(1, len(costs) + 1) if sum(costs[:k]) >= 0.06)
    assert len(costs) == expected and len(costs) >= 4, costs
    assert budget.spent == pytest.approx(sum(costs))


def test_a_round_s_prompts_share_their_opening_block_and_its_cached_tokens_are_journaled(tmp_path, cache_dir, monkeypatch):
    root = tmp_path / "tasks"
    pkg = toy_tasks_root(root)
    # a task text of a real package's size (Anthropic caches no prefix under 1024 tokens)
    notes = "".join(f"- Note {i}: inputs are lists of floats; keep the sum's rounding exactly as the reference's.\n" for i in range(80))
    (pkg / "instruction.md").write_text((pkg / "instruction.md").read_text() + "\n## Notes\n" + notes)

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with ScriptedLLMServer(roles(commenting_children, "Use a closed form.")) as server:
        cfg = load_config(sets=[f"llm.default=anthropic:{MODELS['anthropic']}", f"llm.base_url={server.anthropic_base_url}",
                                "loop.rounds=1", "loop.children=2", f"run.out={tmp_path / 'traces'}", "run.quiet=true",
                                f"evaluator.local.cache_dir={cache_dir}", "llm.timeout_sec=20", "loop.score_final_with_hidden=false"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
        bodies = [r.body for r in server.requests]
    assert status == "finished"
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]
    calls = [e["data"] for e in events if e["kind"] == "llm_call" and e["data"].get("tag", "").startswith("r1/")]
    users = [c["messages"][-1] for c in calls]
    role_names = sorted(c["role"] for c in calls)
    assert role_names == ["executor", "executor", "planner", "summarizer"], role_names
    # the planner, both executors and the summarizer open with the task, the edit rules and the parent's code
    opening = min(u["breaks"][1] for u in users)
    assert len({u["content"][:opening] for u in users}) == 1
    assert "# The task" in users[0]["content"][:opening] and "# The parent program" in users[0]["content"][:opening]
    # the two executors share the round's plan too
    execs = [u for c, u in zip(calls, users) if c["role"] == "executor"]
    assert execs[0]["content"][:execs[0]["breaks"][2]] == execs[1]["content"][:execs[1]["breaks"][2]]
    for body in bodies:
        marks = sum(1 for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("cache_control"))
        assert 1 <= marks <= MAX_BREAKPOINTS
    # what the cache read is journaled with each call, priced at its rate, and counted in the totals
    later = [c for c in calls if c["role"] != "planner"]
    assert all(c["usage"]["cache_read_tokens"] > 0 for c in later), [c["usage"] for c in later]
    price = PRICES.lookup(MODELS["anthropic"])
    for c in calls:
        assert c["cost_usd"] == pytest.approx(usd_of(price, Usage(**c["usage"])))
    totals = journal_totals(events)
    assert totals["cache_read_tokens"] == sum(int(e["data"].get("usage", {}).get("cache_read_tokens", 0))
                                              for e in events if e["kind"] == "llm_call")
    assert totals["cache_read_tokens"] > 0
