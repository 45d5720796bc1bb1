"""A Dockerfile reader for what task images use: the instructions in order, ARG/ENV expanded.

Handles line continuations, comments and parser directives, JSON and shell forms, COPY/ADD
flags and BuildKit heredocs (`RUN <<EOF` and `RUN cmd <<'PY'`), which the local backend
replays on the host and podman 4.3 cannot build.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


class DockerfileError(Exception):
    pass


@dataclass
class Instruction:
    kind: str  # upper-case keyword
    text: str  # the arguments as written (continuations joined), heredoc bodies excluded
    line: int
    heredocs: list[tuple[str, str]] = field(default_factory=list)  # (terminator, body)
    flags: dict[str, str] = field(default_factory=dict)

    def json_args(self) -> list[str] | None:
        t = self.text.strip()
        if t.startswith("["):
            try:
                v = json.loads(t)
            except json.JSONDecodeError:
                return None
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return v
        return None

    def shell_script(self) -> str:
        """RUN as the shell sees it: heredocs given back their bodies (BuildKit semantics)."""
        exec_form = self.json_args()
        if exec_form is not None:
            return "exec " + " ".join(shlex.quote(a) for a in exec_form)
        if not self.heredocs:
            return self.text
        command = _HEREDOC.sub("", self.text).strip()
        if not command:  # `RUN <<EOF` alone: the body is the script
            return self.heredocs[0][1]
        parts = [self.text]
        for term, body in self.heredocs:
            parts.append(body.rstrip("\n"))
            parts.append(term)
        return "\n".join(parts) + "\n"


def _split_flags(text: str) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    rest = text.lstrip()
    while rest.startswith("--"):
        token, _, rest = rest.partition(" ")
        k, _, v = token[2:].partition("=")
        flags[k] = v
        rest = rest.lstrip()
    return flags, rest


def parse(text: str, source: str | Path = "Dockerfile") -> list[Instruction]:
    lines = text.splitlines()
    out: list[Instruction] = []
    i = 0
    directives_open = True
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            if directives_open and re.match(r"#\s*\w+\s*=", stripped):
                pass  # parser directive (syntax=, escape=): nothing to do for our replay
            elif stripped:
                directives_open = False
            i += 1
            continue
        directives_open = False
        start = i + 1
        joined = raw.rstrip()
        while joined.endswith("\\") and i + 1 < len(lines):
            i += 1
            nxt = lines[i]
            if nxt.strip().startswith("#"):
                joined = joined[:-1] + " \\"
                continue
            joined = joined[:-1] + nxt.rstrip()  # Docker drops the escaped newline
        i += 1
        keyword, _, args = joined.strip().partition(" ")
        kind = keyword.upper()
        ins = Instruction(kind=kind, text=args.strip(), line=start)
        if kind in ("RUN", "COPY", "ADD"):
            ins.flags, ins.text = _split_flags(ins.text)
            for m in _HEREDOC.finditer(ins.text if not ins.json_args() else ""):
                strip_tabs, term = m.group(1) == "-", m.group(3)
                body: list[str] = []
                while i < len(lines) and (lines[i].strip() if strip_tabs else lines[i]) != term:
                    body.append(lines[i].lstrip("\t") if strip_tabs else lines[i])
                    i += 1
                if i >= len(lines):
                    raise DockerfileError(f"{source}:{start}: heredoc <<{term} is never closed; add a line '{term}'")
                i += 1  # the terminator
                ins.heredocs.append((term, "\n".join(body) + "\n"))
        out.append(ins)
    if not out or out[0].kind not in ("FROM", "ARG"):
        raise DockerfileError(f"{source}: the first instruction must be FROM (or ARG before FROM)")
    return out


def expand(value: str, env: dict[str, str]) -> str:
    """Docker's variable substitution: $VAR, ${VAR}, ${VAR:-default}."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        v = env.get(name)
        if v is None or (v == "" and default is not None):
            return default if default is not None else ""
        return v

    return _VAR.sub(sub, value)


def parse_key_values(text: str, env: dict[str, str]) -> list[tuple[str, str]]:
    """ENV/ARG arguments: `K=V K2="v 2"` or the legacy `K V` form."""
    text = text.strip()
    if "=" not in text.split(None, 1)[0]:
        key, _, value = text.partition(" ")
        return [(key, expand(value.strip(), env))]
    pairs = []
    for token in shlex.split(text, posix=True):
        k, sep, v = token.partition("=")
        pairs.append((k, expand(v, env) if sep else ""))
    return pairs
