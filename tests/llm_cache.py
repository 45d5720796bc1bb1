"""The prompt caches that tests/llm_server.py imitates, as each provider documents its own.

OpenAI (and vLLM, SGLang): automatic; a prompt's longest prefix that an earlier prompt shared
is read from the cache, counted in blocks of 128 tokens once it reaches 1024.
Anthropic: explicit; blocks marked `cache_control` (at most 4 a request) end prefixes that are
written to the cache; a later request reads the longest prefix it holds that ends at one of
this request's block ends up to its last mark. A prefix under 1024 tokens is never cached.
Tokens are characters / 4, as the server counts them.
"""

from __future__ import annotations

import threading
from typing import Any

MIN_TOKENS = 1024
OPENAI_BLOCK = 128
MAX_MARKS = 4


def tokens(chars: int) -> int:
    return chars // 4


class TooManyMarks(ValueError):
    pass


class PromptCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._openai: dict[str, list[str]] = {}  # model -> prompts seen
        self._anthropic: dict[str, set[str]] = {}  # model -> prefixes written

    def openai(self, model: str, messages: list[dict[str, str]]) -> int:
        """The cached tokens of a chat completion: its longest prefix shared with an earlier one."""
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        with self._lock:
            seen = self._openai.setdefault(model, [])
            shared = max((_common(text, s) for s in seen), default=0)
            seen.append(text)
        n = tokens(shared)
        return n // OPENAI_BLOCK * OPENAI_BLOCK if n >= MIN_TOKENS else 0

    def anthropic(self, body: dict[str, Any]) -> tuple[int, int]:
        """(read, written) tokens of a Messages request, by its cache_control marks."""
        pieces = _blocks("system", body.get("system")) + [b for m in body.get("messages") or []
                                                         for b in _blocks(str(m.get("role")), m.get("content"))]
        marks = sum(1 for _, marked in pieces if marked)
        if marks > MAX_MARKS:
            raise TooManyMarks(f"A maximum of {MAX_MARKS} blocks with cache_control may be provided. Found {marks}.")
        ends, text = [], ""
        for piece, marked in pieces:
            text += piece
            ends.append((text, marked))
        last = max((i for i, (_, marked) in enumerate(ends) if marked), default=-1)
        if last < 0:
            return 0, 0
        model = str(body.get("model", ""))
        with self._lock:
            held = self._anthropic.setdefault(model, set())
            read = max((tokens(len(t)) for t, _ in ends[: last + 1] if t in held), default=0)
            written = 0
            for t, marked in ends[: last + 1]:
                if marked and tokens(len(t)) >= MIN_TOKENS and t not in held:
                    held.add(t)
            top = ends[last][0]
            if tokens(len(top)) >= MIN_TOKENS and tokens(len(top)) > read:
                written = tokens(len(top)) - read
        return read, written


def _blocks(role: str, content: Any) -> list[tuple[str, bool]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [(f"<{role}>{content}", False)]
    out = []
    for i, b in enumerate(content):
        if isinstance(b, dict):
            out.append(((f"<{role}>" if i == 0 else "") + str(b.get("text", "")), bool(b.get("cache_control"))))
    return out


def _common(a: str, b: str) -> int:
    """The length of a's and b's common prefix (a binary search over slices: long prompts)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
