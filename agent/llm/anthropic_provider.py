"""Anthropic's Messages API through the official SDK."""

from __future__ import annotations

from typing import Any

import anthropic

from agent.llm.base import Answer, Failure, SDKProvider, classify_sdk_error
from agent.llm.types import Budget, LLMRequest, Message, RetryPolicy, Usage

MAX_BREAKPOINTS = 4  # the Messages API refuses a request with more blocks marked for its cache


class AnthropicProvider(SDKProvider):
    provider = "anthropic"
    key_env = "ANTHROPIC_API_KEY"  # base URL: ANTHROPIC_BASE_URL, read by the SDK when none is given

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        budget: Budget | None = None,
        prices: Any = None,
    ):
        super().__init__(model, base_url=base_url, api_key=api_key, retry=retry, budget=budget, prices=prices)

    def _new_client(self, api_key: str) -> anthropic.Anthropic:
        # max_retries=0: our loop retries. An explicit timeout also keeps the SDK from
        # refusing large max_tokens without streaming.
        return anthropic.Anthropic(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.retry.timeout_s)

    def _attempt(self, client: anthropic.Anthropic, request: LLMRequest) -> Answer:
        # The Messages API takes system text as a parameter, not as a message.
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": cached_messages([m for m in request.messages if m.role != "system"]),
        }
        if system:
            kwargs["system"] = system
        # Sent only when set. This SDK no longer has sampling arguments (recent Claude models
        # refuse them), so they travel in the body as extra fields for the models that
        # still accept them; a model that refuses answers 400, reported as bad_request.
        sampling = {k: v for k, v in (("temperature", request.temperature), ("top_p", request.top_p)) if v is not None}
        if sampling:
            kwargs["extra_body"] = sampling
        resp = client.messages.create(**kwargs)
        # Only text blocks are the answer (thinking and tool blocks are not).
        text = "".join(getattr(b, "text", "") or "" for b in (getattr(resp, "content", None) or [])
                       if getattr(b, "type", None) == "text")
        usage = getattr(resp, "usage", None)
        # the API's input_tokens are those after the last breakpoint: what it read from its cache
        # and what it wrote to it are counted apart, and all three are input
        read = getattr(usage, "cache_read_input_tokens", None) or 0
        write = getattr(usage, "cache_creation_input_tokens", None) or 0
        return Answer(
            text=text,
            usage=Usage(
                input_tokens=(getattr(usage, "input_tokens", None) or 0) + read + write,
                output_tokens=getattr(usage, "output_tokens", None) or 0,
                cache_read_tokens=read, cache_write_tokens=write,
            ),
            finish_reason=getattr(resp, "stop_reason", None),
        )

    def _classify(self, exc: BaseException) -> Failure | None:
        return classify_sdk_error(exc, anthropic)


def cached_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The messages as the API takes them: a message with breaks as text blocks, the block that
    ends at a break marked for the prompt cache (the last MAX_BREAKPOINTS breaks of the request:
    the longest prefixes; the API also finds a shorter one it holds, at an earlier block's end)."""
    marks = [(i, b) for i, m in enumerate(messages) for b in m.breaks][-MAX_BREAKPOINTS:]
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not m.breaks:
            out.append({"role": m.role, "content": m.content})
            continue
        cuts = [0, *m.breaks, len(m.content)]
        blocks = []
        for a, b in zip(cuts, cuts[1:]):
            block: dict[str, Any] = {"type": "text", "text": m.content[a:b]}
            if (i, b) in marks:
                block["cache_control"] = {"type": "ephemeral"}
            blocks.append(block)
        out.append({"role": m.role, "content": blocks})
    return out
