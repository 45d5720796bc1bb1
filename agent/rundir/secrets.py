"""Keep API keys off the disk: every text pesflow writes into a run passes through `redact`.

Secrets are the values of environment variables whose names say key, token, secret or
password (as the SDKs' OPENAI_API_KEY, ANTHROPIC_API_KEY ...), plus anything shaped like a
provider key even when it came from elsewhere.
"""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
KEY_SHAPES = re.compile(r"\b(sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,})\b")


def secret_values(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {name: v for name, v in env.items() if _SECRET_NAME.search(name) and len(v) >= 8 and not v.startswith("/")}


def redact(text: str, environ: dict[str, str] | None = None) -> str:
    for name, value in sorted(secret_values(environ).items(), key=lambda kv: -len(kv[1])):
        if value in text:
            text = text.replace(value, f"[REDACTED:{name}]")
    return KEY_SHAPES.sub("[REDACTED:key-shaped]", text)


def find_secrets(text: str, environ: dict[str, str] | None = None) -> list[str]:
    """Names of the secrets (or 'key-shaped') that appear in `text`; for audits."""
    found = [name for name, value in secret_values(environ).items() if value in text]
    if KEY_SHAPES.search(text):
        found.append("key-shaped")
    return found
