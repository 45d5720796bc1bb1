"""Near-duplicates are never graded (issue 40): a candidate that is a graded program spelled again
(comments, blank lines, formatting; for Python its syntax tree) reuses that verdict, journaled
as a duplicate, at no grading. agent/population/code_key.py says what counts as the same."""

from __future__ import annotations

import itertools
import json

import pytest

from agent.config import load_config
from agent.population.code_key import code_key
from agent.search.session import start_run
from tests.conftest import toy_tasks_root
from tests.llm_server import Reply, ScriptedLLMServer, roles

LOOP = "def sum_squares(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n"


@pytest.mark.parametrize("a,b,same", [
    (LOOP, "# a comment\n\ndef sum_squares(n):  # why\n    total = 0\n\n    for i in range(n):\n        total += i*i\n    return total\n", True),
    ("x = {'a': 1}\n", 'x = {\n    "a": 1,\n}\n', True),  # quotes, line breaks inside brackets, a trailing comma
    (LOOP, LOOP.replace("i * i", "i ** 2"), False),
    ('def f():\n    "doc"\n    return 1\n', 'def f():\n    "other doc"\n    return 1\n', False),  # a docstring is a value
    ("def f(:\n", "def f( :\n", False),  # a file that does not parse: its exact text
])
def test_python_is_keyed_by_its_syntax_tree(a, b, same):
    assert (code_key({"k.py": a}) == code_key({"k.py": b})) == same


@pytest.mark.parametrize("a,b,same", [
    ("int f() {\n  return 1; // one\n}\n", "/* f */ int f() {\n\n    return 1;\n}\n", True),
    ('const char *s = "a // b";\n', 'const char *s = "a  b";\n', False),  # inside a literal, not a comment
    ("#define N 4\nint x = N;\n", "#define N 4 int x = N;\n", False),  # a preprocessor line ends at its line break
    ("all:\n\tcc x.c\n", "all:\n    cc x.c\n", False),  # a Makefile's tab: any other file by its exact text
])
def test_c_like_sources_drop_comments_and_spacing_and_other_files_count_exactly(a, b, same):
    name = "Makefile" if a.startswith("all:") else "k.cu"
    assert (code_key({name: a}) == code_key({name: b})) == same


CLOSED = "def sum_squares(n):\n    return (n - 1) * n * (2 * n - 1) // 6\n"


def spellings(code: str):
    """The same program, spelled anew each time: comments, blank lines, spacing, a parenthesis."""
    for k in itertools.count():
        lines = code.splitlines()
        if k % 2:  # the returned expression in parentheses
            lines = [ln.replace("return ", "return (", 1) + ")" if "return " in ln else ln for ln in lines]
        head = f"# spelling {k}\n" + "\n" * (k % 3)
        yield head + "\n".join(ln + (f"  # note {k}" if i == k % len(lines) else "") for i, ln in enumerate(lines)) + "\n"


def test_a_search_offered_two_programs_in_many_spellings_grades_each_once(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
    root = tmp_path / "tasks"
    toy_tasks_root(root)
    offers = {"loop": spellings(LOOP.replace("total += i * i", "total = total + i * i")), "closed": spellings(CLOSED)}
    turn = itertools.count()

    def executor(req):
        which = "closed" if next(turn) % 2 else "loop"
        return Reply(text=f"toy/kernel.py\n```python\n{next(offers[which])}```\n")
    with ScriptedLLMServer(roles(executor, "Try either form.")) as server:
        cfg = load_config(sets=["llm.default=openai:test-model", f"llm.base_url={server.openai_base_url}", "loop.rounds=5",
                                "loop.children=4", f"run.out={tmp_path / 'traces'}", "run.quiet=true",
                                f"evaluator.local.cache_dir={cache_dir}", "llm.timeout_sec=20", "loop.score_final_with_hidden=false"])
        run_dir, status = start_run(cfg, "kfc/toy-sum", [str(root)])
    assert status == "finished"
    events = [json.loads(ln) for ln in (run_dir / "journal.jsonl").read_text().splitlines() if ln.strip()]
    kids = [e["data"] for e in events if e["kind"] == "candidate" and e["data"].get("round", 0) > 0]
    graded = {e["data"]["content_hash"] for e in events if e["kind"] == "verdict" and not e["data"].get("reused")
              and e["data"].get("label") == "" and e["data"]["content_hash"] in {k["content_hash"] for k in kids}}
    near = [e["data"] for e in events if e["kind"] == "duplicate" and e["data"].get("near")]
    assert len(kids) == 20 and len({k["content_hash"] for k in kids}) == 20  # twenty spellings, every one new text
    assert len(graded) == 2, graded  # each program graded once
    assert len(near) == 18 and {d["of"] for d in near} <= {k["id"] for k in kids}
    totals = json.loads((run_dir / "run.json").read_text())["totals"]
    assert totals["duplicates_not_regraded"] == 18
