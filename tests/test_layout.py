"""The shape README's Architecture section promises: no import circle among pesflow's modules,
no module over 500 lines, no import inside a function except to defer an optional dependency."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("agent", "evaluator")
MAX_LINES = 500
# Imported where they are used, so that pesflow starts without them (each site says why).
DEFERRED = {"docker", "modal", "matplotlib", "numpy", "selenium"}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((REPO / pkg).rglob("*.py")):
            parts = p.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imported(node: ast.AST, here: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: resolve against this module's package
            anchor = here.split(".")[: len(here.split(".")) - node.level + (1 if is_package else 0)]
            base = ".".join(anchor + ([base] if base else []))
        return [base] + [f"{base}.{a.name}" for a in node.names]
    return []


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            for name in imported(node, m, path.name == "__init__.py"):
                if name in mods and name != m:
                    graph[m].add(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(u: str, path: list[str]) -> None:
        state[u] = "open"
        path.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == "open":
                found.append(path[path.index(v):] + [v])
            elif v not in state:
                visit(v, path)
        path.pop()
        state[u] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return found


def test_the_checker_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_pesflow_modules():
    graph = import_graph()
    assert "agent.search.steps" in graph and graph["agent.search.steps"]  # the graph is real
    assert circles(graph) == []


def test_no_module_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in modules().values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_imports_inside_functions_only_defer_optional_dependencies():
    """Each one defers an optional dependency (directly, or a module of ours that needs one) and
    says so on its line; anything else belongs at the top of the module."""
    local = []
    for path in modules().values():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                line = lines[node.lineno - 1]
                reason = line.split("#", 1)[1].lower() if "#" in line else ""
                if not any(word in reason for word in (*DEFERRED, "optional", "extra", "slow to import")):
                    local.append(f"{path.relative_to(REPO)}:{node.lineno} {line.strip()}")
    assert local == []
