"""Static gates of the paraphrase-mining grader (no candidate code runs here).

head_moved, out_of_scope_edit:<path>, forbidden_pattern:<what>.
Writes {"hard_fail_reasons": [...], "details": {...}} to --out.
"""

import argparse
import ast
import io
import json
import os
import re
import subprocess
import sys
import tokenize

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = json.load(open(os.path.join(HERE, "workloads.json")))
SCOPE = [WORKLOADS["scope_file"]]
SCOPE_PACKAGE = WORKLOADS["scope_module"].rsplit(".", 1)[0]

# Modules the scope file may import (top-level name, or an exact dotted name).
ALLOWED_IMPORTS = {
    "numpy", "math", "heapq", "itertools", "functools", "operator",
    "collections", "bisect", "typing", "__future__", "array", "numbers",
}
ALLOWED_REPO_MODULES = {"sbert_mini", "sbert_mini.util", "sbert_mini.util.checks"}

FORBIDDEN_CALLS = {
    "open", "exec", "eval", "compile", "__import__", "breakpoint", "input",
    "getattr", "setattr", "delattr", "globals", "locals", "vars",
}
FORBIDDEN_ATTRS = {
    "perf_counter", "perf_counter_ns", "process_time", "process_time_ns",
    "monotonic", "monotonic_ns", "time_ns", "_getframe", "f_back", "f_globals",
    "f_locals", "gi_frame", "__globals__", "__builtins__", "__subclasses__",
    "__code__", "ctypeslib", "f2py", "distutils", "tofile", "fromfile", "memmap",
    "open_memmap", "save", "savez", "savez_compressed", "load", "loadtxt",
    "savetxt", "genfromtxt", "fromregex", "DataSource",
}
FORBIDDEN_NAMES = {"__builtins__", "__loader__", "__spec__"}
# Searched in the code with comments removed (string literals included).
FORBIDDEN_TEXT = [
    ("reads_tests", re.compile(r"/tests\b")),
    ("reads_logs", re.compile(r"/logs\b")),
    ("frozen_baseline", re.compile(r"verifier[-_]baseline|_pm_frozen", re.I)),
    ("grader_modules", re.compile(r"\bpm_(reference|gen|harness|gates)\b")),
    ("subprocess", re.compile(r"\bsubprocess\b")),
    ("os_system", re.compile(r"\bos\s*\.\s*(system|popen|exec\w*|spawn\w*|fork)\b")),
    ("socket", re.compile(r"\bsocket\b")),
    ("ctypes", re.compile(r"\b(ctypes|cffi)\b")),
    ("threads_or_processes", re.compile(r"\b(threading|_thread|multiprocessing|concurrent\.futures)\b")),
    ("atexit", re.compile(r"\batexit\b")),
    ("time_monkeypatch", re.compile(r"\btime\s*\.\s*\w+\s*=[^=]")),
    ("sys_modules", re.compile(r"\bsys\s*\.\s*modules\b")),
]


def git(repo, *args):
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", repo] + list(args),
        capture_output=True, text=True,
    )


def changed_paths(repo):
    res = git(repo, "status", "--porcelain", "-z", "--untracked-files=all")
    if res.returncode != 0:
        raise RuntimeError("git status failed: " + res.stderr.strip())
    fields = res.stdout.split("\0")
    paths = []
    k = 0
    while k < len(fields):
        item = fields[k]
        k += 1
        if not item:
            continue
        status, path = item[:2], item[3:]
        paths.append(path)
        if "R" in status or "C" in status:
            if k < len(fields) and fields[k]:
                paths.append(fields[k])
            k += 1
    return paths


def ignorable(path):
    parts = path.split("/")
    return "__pycache__" in parts or path.endswith(".pyc")


def strip_comments(src):
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline)
                if t.type != tokenize.COMMENT]
        return tokenize.untokenize(toks)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src


def resolve_from(node):
    if node.level == 0:
        return node.module or ""
    base = SCOPE_PACKAGE.split(".")
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    mod = ".".join(base)
    return mod + ("." + node.module if node.module else "")


def import_allowed(name):
    if name in ALLOWED_REPO_MODULES:
        return True
    return name.split(".")[0] in ALLOWED_IMPORTS


def scan_source(src):
    found = []
    code = strip_comments(src)
    for what, rx in FORBIDDEN_TEXT:
        if rx.search(code):
            found.append(what)
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return found  # import_failed reports it later
    numpy_aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not import_allowed(alias.name):
                    found.append("import:" + alias.name)
                if alias.name.split(".")[0] == "numpy":
                    numpy_aliases.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            mod = resolve_from(node)
            if mod.split(".")[0] == "sbert_mini":
                for alias in node.names:
                    full = mod + "." + alias.name
                    ok = (mod == "sbert_mini.util.checks"
                          or (mod in ALLOWED_REPO_MODULES and full in ALLOWED_REPO_MODULES))
                    if not ok:
                        found.append("import:" + full)
            elif not import_allowed(mod):
                found.append("import:" + mod)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_CALLS:
                found.append("call:" + node.func.id)
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
            found.append("attr:" + node.attr)
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append("name:" + node.id)
    # Assignments into the numpy module (monkeypatching shared state).
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for tgt in targets:
            root = tgt
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(tgt, ast.Attribute) and isinstance(root, ast.Name) and root.id in numpy_aliases:
                found.append("numpy_monkeypatch")
    out = []
    for f in found:
        if f not in out:
            out.append(f)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default="/app/repo")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    reasons = []
    details = {"scope": SCOPE}

    cnt = git(args.repo, "rev-list", "--count", "HEAD")
    details["head_commit_count"] = cnt.stdout.strip()
    if cnt.returncode != 0 or cnt.stdout.strip() != "1":
        reasons.append("head_moved")

    try:
        touched = [p for p in changed_paths(args.repo) if not ignorable(p)]
    except RuntimeError as exc:
        touched = []
        details["git_status_error"] = str(exc)
        reasons.append("out_of_scope_edit:<git status failed>")
    details["changed_paths"] = touched
    for p in touched:
        if p not in SCOPE:
            reasons.append("out_of_scope_edit:" + p)

    patterns = []
    for rel in SCOPE:
        path = os.path.join(args.repo, rel)
        if not os.path.isfile(path):
            continue  # import_failed reports the missing module
        with open(path, encoding="utf-8", errors="replace") as fh:
            patterns += scan_source(fh.read())
    details["forbidden_patterns"] = patterns
    for what in patterns:
        reasons.append("forbidden_pattern:" + what)

    with open(args.out, "w") as fh:
        json.dump({"hard_fail_reasons": reasons, "details": details}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
