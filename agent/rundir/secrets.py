"""Keep API keys off the disk and out of messages: one `redact` for every text pesflow writes
into a run (files, journal) and every error it words from a server's answer.

Secrets are the values of environment variables whose names say key, token, secret or
password (as the SDKs' OPENAI_API_KEY, ANTHROPIC_API_KEY ...), any value the caller names
(the key a client holds), and anything shaped like a provider key or a bearer token.
"""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
KEY_SHAPES = [
    (re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"), "sk-***"),
    (re.compile(r"\b(?:AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,})\b"), "***"),
    (re.compile(r"(?i)\bbearer\s+\S+"), "Bearer ***"),
]


def secret_values(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {name: v for name, v in env.items() if _SECRET_NAME.search(name) and len(v) >= 8 and not v.startswith("/")}


def redact(text: str, extra: list[str | None] = (),  # type: ignore[assignment]
           environ: dict[str, str] | None = None) -> str:
    """`text` with every secret replaced by `***` and every key-shaped string masked."""
    values = [v for v in extra if v and len(v) >= 4] + list(secret_values(environ).values())
    for value in sorted(set(values), key=len, reverse=True):
        text = text.replace(value, "***")
    for pattern, repl in KEY_SHAPES:
        text = pattern.sub(repl, text)
    return text


def find_secrets(text: str, environ: dict[str, str] | None = None) -> list[str]:
    """Names of the secrets (or 'key-shaped') that appear in `text` unmasked; for audits."""
    found = [name for name, value in secret_values(environ).items() if value in text]
    if any("*" not in m.group(0) for pattern, _ in KEY_SHAPES[:2] for m in pattern.finditer(text)):
        found.append("key-shaped")
    return found
