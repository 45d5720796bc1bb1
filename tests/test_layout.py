"""The shape README's Architecture section promises: no import circle among pesflow's modules,
no import up its layers (LAYERS), no function over 80 lines (but the listed ones, which only shrink),
no line over 120 characters, no import inside a function except to defer an optional dependency."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("agent", "evaluator")
MAX_LINE = 120  # characters; a module's size is kept by concept (one per module), not by a line count
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


def test_no_line_over_120_characters():
    long = [f"{p.relative_to(REPO)}:{i}" for p in modules().values() for i, line in enumerate(p.read_text().splitlines(), 1)
            if len(line) > MAX_LINE]
    assert long == []


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


# The layers, lowest first (issue 50): a module imports from its own layer or a lower one, never a
# higher one, and no two units import each other, however indirectly. A unit is a package below
# agent/ or evaluator/ (agent.search, evaluator.backends with its own subpackages) or a module there
# (evaluator.task); the roots' own __init__ hold nothing and count as no unit.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("evaluator.grading_records",),  # records only: what a grading is asked, what a backend saw, what it gave
    ("evaluator.config", "evaluator.benchmark", "evaluator.dev_details", "evaluator.feedback", "evaluator.task", "evaluator.catalog",
     "evaluator.candidate", "evaluator.modes", "evaluator.scoring", "evaluator.hardware", "evaluator.device",
     "evaluator.ceilings", "evaluator.dockerfile", "evaluator.isolation", "evaluator.limits", "evaluator.sandbox",
     "evaluator.supervise", "evaluator.programs"),  # the package, its settings, the machine and the sandbox (and their scripts)
    ("evaluator.trust", "evaluator.grading_policy", "evaluator.mismatch", "evaluator.verdict",
     "evaluator.profile"),  # what a grading's records mean
    ("evaluator.backends",),  # where gradings run
    ("evaluator.planned",),  # one grading as planned: what an evaluation's stages carry
    ("evaluator.parallel",),  # the workers in front of a backend
    ("evaluator.evaluation",),  # one candidate -> one verdict
    ("evaluator.calibrate", "evaluator.package_check"),  # commands' work over the evaluator
    ("agent.busy", "agent.extras", "agent.rundir", "agent.population"),  # counters, extras, the run directory, members
    ("agent.config",),  # the configuration, merged and typed
    ("agent.llm",),  # model calls, journaled
    ("agent.search",),  # the search, over the model and the evaluator
    ("agent.readers", "agent.experiments"),  # what reads runs, what runs many
    ("agent.cliargs", "agent.cli"),  # the command
)
# (importer, imported) modules allowed upward for now, each with why; none today.
UPWARD_EXCEPTIONS: dict[tuple[str, str], str] = {}


def unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def upward(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...],
           allowed: dict[tuple[str, str], str]) -> list[str]:
    """Every import that goes up a layer or closes a circle between units, one line each; and
    every unit no layer places (a new package must be given its place)."""
    rank = {u: i for i, layer in enumerate(layers) for u in layer}
    crossing = sorted((m, t) for m, ts in graph.items() for t in ts
                      if unit(m) != unit(t) and m not in PACKAGES and t not in PACKAGES)
    edges: dict[str, set[str]] = {}
    for m, t in crossing:
        edges.setdefault(unit(m), set()).add(unit(t))
    found = [f"{u} is in no layer" for u in sorted({unit(m) for m in graph if m not in PACKAGES} - set(rank))]
    for m, t in crossing:
        a, b = unit(m), unit(t)
        if (m, t) in allowed or a not in rank or b not in rank:
            continue
        if rank[b] > rank[a]:
            found.append(f"{m} -> {t}: {a} is below {b}")
        elif rank[b] == rank[a] and reaches(edges, b, a):  # across layers a circle has an upward import, named above
            found.append(f"{m} -> {t}: {b} imports {a} back")
    return found


def test_the_checker_finds_an_upward_import():
    layers = (("evaluator.low",), ("evaluator.mid", "evaluator.side"), ("evaluator.high",))
    graph = {"evaluator.low": {"evaluator.high"}, "evaluator.mid": {"evaluator.side.x"}, "evaluator.side.x": {"evaluator.mid"},
             "evaluator.high": {"evaluator.low", "evaluator"}, "evaluator.new": set(), "evaluator": set()}
    assert upward(graph, layers, {}) == [
        "evaluator.new is in no layer",
        "evaluator.low -> evaluator.high: evaluator.low is below evaluator.high",
        "evaluator.mid -> evaluator.side.x: evaluator.side imports evaluator.mid back",
        "evaluator.side.x -> evaluator.mid: evaluator.mid imports evaluator.side back"]
    assert upward(graph, layers, {("evaluator.low", "evaluator.high"): "why", ("evaluator.mid", "evaluator.side.x"): "why",
                                  ("evaluator.side.x", "evaluator.mid"): "why"}) == ["evaluator.new is in no layer"]


def test_no_upward_import_in_agent_or_evaluator():
    graph = import_graph()
    assert graph["agent.llm.gateway"] and graph["evaluator.grading_policy"]  # the graph is real
    assert upward(graph, LAYERS, UPWARD_EXCEPTIONS) == []


# ---------------------------------------------------------------- function length
MAX_FUNCTION_LINES = 80
# Functions still over the limit, each with its length today: the list only shrinks (issue 50,
# "objects, not closures"); a function here that grows, or a new one over the limit, fails.
LONG_FUNCTIONS: dict[str, int] = {
    "evaluator/trust/inside/pesflow_guard_calls.py:install": 331,
    "evaluator/trust/inside/pesflow_guard_active.py:install": 300,
    "evaluator/trust/inside/pesflow_guard_watch.py:install": 272,
    "evaluator/trust/inside/pesflow_guard_objects.py:install": 151,
    "evaluator/trust/inside/pesflow_guard_objects.py:instrument_class": 97,
    "evaluator/trust/inside/pesflow_guard_active.py:hook": 100,
}


def function_lengths() -> dict[str, int]:
    """Every function of pesflow's packages (nested ones too) by file and name: def line to last line."""
    out: dict[str, int] = {}
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{path.relative_to(REPO)}:{node.name}"
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def test_no_function_over_80_lines_but_the_listed_ones_and_those_only_shrink():
    lengths = function_lengths()
    over = {k: n for k, n in lengths.items() if n > MAX_FUNCTION_LINES}
    assert {k: n for k, n in over.items() if n > LONG_FUNCTIONS.get(k, MAX_FUNCTION_LINES)} == {}
    # a listed function split since: take it off the list
    assert {k for k in LONG_FUNCTIONS if lengths.get(k, 0) <= MAX_FUNCTION_LINES} == set()
