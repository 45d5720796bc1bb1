"""The runtime guard's events (evaluator/trust/inside/pesflow_guard.py) read into findings."""

from __future__ import annotations

import ast
import sys
from typing import Any

from evaluator.trust.findings import RULES, Finding
from evaluator.trust.written import graders_own

# What a value is, when a candidate returns it instead of plain values, whoever defined it.
LAZY_BUILTINS = ("builtins.generator", "builtins.coroutine", "builtins.function", "builtins.map", "builtins.filter",
                 "builtins.zip")


def _baseline_trees(baseline: dict[str, str | None]) -> list[ast.AST]:
    """The baseline's Python scope files, parsed (those that do not parse left out)."""
    trees = []
    for rel, text in baseline.items():
        if text and rel.endswith(".py"):
            try:
                trees.append(ast.parse(text))
            except (SyntaxError, ValueError):
                continue
    return trees


def baseline_classes(baseline: dict[str, str | None]) -> set[str]:
    """Class names the baseline's scope files define: a candidate returning one of those returns
    what the contract asks for, not a proxy of its own."""
    return {n.name for tree in _baseline_trees(baseline) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}


def imported_packages(baseline: dict[str, str | None]) -> list[str]:
    """The modules the baseline's scope files import by absolute name, less the standard
    library's (what a probe will import again: torch takes seconds). Whether each is an installed
    package, not the source tree's own, is for the sandbox to find out."""
    names: list[str] = []
    for tree in _baseline_trees(baseline):
        for n in ast.walk(tree):
            got = [a.name for a in n.names] if isinstance(n, ast.Import) else (
                [n.module] if isinstance(n, ast.ImportFrom) and n.module and not n.level else [])
            names += [g for g in got if g.split(".")[0] not in sys.stdlib_module_names and g != "__future__"]
    return list(dict.fromkeys(names))


def baseline_callables(baseline: dict[str, str | None]) -> set[str]:
    """Functions of the baseline's scope files that return a function of their own making (a
    decorator factory, a closure): returning a function is their contract, not a lazy output."""
    names: set[str] = set()
    for tree in _baseline_trees(baseline):
        for f in ast.walk(tree):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            inner = {n.name
                     for n in ast.walk(f) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not f}
            for r in ast.walk(f):
                v = r.value if isinstance(r, ast.Return) else None
                if isinstance(v, ast.Lambda) or (isinstance(v, ast.Name) and v.id in inner):
                    names.add(f.name)
                    break
    return names


def read(events: list[dict[str, Any]], contract_classes: set[str],
         contract_callables: frozenset[str] | set[str] = frozenset(),
         graders: str = "") -> tuple[list[Finding], dict[str, Any]]:
    """Findings from the guard's (and the host's) events. `graders`: the grader's own scripts
    (written.grader_text): a planted file they spell out whole is the grader's, listed, not found."""
    findings: list[Finding] = []
    graders_files: list[str] = []
    processes = {e.get("pid") for e in events if e.get("kind") == "start"}
    ended = {e.get("pid") for e in events if e.get("kind") == "end"}
    with_candidate = {e.get("pid") for e in events if e.get("kind") == "module" and e.get("role") == "candidate"}
    calls: dict[str, int] = {}
    lazy_seen: set[str] = set()
    left: dict[str, list[int]] = {}  # fn -> the sampled calls after its first that left threads running
    for e in events:
        kind = e.get("kind")
        if kind == "finding" and isinstance(e.get("family"), str) and graders and graders_own(e.get("text"), graders):
            graders_files.append(str(e.get("evidence", ""))[:300])
        elif kind == "finding" and isinstance(e.get("family"), str):
            rule = str(e.get("rule") or "")  # its family from the table (the event's own only for an unknown rule)
            findings.append(Finding(rule=rule, family="" if rule in RULES else e["family"],
                                    evidence=str(e.get("evidence", ""))[:300], screen="runtime"))
        elif kind == "call" and e.get("role") == "candidate":
            fn = str(e.get("fn"))
            calls[fn] = max(calls.get(fn, 0), int(e.get("n") or 0))
            if int(e.get("threads_left") or 0) > 0 and int(e.get("n") or 0) > 1:
                left.setdefault(fn, []).append(int(e["n"]))
            lazy = e.get("unplain")
            contract = str(lazy) == "builtins.function" and fn.rsplit(":", 1)[-1] in contract_callables
            if lazy and fn not in lazy_seen and not contract and (
                    str(lazy) in LAZY_BUILTINS or str(lazy).rsplit(".", 1)[-1] not in contract_classes):
                lazy_seen.add(fn)
                findings.append(Finding(rule="guard.lazy_output",
                                        evidence=f"{fn} returned a {lazy} (call {e.get('n')})", screen="runtime"))
    for fn, ns in left.items():
        # a pool's workers start once; a thread still running after call after call is work left behind
        if len(ns) >= 2:
            findings.append(Finding(rule="guard.threads_left", screen="runtime",
                                    evidence=f"{fn} left threads running when it returned (calls "
                                             f"{', '.join(map(str, ns[:5]))})"))
    spent = {"on": sum(float(e.get("seconds") or 0) for e in events if e.get("kind") == "on"),
             "calls": sum(float(e.get("calls_seconds") or 0) for e in events if e.get("kind") == "end"),
             "exit": sum(float(e.get("exit_seconds") or 0) for e in events if e.get("kind") == "end")}
    checks = {"processes": len(processes), "candidate_processes": len(with_candidate),
              "guard_seconds": {k: round(v, 4) for k, v in spent.items()},  # the guard's own figures, summed
              "ended": len(ended & processes), "sampled_calls": calls, "events": len(events),
              "via_socket": sum(1 for e in events if e.get("via") == "socket")}
    if graders_files:
        checks["graders_own_files"] = list(dict.fromkeys(graders_files))[:10]
    return _dedupe(findings), checks


def records(events: list[dict[str, Any]], socket_used: bool, field: str = "records") -> list[dict[str, Any]]:
    """The inputs each process kept for the probes, as its `end` event lists them (only the
    socket's copy when there was one: the files are the candidate's to rewrite), with the
    process's argv, folder, path and interpreter as its `start` event saw them, before the
    candidate's first line (a forked child's: its parent's); the `end` event's only without one.
    field="varied": the calls whose same unchanged inputs got other answers later in the process
    (inside/pesflow_same_answer.py), each with its process's argv the same way."""
    mine = [e for e in events if not socket_used or e.get("via") == "socket"]
    starts: dict[Any, dict[str, Any]] = {}
    for e in mine:
        if e.get("kind") == "start":
            starts[e.get("pid")] = starts.get(e.get("ppid"), e) if e.get("forked") else e
    out = []
    for e in mine:
        if e.get("kind") != "end":
            continue
        seen = starts.get(e.get("pid"))
        seen = seen if seen is not None and "sys_path" in seen else e
        for r in e.get(field) or []:
            if isinstance(r, dict) and (r.get("role") == "candidate" or field != "records"):
                out.append({**r, "argv": seen.get("argv"), "cwd": seen.get("cwd"), "pid": e.get("pid"),
                            "sys_path": seen.get("sys_path"), "exe": seen.get("exe")})
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.family, f.evidence)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
