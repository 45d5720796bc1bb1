"""OpenAI and OpenAI-compatible servers (vLLM, SGLang, Ollama, DeepSeek, Qwen) through
the official SDK's chat completions."""

from __future__ import annotations

from typing import Any, Literal

import openai

from agent.llm.base import Answer, Failure, SDKProvider, classify_sdk_error
from agent.llm.types import Budget, LLMRequest, RetryPolicy, Usage


class OpenAIProvider(SDKProvider):
    provider = "openai"
    key_env = "OPENAI_API_KEY"  # base URL: OPENAI_BASE_URL, read by the SDK when none is given

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        budget: Budget | None = None,
        prices: Any = None,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    ):
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(
                "max_tokens_param must be 'max_tokens' or 'max_completion_tokens' (o-series, "
                f"gpt-5), got {max_tokens_param!r}"
            )
        super().__init__(model, base_url=base_url, api_key=api_key, retry=retry, budget=budget, prices=prices)
        self.max_tokens_param = max_tokens_param

    def _new_client(self, api_key: str) -> openai.OpenAI:
        # max_retries=0: our loop retries, so that budget and deadline apply per attempt.
        return openai.OpenAI(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.retry.timeout_s)

    def _attempt(self, client: openai.OpenAI, request: LLMRequest) -> Answer:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            self.max_tokens_param: request.max_tokens,
        }
        # Sent only when set: several models reject them outright, and a server's own
        # default should stand unless the config says otherwise.
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        resp = client.chat.completions.create(**kwargs)
        choices = getattr(resp, "choices", None) or []
        first = choices[0] if choices else None
        message = getattr(first, "message", None)
        text = getattr(message, "content", None) or ""
        usage = getattr(resp, "usage", None)
        # OpenAI caches a stable prompt prefix by itself and reports what it read
        # (vLLM and SGLang too, where their prefix cache reports it); prompt_tokens includes it
        details = getattr(usage, "prompt_tokens_details", None)
        return Answer(
            text=text if isinstance(text, str) else str(text),
            usage=Usage(
                input_tokens=getattr(usage, "prompt_tokens", None) or 0,
                output_tokens=getattr(usage, "completion_tokens", None) or 0,
                cache_read_tokens=getattr(details, "cached_tokens", None) or 0,
            ),
            finish_reason=getattr(first, "finish_reason", None),
        )

    def _classify(self, exc: BaseException) -> Failure | None:
        return classify_sdk_error(exc, openai)
