"""The LLM layer's contract: requests, results, usage, errors, the retry policy and the budget."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

def one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."



ErrorKind = Literal["timeout", "rate_limit", "server", "connection", "auth", "not_found", "bad_request", "budget",
                    "empty"]
# Errors that no retry and no later call can cure (no key, a key refused, no such model, a request
# the server rejects): a search that meets one stops at once instead of failing every call.
FATAL_KINDS = frozenset({"auth", "not_found", "bad_request"})



class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str
    # Offsets into content after which the text so far stays the same from call to call (the
    # task, the parent's code, a round's plan): where a provider that is told where its prompt
    # cache may end (Anthropic) puts a breakpoint. They decide no answer: not in the request's hash.
    breaks: list[int] = Field(default_factory=list)

    @field_validator("breaks")
    @classmethod
    def _breaks_ok(cls, v: list[int], info: ValidationInfo) -> list[int]:
        n = len(info.data.get("content") or "")
        if any(b <= 0 or b >= n for b in v) or v != sorted(set(v)):
            raise ValueError(f"breaks must be increasing offsets inside the content (1..{n - 1}), got {v}")
        return v


class LLMRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str  # pesflow role: planner | executor | summarizer | repair
    messages: list[Message] = Field(min_length=1)
    max_tokens: int = Field(default=4096, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    tag: str = ""  # free text for traces ("r3/c1"); deliberately outside the hash

    def request_hash(self, provider: str, model: str) -> str:
        """sha256 of exactly what decides the answer: the journal's replay key."""
        payload = {
            "provider": provider,
            "model": model,
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }
        canon = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()


class Usage(BaseModel):
    """One call's tokens. `input_tokens` counts every input token, read from a provider's prompt
    cache or not; `cache_read_tokens` and `cache_write_tokens` are the parts of it that the
    provider reported as read from its cache and as written to it (priced at their own rates)."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class LLMResult(BaseModel):
    text: str
    usage: Usage
    cost_usd: float
    priced: bool  # False: model not in the price table, cost_usd is then 0
    latency_s: float  # the whole complete() call, retries and backoff included
    attempts: int
    request_hash: str
    provider: str
    model: str
    finish_reason: str | None


class LLMError(Exception):
    """A call that produced no answer. str() is one line, and never holds a key."""

    def __init__(self, kind: ErrorKind, message: str, attempts: int = 0, status: int | None = None):
        self.kind: ErrorKind = kind
        self.message = one_line(message)
        self.attempts = attempts
        self.status = status  # HTTP status when the server answered with an error
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # picklable despite the keyword-rich constructor
        return (type(self), (self.kind, self.message, self.attempts, self.status))


@runtime_checkable
class LLMClient(Protocol):
    provider: str
    model: str

    def complete(self, request: LLMRequest) -> LLMResult: ...


class RetryPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=4, ge=1)
    backoff_base_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    timeout_s: float = Field(default=300.0, gt=0)  # hard wall-clock limit of ONE attempt


class Budget:
    """A run's USD cap, shared by all roles' clients (thread-safe).

    Checked before each attempt, so calls already in flight may overshoot the cap by
    their own cost; what stops is the next call.
    """

    def __init__(self, max_usd: float | None, spent: float = 0.0):
        if max_usd is not None and max_usd < 0:
            raise ValueError(f"budget cap must be >= 0 USD or None (unlimited), got {max_usd}")
        self.max_usd = max_usd
        self._spent = spent  # a resumed run starts from what it had already paid: the cap is per run
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent

    def add(self, usd: float) -> None:
        with self._lock:
            self._spent += usd

    def check(self) -> None:
        if self.max_usd is None:
            return
        spent = self.spent
        if spent >= self.max_usd:
            raise LLMError(
                "budget",
                f"LLM budget exhausted: spent ${spent:.4f} of the ${self.max_usd:.4f} cap; raise "
                "the run's USD cap to continue (pesflow resume RUN_DIR --max-usd USD)",
            )


