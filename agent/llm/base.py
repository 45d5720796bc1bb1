"""The retry/deadline machinery both SDK providers share (the contract: agent/llm/types.py).

Providers differ only in how one HTTP attempt is made and how its answer and errors are
read; everything about *when* to try again, how long to wait, what a call costs and how
errors are worded lives here, once.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

from agent.llm.types import Budget, ErrorKind, LLMError, LLMRequest, LLMResult, RetryPolicy, Usage
from agent.llm.pricing import PriceTable
from agent.rundir.secrets import redact


# --------------------------------------------------------------------------- pure helpers

def kind_for_status(status: int) -> tuple[ErrorKind, bool]:
    """(kind, retryable) of an HTTP error status."""
    if status in (401, 403):
        return "auth", False
    if status == 404:
        return "not_found", False
    if status == 408:
        return "timeout", True
    if status == 429:
        return "rate_limit", True
    if status >= 500:  # includes Anthropic's 529 overloaded
        return "server", True
    return "bad_request", False


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, Retry-After seconds or date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff_delay(attempt: int, policy: RetryPolicy, retry_after: float | None,
                  rng: random.Random | None = None) -> float:
    """Wait before attempt `attempt + 1`: the server's Retry-After when given (capped),
    else exponential backoff with jitter so that parallel executors do not retry in step."""
    if retry_after is not None:
        return min(retry_after, policy.backoff_max_s)
    base = min(policy.backoff_max_s, policy.backoff_base_s * (2 ** (attempt - 1)))
    return base * (rng or random).uniform(0.5, 1.0)


# --------------------------------------------------------------------------- deadline

T = TypeVar("T")


class DeadlineExceeded(Exception):
    pass


def run_with_deadline(fn: Callable[[], T], timeout_s: float) -> T:
    """fn() in a daemon thread; stop waiting at the deadline whatever the socket does.

    SDK timeouts are per read, so a server trickling a byte a second never trips them;
    only a wall clock outside the call bounds it. The abandoned thread ends when its
    client is closed or its own read timeout fires.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the waiting thread
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="pesflow-llm-attempt").start()
    if not done.wait(timeout_s):
        raise DeadlineExceeded()
    if "error" in box:
        raise box["error"]
    return box["value"]


# --------------------------------------------------------------------------- providers


@dataclass(eq=False)  # exceptions stay hashable (tracebacks keep them in sets)
class Failure(Exception):
    """One failed attempt, as the retry loop needs to see it."""

    kind: ErrorKind
    retryable: bool
    detail: str
    status: int | None = None
    retry_after: float | None = None


@dataclass
class Answer:
    text: str
    usage: Usage
    finish_reason: str | None


def classify_sdk_error(exc: BaseException, sdk: Any) -> Failure | None:
    """Both official SDKs share one exception hierarchy; None: not a transport error."""
    if isinstance(exc, sdk.APITimeoutError):
        return Failure("timeout", True, "the SDK's request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return Failure("connection", True, f"connection failed ({type(cause).__name__ if cause else 'no detail'})")
    if isinstance(exc, sdk.APIStatusError):
        kind, retryable = kind_for_status(exc.status_code)
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return Failure(kind, retryable, _server_message(exc), exc.status_code, parse_retry_after(headers))
    if isinstance(exc, (sdk.APIResponseValidationError, json.JSONDecodeError, UnicodeDecodeError)):
        return Failure("server", True, f"malformed response body ({type(exc).__name__})")
    return None


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):  # Anthropic keeps {"error": {...}}; OpenAI's SDK unwraps it
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", "") or exc)


class SDKProvider(ABC):
    """complete() with retries, a hard per-attempt deadline, budget and pricing; the
    subclasses supply one attempt through their SDK."""

    provider: str = ""
    key_env: str = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        retry: RetryPolicy | None,
        budget: Budget | None,
        prices: Any,
    ):
        if not model or not model.strip():
            raise ValueError(f"{self.provider}: empty model name; give one, e.g. {self.provider}:MODEL")
        self.model = model.strip()
        self.base_url = base_url
        # Read once; kept only in memory, and redacted from every message we build.
        self._api_key = api_key if api_key else (os.environ.get(self.key_env) or None)
        self.retry = retry or RetryPolicy()
        self.budget = budget
        self.prices = prices if prices is not None else PriceTable.load()
        self._idle: list[Any] = []  # SDK clients not in use; one per concurrent attempt
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- subclass hooks
    @abstractmethod
    def _new_client(self, api_key: str) -> Any: ...

    @abstractmethod
    def _attempt(self, client: Any, request: LLMRequest) -> Answer: ...

    @abstractmethod
    def _classify(self, exc: BaseException) -> Failure | None: ...

    # -- client pool: a client whose attempt was abandoned is closed and never reused, so
    # an abandoned request cannot disturb another thread's call on a shared connection pool.
    def _acquire(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        assert self._api_key is not None
        return self._new_client(self._api_key)

    def _release(self, client: Any) -> None:
        with self._lock:
            self._idle.append(client)

    @staticmethod
    def _discard(client: Any) -> None:
        try:
            client.close()
        except Exception:  # closing under an in-flight request may complain; it is abandoned
            pass

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            self._discard(c)

    def _one_attempt(self, request: LLMRequest) -> Answer:
        client = self._acquire()
        try:
            answer = run_with_deadline(lambda: self._attempt(client, request), self.retry.timeout_s)
        except DeadlineExceeded:
            self._discard(client)
            raise Failure("timeout", True, f"no complete answer within {self.retry.timeout_s:g} s") from None
        except Exception as e:
            failure = self._classify(e)
            if failure is None:  # not a transport error: a bug worth seeing as is
                self._discard(client)
                raise
            if failure.kind in ("timeout", "connection"):
                self._discard(client)
            else:
                self._release(client)
            raise failure from None
        self._release(client)
        return answer

    def _error(self, f: Failure, attempts: int) -> LLMError:
        where = f"{self.provider}:{self.model}"
        status = f"HTTP {f.status} " if f.status is not None else ""
        hint = ""
        if f.kind == "auth":
            hint = f"; check {self.key_env}"
        elif f.kind == "not_found":
            hint = f"; check the model name {self.model!r} and the base URL"
        elif f.kind == "timeout":
            hint = f"; per-attempt limit {self.retry.timeout_s:g} s (retry.timeout_s)"
        msg = f"{where}: {f.kind} ({status}{f.detail}) after {attempts} attempt(s){hint}"
        return LLMError(f.kind, redact(msg, [self._api_key]), attempts=attempts, status=f.status)

    def complete(self, request: LLMRequest) -> LLMResult:
        started = time.monotonic()
        request_hash = request.request_hash(self.provider, self.model)
        if not self._api_key:
            raise LLMError(
                "auth",
                f"{self.provider}:{self.model}: no API key; set {self.key_env} "
                "(any non-empty value for a local server that ignores keys) or pass api_key",
            )
        attempts = 0
        while True:
            if self.budget is not None:
                try:
                    self.budget.check()
                except LLMError as e:
                    e.attempts = attempts
                    raise
            attempts += 1
            try:
                answer = self._one_attempt(request)
            except Failure as f:
                if not f.retryable or attempts >= self.retry.max_attempts:
                    raise self._error(f, attempts) from None
                time.sleep(backoff_delay(attempts, self.retry, f.retry_after))
                continue
            cost, priced = self.prices.cost(self.model, answer.usage)
            if self.budget is not None:
                self.budget.add(cost)
            return LLMResult(
                text=answer.text,
                usage=answer.usage,
                cost_usd=cost,
                priced=priced,
                latency_s=time.monotonic() - started,
                attempts=attempts,
                request_hash=request_hash,
                provider=self.provider,
                model=self.model,
                finish_reason=answer.finish_reason,
            )
