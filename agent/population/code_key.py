"""What a candidate's code is, whatever its spelling: the key under which two candidates are the
same program (issue 40: a near-duplicate is never graded, it reuses the verdict of the program
it spells again).

Python: the module's syntax tree (ast.dump, line numbers left out), so comments, blank lines,
indentation width, line breaks inside brackets and quote style do not count; docstrings do
(they are values the program can read). C, C++ and CUDA sources: comments removed outside
string and character literals, each line's runs of spaces and tabs made one space, blank lines
dropped; line breaks stay (a preprocessor line ends at one). Any other file, and a Python file
that does not parse, is keyed by its exact text (a Makefile's tab, YAML's indentation count).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re

C_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".inl")
_C_LIKE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_key(files: dict[str, str]) -> str:
    """sha256 over each file's path and normalized text."""
    items = sorted((path, normalized(path, text)) for path, text in files.items())
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()


def normalized(path: str, text: str) -> str:
    if path.endswith(".py"):
        try:
            return "ast:" + ast.dump(ast.parse(text))
        except (SyntaxError, ValueError, RecursionError):
            pass
    if path.endswith(C_SUFFIXES):
        return "c:" + _c_key(text)
    return "exact:" + text


def _c_key(text: str) -> str:
    def keep_literals(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith("//"):
            return ""
        if s.startswith("/*"):
            return " " if "\n" not in s else "\n"  # a comment between two tokens still parts them
        return s
    stripped = _C_LIKE.sub(keep_literals, text)
    lines = (" ".join(line.split()) for line in stripped.splitlines())
    return "\n".join(line for line in lines if line)
