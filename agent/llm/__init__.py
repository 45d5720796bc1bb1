"""pesflow's LLM layer: one request/result contract over the official OpenAI and Anthropic
SDKs, with our own retries, a hard per-attempt deadline, pricing and a USD budget."""

from agent.llm.types import (
    Budget,
    LLMClient,
    LLMError,
    LLMRequest,
    LLMResult,
    Message,
    RetryPolicy,
    Usage,
)
from agent.llm.factory import make_client, parse_spec
from agent.llm.pricing import Price, PriceTable

__all__ = [
    "Budget",
    "LLMClient",
    "LLMError",
    "LLMRequest",
    "LLMResult",
    "Message",
    "Price",
    "PriceTable",
    "RetryPolicy",
    "Usage",
    "make_client",
    "parse_spec",
]
