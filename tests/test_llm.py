"""The LLM layer through the real OpenAI and Anthropic SDK clients, over HTTP, against the
scripted server on 127.0.0.1."""

from __future__ import annotations

import pickle
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_server import Reply, ScriptedLLMServer, sequence  # noqa: E402

from agent.llm import (  # noqa: E402
    Budget,
    LLMClient,
    LLMError,
    LLMRequest,
    Message,
    PriceTable,
    RetryPolicy,
    Usage,
    make_client,
    parse_spec,
)
from agent.llm.anthropic_provider import AnthropicProvider  # noqa: E402
from agent.llm.base import backoff_delay, kind_for_status, parse_retry_after  # noqa: E402
from agent.rundir.secrets import redact  # noqa: E402
from agent.llm.openai_provider import OpenAIProvider  # noqa: E402

KEY = "sk-test-0123456789abcdef"
FAST = RetryPolicy(max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=10)
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-6"}
ENV_KEY = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ENV_URL = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


def request(**kw) -> LLMRequest:
    msgs = kw.pop("messages", None) or [Message(role="system", content="You write kernels."), Message(role="user", content="Speed up sum().")]
    return LLMRequest(role="executor", messages=msgs, **kw)


def provider(api: str, srv: ScriptedLLMServer, *, model: str | None = None, **kw):
    kw.setdefault("api_key", KEY)
    kw.setdefault("retry", FAST)
    if api == "openai":
        return OpenAIProvider(model or MODELS[api], base_url=srv.openai_base_url, **kw)
    return AnthropicProvider(model or MODELS[api], base_url=srv.anthropic_base_url, **kw)


pytestmark = pytest.mark.usefixtures("loopback_unproxied")


@pytest.fixture
def srv():
    with ScriptedLLMServer() as s:
        yield s
        assert not s.errors and not s.unmatched


@pytest.fixture(params=["openai", "anthropic"])
def api(request) -> str:
    return request.param


# --------------------------------------------------------------------------- answers


def test_plain_answer_usage_and_cost(api, srv):
    srv.responder = sequence(Reply(text="use a tree reduction", input_tokens=1000, output_tokens=2000))
    budget = Budget(10.0)
    client = provider(api, srv, budget=budget)
    req = request(max_tokens=321, tag="r1/c0")
    res = client.complete(req)

    assert res.text == "use a tree reduction"
    assert res.usage == Usage(input_tokens=1000, output_tokens=2000)
    expected = {"openai": (1000 * 0.15 + 2000 * 0.60) / 1e6, "anthropic": (1000 * 3.0 + 2000 * 15.0) / 1e6}[api]
    assert res.priced and res.cost_usd == pytest.approx(expected)
    assert budget.spent == pytest.approx(expected)
    assert res.attempts == 1 and res.latency_s > 0
    assert (res.provider, res.model) == (api, MODELS[api])
    assert res.finish_reason == {"openai": "stop", "anthropic": "end_turn"}[api]
    assert res.request_hash == req.request_hash(api, MODELS[api])

    (seen,) = srv.requests
    assert seen.api == api and seen.model == MODELS[api]
    assert seen.body["max_tokens"] == 321
    assert seen.messages == [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": "Speed up sum()."}]
    # OpenAI sends "Authorization: Bearer"; Anthropic's SDK x-api-key or, lately, Bearer too.
    assert KEY in (seen.headers.get("x-api-key") or seen.headers.get("authorization") or "")


def test_unpriced_model_costs_nothing_and_says_so(api, srv):
    srv.responder = sequence(Reply(text="x", input_tokens=10**6, output_tokens=10**6))
    res = provider(api, srv, model="my-local-finetune").complete(request())
    assert res.priced is False and res.cost_usd == 0.0


def test_empty_answer_is_returned_not_raised(api, srv):
    srv.responder = sequence(Reply(text=""))
    res = provider(api, srv).complete(request())
    assert res.text == "" and res.attempts == 1


def test_sampling_params_sent_only_when_set(api, srv):
    srv.responder = sequence(Reply(text="a"))
    client = provider(api, srv)
    client.complete(request())
    client.complete(request(temperature=0.7, top_p=0.9))
    unset, set_ = (r.body for r in srv.requests)
    assert "temperature" not in unset and "top_p" not in unset
    assert set_["temperature"] == 0.7 and set_["top_p"] == 0.9


def test_system_message_placement(api, srv):
    srv.responder = sequence(Reply(text="a"))
    msgs = [
        Message(role="system", content="rule one"),
        Message(role="system", content="rule two"),
        Message(role="user", content="go"),
    ]
    provider(api, srv).complete(request(messages=msgs))
    body = srv.requests[0].body
    if api == "anthropic":
        assert body["system"] == "rule one\n\nrule two"
        assert [m["role"] for m in body["messages"]] == ["user"]
    else:
        assert "system" not in body
        assert [m["role"] for m in body["messages"]] == ["system", "system", "user"]


def test_openai_max_completion_tokens(srv):
    srv.responder = sequence(Reply(text="a"))
    client = make_client("openai:o4-mini", base_url=srv.openai_base_url, api_key=KEY, max_tokens_param="max_completion_tokens")
    client.complete(request(max_tokens=77))
    body = srv.requests[0].body
    assert body["max_completion_tokens"] == 77 and "max_tokens" not in body


# --------------------------------------------------------------------------- retries


@pytest.mark.parametrize("status", [429, 500, 529])
def test_retryable_status_then_success(api, srv, status):
    srv.responder = sequence(Reply(status=status, text="try later"), Reply(text="done"))
    res = provider(api, srv).complete(request())
    assert res.text == "done" and res.attempts == 2
    assert len(srv.requests) == 2


def test_retry_after_is_honored(api, srv):
    srv.responder = sequence(Reply(status=429, headers={"Retry-After": "0.2"}), Reply(text="done"))
    retry = RetryPolicy(max_attempts=2, backoff_base_s=0.001, backoff_max_s=5, timeout_s=10)
    t0 = time.monotonic()
    res = provider(api, srv, retry=retry).complete(request())
    assert res.attempts == 2
    assert 0.2 <= time.monotonic() - t0 < 4  # waited as asked, not the 5 s backoff cap


def test_retries_stop_at_max_attempts(api, srv):
    srv.responder = sequence(Reply(status=503))
    with pytest.raises(LLMError) as ei:
        provider(api, srv).complete(request())
    assert ei.value.kind == "server" and ei.value.attempts == 3 and ei.value.status == 503
    assert len(srv.requests) == 3


@pytest.mark.parametrize("status,kind", [(400, "bad_request"), (401, "auth"), (403, "auth"), (404, "not_found")])
def test_client_errors_not_retried(api, srv, status, kind):
    srv.responder = sequence(Reply(status=status, text="model does not exist\nat all"), Reply(text="never"))
    with pytest.raises(LLMError) as ei:
        provider(api, srv).complete(request())
    e = ei.value
    assert e.kind == kind and e.attempts == 1 and e.status == status
    assert "\n" not in str(e) and "model does not exist at all" in str(e)
    assert len(srv.requests) == 1


def test_connection_reset_retried(api, srv):
    srv.responder = sequence(Reply(reset=True), Reply(text="back"))
    res = provider(api, srv).complete(request())
    assert res.text == "back" and res.attempts == 2


def test_malformed_body_retried_then_reported(api, srv):
    srv.responder = sequence(Reply(raw_body=b"<html>bad gateway</html>"))
    with pytest.raises(LLMError) as ei:
        provider(api, srv, retry=FAST.model_copy(update={"max_attempts": 2})).complete(request())
    assert ei.value.kind == "server" and ei.value.attempts == 2


def test_hang_is_cut_at_the_per_attempt_deadline(api, srv):
    srv.responder = sequence(Reply(hang=True))
    retry = RetryPolicy(max_attempts=2, backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=0.25)
    t0 = time.monotonic()
    with pytest.raises(LLMError) as ei:
        provider(api, srv, retry=retry).complete(request())
    elapsed = time.monotonic() - t0
    assert ei.value.kind == "timeout" and ei.value.attempts == 2
    assert 0.5 <= elapsed < 4  # two cut attempts; a hang never ends by itself
    assert len(srv.requests) == 2


def test_trickling_server_is_cut_at_the_deadline(api):
    # A byte every 50 ms keeps every socket read timeout happy; only the wall clock stops it.
    with ScriptedLLMServer(sequence(Reply(trickle=True))) as s:
        retry = RetryPolicy(max_attempts=1, timeout_s=0.3)
        t0 = time.monotonic()
        with pytest.raises(LLMError) as ei:
            provider(api, s, retry=retry).complete(request())
        assert ei.value.kind == "timeout" and 0.3 <= time.monotonic() - t0 < 4  # the trickle never ends
        # Its HTTP client was closed, so the abandoned attempt ends while the server still trickles.
        until = time.monotonic() + 5.0
        while any(t.name == "pesflow-llm-attempt" for t in threading.enumerate()) and time.monotonic() < until:
            time.sleep(0.02)
        assert not any(t.name == "pesflow-llm-attempt" for t in threading.enumerate())
    assert s.live_handlers == 0  # close() ends the trickling handler too


def test_parallel_calls_share_one_client(api, srv):
    # K executors call one provider from several threads; each attempt gets its own SDK client.
    together = threading.Barrier(6, timeout=10)  # passes only when all six calls are in flight at once

    def answer(req):
        together.wait()
        return Reply(text=req.messages[-1]["content"].upper(), input_tokens=10, output_tokens=10)

    srv.responder = answer
    budget = Budget(None)
    client = provider(api, srv, budget=budget)
    results: dict[int, str] = {}

    def call(i: int) -> None:
        results[i] = client.complete(request(messages=[Message(role="user", content=f"child {i}")])).text

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: f"CHILD {i}" for i in range(6)}  # concurrent, not one after another (the barrier)
    per_call = {"openai": 10 * 0.15 + 10 * 0.60, "anthropic": 10 * 3.0 + 10 * 15.0}[api] / 1e6
    assert budget.spent == pytest.approx(6 * per_call)


# --------------------------------------------------------------------------- budget, keys


def test_exhausted_budget_sends_nothing(api, srv):
    with pytest.raises(LLMError) as ei:
        provider(api, srv, budget=Budget(0.0)).complete(request())
    assert ei.value.kind == "budget" and ei.value.attempts == 0
    assert srv.requests == []


def test_budget_stops_the_next_call(api, srv):
    srv.responder = sequence(Reply(text="a", input_tokens=10**6, output_tokens=0))
    budget = Budget(0.01)
    client = provider(api, srv, budget=budget)
    client.complete(request())  # costs more than the cap: allowed, it was under when it started
    with pytest.raises(LLMError) as ei:
        client.complete(request())
    assert ei.value.kind == "budget"
    assert len(srv.requests) == 1


def test_missing_key_names_the_env_var_and_sends_nothing(api, srv, monkeypatch):
    monkeypatch.delenv(ENV_KEY[api], raising=False)
    client = provider(api, srv, api_key=None)
    with pytest.raises(LLMError) as ei:
        client.complete(request())
    assert ei.value.kind == "auth" and ENV_KEY[api] in str(ei.value)
    assert srv.requests == []


def test_env_key_and_base_url_used_and_never_leaked(api, srv, monkeypatch):
    planted = "sk-planted-SECRET-9f8e7d6c5b4a"
    monkeypatch.setenv(ENV_KEY[api], planted)
    monkeypatch.setenv(ENV_URL[api], srv.openai_base_url if api == "openai" else srv.anthropic_base_url)
    client = make_client(f"{api}:{MODELS[api]}", retry=RetryPolicy(max_attempts=1, timeout_s=0.25))
    assert planted not in repr(client)

    srv.responder = sequence(Reply(text="ok"))
    make_client(f"{api}:{MODELS[api]}").complete(request())
    seen = srv.requests[-1].headers
    assert planted in (seen.get("authorization") or seen.get("x-api-key") or "")

    def echo(status: int):  # a server that quotes the key back, as real ones partly do
        def responder(req):
            return Reply(status=status, text=f"invalid key {req.headers.get('authorization') or req.headers.get('x-api-key')}")
        return responder

    errors = []
    for responder in (echo(401), echo(400), echo(500), sequence(Reply(hang=True)), sequence(Reply(reset=True))):
        srv.responder = responder
        with pytest.raises(LLMError) as ei:
            client.complete(request())
        errors.append(ei.value)
    assert [e.kind for e in errors] == ["auth", "bad_request", "server", "timeout", "connection"]
    for e in errors:
        assert planted not in str(e) and planted not in repr(e) and planted not in e.message
        assert e.__cause__ is None and e.__suppress_context__  # no SDK exception (with its request) chained on


# --------------------------------------------------------------------------- pure parts


def test_request_hash_stable_and_sensitive():
    a = request(temperature=0.2)
    h = a.request_hash("openai", "gpt-4o")
    assert len(h) == 64 and h == request(temperature=0.2).request_hash("openai", "gpt-4o")
    assert h == request(temperature=0.2, tag="r9/c9").request_hash("openai", "gpt-4o")  # tag is not content
    changed = [
        a.request_hash("openai", "gpt-4o-mini"),
        a.request_hash("anthropic", "gpt-4o"),
        request(temperature=0.3).request_hash("openai", "gpt-4o"),
        request(temperature=0.2, top_p=0.5).request_hash("openai", "gpt-4o"),
        request(temperature=0.2, max_tokens=100).request_hash("openai", "gpt-4o"),
        request(temperature=0.2, messages=[Message(role="user", content="Speed up sum().")]).request_hash("openai", "gpt-4o"),
        request(temperature=0.2, messages=[Message(role="system", content="You write kernels."),
                                           Message(role="user", content="Speed up sum()!")]).request_hash("openai", "gpt-4o"),
    ]
    assert len(set(changed + [h])) == len(changed) + 1


def test_request_validation():
    with pytest.raises(ValueError):
        LLMRequest(role="planner", messages=[])
    with pytest.raises(ValueError):
        Message(role="tool", content="x")


def test_parse_spec_and_make_client(srv):
    assert parse_spec("openai:gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert parse_spec(" Anthropic:claude-sonnet-4-5 ") == ("anthropic", "claude-sonnet-4-5")
    assert parse_spec("openai:qwen2.5-coder:7b") == ("openai", "qwen2.5-coder:7b")
    for bad in ["gpt-4o", "openai:", "azure:gpt-4o", ":x", ""]:
        with pytest.raises(ValueError) as ei:
            parse_spec(bad)
        assert "openai:MODEL" in str(ei.value) and "anthropic:MODEL" in str(ei.value) and "\n" not in str(ei.value)
    o = make_client("openai:gpt-4o", base_url=srv.openai_base_url, api_key=KEY)
    a = make_client("anthropic:claude-opus-4-1", base_url=srv.anthropic_base_url, api_key=KEY)
    assert isinstance(o, OpenAIProvider) and isinstance(a, AnthropicProvider)
    assert isinstance(o, LLMClient) and (a.provider, a.model) == ("anthropic", "claude-opus-4-1")
    with pytest.raises(ValueError):
        make_client("anthropic:claude-opus-4-1", max_tokens_param="max_completion_tokens")


def test_price_table(tmp_path):
    table = PriceTable.load()
    assert len(table.entries) >= 10
    assert table.lookup("gpt-4o-mini-2024-07-18").input_per_mtok == 0.15  # longest glob wins over gpt-4o*
    assert table.lookup("gpt-4o-2024-08-06").input_per_mtok == 2.50
    assert table.lookup("claude-opus-4-5-20251101").output_per_mtok == 25.0
    assert table.lookup("claude-opus-4-1-20250805").output_per_mtok == 75.0  # older Opus cost more
    assert table.lookup("gpt-5.9") is None  # unreleased versions stay unpriced, not guessed
    assert table.lookup("DeepSeek-Chat") is not None and table.lookup("deepseek-coder-v9") is None
    assert table.cost("gpt-4o", Usage(input_tokens=2_000_000, output_tokens=100_000)) == (pytest.approx(6.0), True)

    bad = tmp_path / "p.yaml"
    bad.write_text("m: {input_per_mtok: 1}\n")
    with pytest.raises(ValueError, match="'m'"):
        PriceTable.load(bad)
    with pytest.raises(ValueError, match="no such file"):
        PriceTable.load(tmp_path / "missing.yaml")


def test_retry_helpers():
    policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=30.0)
    assert backoff_delay(1, policy, retry_after=2.5) == 2.5
    assert backoff_delay(1, policy, retry_after=600) == 30.0  # a server's Retry-After is capped
    for attempt in (1, 2, 3, 10):
        d = backoff_delay(attempt, policy, None)
        assert 0.5 * min(30, 2 ** (attempt - 1)) <= d <= min(30, 2 ** (attempt - 1))
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None
    assert kind_for_status(529) == ("server", True) and kind_for_status(404) == ("not_found", False)
    assert redact("key sk-abc123XYZ987 and Bearer tok3n and mysecretvalue", ["mysecretvalue"]) == "key sk-*** and Bearer *** and ***"


def test_budget_is_thread_safe_and_llm_error_is_one_line():
    budget = Budget(None)
    threads = [threading.Thread(target=lambda: [budget.add(0.001) for _ in range(1000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.spent == pytest.approx(8.0)
    budget.check()  # unlimited
    with pytest.raises(ValueError):
        Budget(-1)

    e = LLMError("server", "line one\nline two", attempts=3, status=502)
    assert str(e) == "line one line two"
    back = pickle.loads(pickle.dumps(e))
    assert (back.kind, back.attempts, back.status, str(back)) == ("server", 3, 502, "line one line two")


def test_server_listens_on_loopback_only():
    with ScriptedLLMServer() as s:
        assert s.url.startswith("http://127.0.0.1:")
        assert s._httpd.server_address[0] == "127.0.0.1"
