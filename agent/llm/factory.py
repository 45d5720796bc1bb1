"""From a "provider:model" spec to a client."""

from __future__ import annotations

from typing import Any, Literal

from agent.llm.types import Budget, LLMClient, RetryPolicy

PROVIDERS = ("openai", "anthropic")
_FORMS = "openai:MODEL (also any OpenAI-compatible server via OPENAI_BASE_URL) or anthropic:MODEL"


def parse_spec(spec: str) -> tuple[str, str]:
    """"openai:gpt-4o-mini" -> ("openai", "gpt-4o-mini"). Splits at the first colon only,
    so that model names with colons (Ollama's "qwen2.5-coder:7b") survive."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"bad LLM spec {spec!r}: expected {_FORMS}")
    provider, model = (part.strip() for part in spec.strip().split(":", 1))
    if provider.lower() not in PROVIDERS or not model:
        raise ValueError(f"bad LLM spec {spec!r}: expected {_FORMS}")
    return provider.lower(), model


def make_client(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    retry: RetryPolicy | None = None,
    budget: Budget | None = None,
    prices: Any = None,
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
) -> LLMClient:
    provider, model = parse_spec(spec)
    if provider == "openai":
        from agent.llm.openai_provider import OpenAIProvider  # slow to import (seconds): only a run using it pays

        return OpenAIProvider(
            model, base_url=base_url, api_key=api_key, retry=retry, budget=budget, prices=prices,
            max_tokens_param=max_tokens_param
        )
    if max_tokens_param != "max_tokens":
        raise ValueError(f"max_tokens_param={max_tokens_param!r} applies to openai:MODEL only, not {spec!r}")
    from agent.llm.anthropic_provider import AnthropicProvider  # slow to import (seconds): only a run using it pays

    return AnthropicProvider(model, base_url=base_url, api_key=api_key, retry=retry, budget=budget, prices=prices)
