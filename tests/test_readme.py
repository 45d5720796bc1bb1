"""The README cannot drift from the program (issue 19): every `pesflow` command and flag it shows
is one the argument parsers have, every flag of a command is in its row of the command table,
every config key it names is in configs/default.yaml, the verdict fields it lists are the ones
`pesflow evaluate --json` prints, and .ci/run runs exactly its test line. And the README stays a
contract a newcomer reads in ten minutes: at most 600 lines, a Layout that names every package
directory and every module of agent/ and evaluator/, and no dated figure outside benchmarks/results/
(README-measurements.md there holds them).

Pure parsing of README.md against the real parsers (agent/cliargs.py), the real default.yaml and the
real tree.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from agent.cliargs import build_parser, flags_of, walk
from evaluator.verdict import Verdict
from tests.conftest import REPO

README = (REPO / "README.md").read_text()
PARSERS = walk(build_parser())
COMMANDS = set(PARSERS)
DEFAULTS = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())
FILE_SUFFIXES = (".json", ".jsonl", ".yaml", ".md", ".py", ".txt", ".sh", ".toml", ".html", ".patch", ".pth", ".cu", ".csv", ".tex")


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S)


def code_spans(text: str) -> list[str]:
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", prose)


def commands_in(line: str) -> list[str]:
    """The `pesflow ...` / `./run_task.sh ...` commands of one shell line (each segment between
    &&, ; and pipes, after VAR=value assignments and sudo)."""
    out = []
    for seg in re.split(r"&&|;|\s\|\s", line.split("  #", 1)[0]):
        seg = re.sub(r"^\s*(?:(?:[A-Z_]+=\S*|sudo)\s+)*", "", seg).strip()
        if re.match(r"(?:pesflow|\./run_task\.sh)(?:\s|$)", seg):
            out.append(seg)
    return out


def invocations(text: str) -> list[str]:
    """Every command the README shows: each line of its shell blocks, and each code span."""
    out = []
    for block in code_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            out += commands_in(line)
    for span in code_spans(text):
        out += commands_in(span.replace("\\|", "|"))
    return out


def command_of(words: list[str]) -> tuple[str | None, list[str]]:
    """(the subcommand's words, the rest) of `pesflow a [b] ...`; ./run_task.sh is `pesflow run`."""
    if words[0] == "./run_task.sh":
        return "run", words[1:]
    rest = words[1:]
    if len(rest) >= 2 and f"{rest[0]} {rest[1]}" in COMMANDS:
        return f"{rest[0]} {rest[1]}", rest[2:]
    if rest and rest[0] in COMMANDS:
        return rest[0], rest[1:]
    return None, rest


def flags_in(words: list[str]) -> list[str]:
    return [w.split("=")[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)]


def check(text: str) -> list[str]:
    """What the README `text` gets wrong about the parsers: one line each."""
    problems = []
    for inv in invocations(text):
        try:
            words = shlex.split(inv.replace("[", " ").replace("]", " ").replace("\\|", " ").replace("|", " "))
        except ValueError:
            words = inv.split()
        if len(words) < 2 and words[:1] != ["./run_task.sh"]:
            continue
        cmd, rest = command_of(words)
        if cmd is None:
            if rest and re.fullmatch(r"[a-z]+", rest[0]):
                problems.append(f"`{inv.strip()}`: pesflow has no command {rest[0]!r}")
            continue
        have = flags_of(PARSERS[cmd])
        problems += [f"`{inv.strip()}`: `pesflow {cmd}` has no flag {f}" for f in flags_in(rest) if f not in have]
    return problems


def table_rows(text: str) -> dict[str, str]:
    """The command table: its command's words -> the row's first cell."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `((?:pesflow|\./run_task\.sh)[^`]*)` \|", line)
        if m:
            cmd, _ = command_of(m.group(1).replace("\\|", " ").split())
            if cmd:
                rows[cmd] = m.group(1)
    return rows


def config_keys(text: str) -> list[str]:
    """Dotted names under one of default.yaml's sections: `--set key=...` and `section.key` spans."""
    keys = [k for k in re.findall(r"--set\s+([a-z_][\w.]*)=", text) if k != "key"]  # `--set key=value`: the form
    for span in code_spans(text):
        for tok in re.findall(r"\b([a-z_]+(?:\.[a-z_0-9]+)+)\b", span):
            if tok.split(".")[0] in DEFAULTS and not tok.endswith(FILE_SUFFIXES):
                keys.append(tok)
    return list(dict.fromkeys(keys))


def in_defaults(key: str) -> bool:
    node = DEFAULTS
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_command_and_flag_the_readme_shows_is_the_parsers():
    assert len(invocations(README)) > 30  # the parse finds the README's commands at all
    assert check(README) == []


def test_a_readme_naming_a_flag_the_parser_lacks_fails():
    bad = README + "\n```bash\npesflow evaluate kfc/x --mode oracle --turbo\n```\nThen `pesflow resume DIR --from-scratch`.\n"
    assert check(bad) == ["`pesflow evaluate kfc/x --mode oracle --turbo`: `pesflow evaluate` has no flag --turbo",
                          "`pesflow resume DIR --from-scratch`: `pesflow resume` has no flag --from-scratch"]
    assert check("`pesflow frobnicate DIR`") == ["`pesflow frobnicate DIR`: pesflow has no command 'frobnicate'"]


COMMON = ("--tasks-root", "--config", "--set")


def common_options(text: str) -> dict[str, set[str]]:
    """The sentence under the table naming the commands that take the common options: command -> flags."""
    m = re.search(r"The commands that load a task or the configuration \((.*?)\) also take (.*?), and\s+`tasks fetch` the last two",
                  text, re.S)
    if not m:
        return {}
    flags = set(re.findall(r"`(--[a-z-]+)", m.group(2)))
    out = {c: flags for c in re.findall(r"`([a-z ]+)`", m.group(1))}
    out["tasks fetch"] = flags - {"--tasks-root"}
    return out


def test_the_command_table_has_every_command_and_every_flag():
    rows, common = table_rows(README), common_options(README)
    assert set(rows) == COMMANDS and set(common["tasks"]) == set(COMMON)
    for cmd, cell in rows.items():
        have = flags_of(PARSERS[cmd])
        missing = sorted(f for f in have if f.startswith("--") and f != "--help" and f not in cell
                         and f not in common.get(cmd, set()))
        assert not missing, f"the README's row of `pesflow {cmd}` lacks {missing}"
        said = [f for f in common.get(cmd, set()) if f not in have]
        assert not said, f"the README says `pesflow {cmd}` takes {said}; it does not"


def test_every_config_key_the_readme_names_is_in_default_yaml():
    keys = config_keys(README)
    assert "evaluator.local.install_steps" in keys and "loop.pipeline_depth" in keys
    assert [k for k in keys if not in_defaults(k)] == []
    assert not in_defaults("loop.no_such_knob") and config_keys("`loop.no_such_knob`") == ["loop.no_such_knob"]


def test_the_verdict_fields_listed_are_the_ones_printed():
    m = re.search(r"`pesflow evaluate --json` prints: `([^`]+)`", README)
    listed = {re.sub(r"\s*\{.*?\}", "", f).strip() for f in re.sub(r"\{[^}]*\}", "", m.group(1)).split(",")}
    assert listed == set(Verdict.model_fields) - {"raw"}


def test_the_two_lines_make_and_use_a_venv_and_ci_runs_the_readmes_test_line():
    blocks = [b.strip() for b in code_blocks(README)]
    main = next(b for b in blocks if "./run_task.sh" in b)
    test = next(b for b in blocks if "pytest" in b and "venv" in b)
    venv = "python3 -m venv .venv && . .venv/bin/activate && pip install -e "
    assert main.startswith(venv + "'.[tasks]' && ") and test == venv + "'.[test]' && python3 -m pytest -q"
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if not ln.lstrip().startswith("#")]
    assert ci[-1] == test  # the last thing CI does is the README's line, verbatim
    assert any(".venv/bin/python3 -m pip install" in ln and "torch" in ln for ln in ci)  # torch into that venv
    assert "--system-site-packages" not in "\n".join(ci)


@pytest.mark.parametrize("flag", ["--backend", "--tasks-root"])
def test_run_task_sh_takes_runs_flags(flag):
    assert flag in table_rows(README)["run"] and flag in flags_of(PARSERS["run"])


# ---------------------------------------------------------------- the README's size, layout and dates

MAX_LINES = 600
PACKAGE_ROOTS = ("agent", "evaluator")  # every directory of Python under these has a Layout entry naming its modules
MEASUREMENTS = REPO / "benchmarks" / "results" / "README-measurements.md"


def layout_entries(text: str) -> dict[str, str]:
    """The Layout section's block: an entry's head (its first word, at column 0) -> the entry's text
    (the rest of its first line and its indented continuation lines)."""
    section = text.split("\n## Layout", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    entries: dict[str, str] = {}
    head = None
    for line in block.splitlines():
        if line[:1].strip():
            head, _, rest = line.partition(" ")
            entries[head] = rest
        elif head is not None:
            entries[head] += " " + line.strip()
    return entries


def tracked_top_dirs() -> set[str]:
    """The repository's top-level directories, as git tracks them (else the non-hidden folders that
    hold a file, less what the package's install and runs leave behind)."""
    try:
        files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
        return {f.split("/", 1)[0] for f in files if "/" in f and not f.startswith(".")}
    except (OSError, subprocess.CalledProcessError):
        return {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")
                and not p.name.endswith(".egg-info") and p.name not in ("traces", "baselines", "build", "dist")}


def package_dirs(root=REPO) -> dict[str, list[str]]:
    """Every directory of Python under PACKAGE_ROOTS ("agent/search/") -> its modules ("graph.py", ...;
    __init__.py is the directory itself)."""
    out: dict[str, list[str]] = {}
    for top in PACKAGE_ROOTS:
        for d in sorted([root / top, *(root / top).rglob("*")]):
            if d.is_dir() and d.name != "__pycache__":
                mods = sorted(p.name for p in d.glob("*.py"))
                if mods:
                    out[d.relative_to(root).as_posix() + "/"] = [m for m in mods if m != "__init__.py"]
    return out


def named(name: str, entry: str) -> bool:
    return re.search(rf"(?<![\w./]){re.escape(name)}(?!\w)", entry) is not None


def layout_problems(text: str, dirs: dict[str, list[str]], top: set[str]) -> list[str]:
    """What the Layout section leaves out (or names that is not there): one line each. A package
    directory needs an entry of its own whose text names each of its modules as `name.py`; a top-level
    directory needs an entry (its own or one under it)."""
    entries = layout_entries(text)
    problems = [f"Layout has no entry for {d}" for d in sorted(top)
                if not any(h == d + "/" or h.startswith(d + "/") for h in entries)]
    for d, mods in dirs.items():
        if d not in entries:
            problems.append(f"Layout has no entry for {d} (modules {', '.join(mods) or 'none'})")
            continue
        problems += [f"Layout's {d} entry does not name {m}" for m in mods if not named(m, entries[d])]
        problems += [f"Layout's {d} entry names {m}, which {d} does not hold"
                     for m in re.findall(r"(?<![\w./])(\w+\.py)\b", entries[d]) if m not in mods]
    return problems


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
RESULTS_LINK = re.compile(r"\]\((benchmarks/results/[^)\s]*)\)")


def dated_lines(text: str) -> list[str]:
    """Lines of the README that carry a date (2026-12-05) anywhere but in a link's target under
    benchmarks/results/: dated figures live there, the README links to them."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if DATE.search(RESULTS_LINK.sub("]()", line))]


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_at_most_600_lines():
    n = len(README.splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; at most {MAX_LINES} (move figures to {MEASUREMENTS.name})"


def test_the_layout_names_every_package_directory_and_module():
    dirs, top = package_dirs(), tracked_top_dirs()
    assert {"agent/", "evaluator/trust/", "evaluator/trust/inside/", "evaluator/backends/"} <= set(dirs)
    assert "supervise.py" in dirs["evaluator/"] and {"agent", "evaluator", "tests", "configs"} <= top
    assert layout_problems(README, dirs, top) == []


def test_a_layout_missing_a_module_or_a_directory_fails():
    dirs, top = package_dirs(), tracked_top_dirs()
    base = layout_problems(README, dirs, top)  # [] unless a module came without its line (the test above says which)

    def more(text: str, d: dict[str, list[str]], t: set[str]) -> list[str]:
        return [p for p in layout_problems(text, d, t) if p not in base]

    new_module = {**dirs, "evaluator/": [*dirs["evaluator/"], "brand_new.py"]}
    assert more(README, new_module, top) == ["Layout's evaluator/ entry does not name brand_new.py"]
    new_dir = {**dirs, "evaluator/novel/": ["thing.py"]}
    assert more(README, new_dir, top) == ["Layout has no entry for evaluator/novel/ (modules thing.py)"]
    gone = {**dirs, "agent/": [m for m in dirs["agent/"] if m != "extras.py"]}
    assert more(README, gone, top) == ["Layout's agent/ entry names extras.py, which agent/ does not hold"]
    assert more(README, dirs, top | {"notes"}) == ["Layout has no entry for notes"]
    # a module named only in prose (not as name.py) does not count
    prose = README.replace("supervise.py the grading's init", "supervise the grading's init")
    assert more(prose, dirs, top) == ["Layout's evaluator/ entry does not name supervise.py"]


def test_no_dated_figure_outside_benchmarks_results():
    assert dated_lines(README) == []


def test_a_dated_line_outside_a_results_link_fails():
    assert dated_lines("see [the run](benchmarks/results/loop-2026-12-01.txt) for figures") == []
    assert dated_lines("on 2026-12-04 the probes took 0.29 s") == ["1: on 2026-12-04 the probes took 0.29 s"]
    assert dated_lines("[loop-2026-12-01.txt](benchmarks/results/loop-2026-12-01.txt)") != []  # the link's text
    assert dated_lines("x\n[run](benchmarks/gpu/results-h200/2026-12-03-trust/)") == [
        "2: [run](benchmarks/gpu/results-h200/2026-12-03-trust/)"]
    assert dated_lines(README + "\nmeasured at 2026-12-05\n") != []


def test_the_links_into_benchmarks_results_resolve():
    headings = {anchor(h) for h in re.findall(r"^#+ (.+)$", MEASUREMENTS.read_text(), re.M)}
    for target in RESULTS_LINK.findall(README):
        path, _, frag = target.partition("#")
        assert (REPO / path).exists(), f"README links to {path}, which is not there"
        if frag:
            assert path.endswith(".md") and frag in headings, f"README links to {target}: no such heading"
    assert anchor("The screen's cost") == "the-screens-cost" and "reward-hacking-the-trust-screen" in headings


def test_every_command_of_the_table_runs_from_the_installed_entry_point():
    # the README's `pesflow ...` lines, run: each command starts and explains itself (exit 0)
    import sys

    exe = Path(sys.executable).parent / "pesflow"
    assert exe.exists(), "pesflow is not installed in this environment: pip install -e '.[test]'"
    for cmd in sorted(COMMANDS):
        done = subprocess.run([str(exe), *cmd.split(), "--help"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "usage: pesflow" in done.stdout, (cmd, done.stderr[-500:])
