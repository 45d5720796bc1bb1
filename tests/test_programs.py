"""The scripts of evaluator/programs/, each run as its callers run it (a child interpreter, by
path, with arguments) on small folders: the copy-out, the written-layer scan, the ceilings'
measurement. And what lets them run outside pesflow's environment: stdlib only."""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluator import programs
from evaluator.programs import COPY_OUT, MEASURE_CEILINGS, WRITTEN_SCAN


def run_script(script: Path, *args: object, flags: tuple[str, ...] = ("-I", "-S")) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *flags, str(script), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def status_lines(status: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in status.read_text().splitlines())


# ---------------------------------------------------------------- copy_out.py

def test_copy_out_keeps_to_its_budgets_and_follows_no_link(tmp_path):
    src, dest, status = tmp_path / "src", tmp_path / "dest", tmp_path / "status"
    (src / "sub").mkdir(parents=True)
    (src / "a.log").write_bytes(b"a" * 100)
    (src / "b.log").write_bytes(b"b" * 100)
    (src / "sub" / "c.log").write_bytes(b"c" * 10)  # walked after a and b: the total is spent by then
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    (src / "0-link.log").symlink_to(secret)  # walked first, while budget is left
    (src / "0-linked_dir").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(src / "0-pipe")  # opened without blocking, and not a regular file: skipped
    status.write_text("grader_rc=0\n")
    run_script(COPY_OUT, status, "", 60, 100, "", src, dest)
    assert (dest / "a.log").read_bytes() == b"a" * 60  # cut at the per-file cap
    assert (dest / "b.log").read_bytes() == b"b" * 40  # what was left of the total
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
    assert got == ["a.log", "b.log"]
    assert status_lines(status) == {"grader_rc": "0", "copied_files": "2"}  # appended to


def test_copy_out_copies_a_single_file_but_not_through_a_link(tmp_path):
    status = tmp_path / "status"
    status.write_text("")
    (tmp_path / "reward.txt").write_text("0.5")
    (tmp_path / "link.txt").symlink_to(tmp_path / "reward.txt")
    run_script(COPY_OUT, status, "", 1 << 20, 1 << 20, "", tmp_path / "reward.txt", tmp_path / "out" / "reward.txt",
               tmp_path / "link.txt", tmp_path / "out" / "link.txt", tmp_path / "missing", tmp_path / "out" / "missing")
    assert (tmp_path / "out" / "reward.txt").read_text() == "0.5"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["reward.txt"]
    assert status_lines(status)["copied_files"] == "1"


def test_copy_out_notes_a_result_changed_after_the_grader_and_the_scratch(tmp_path):
    status, scratch = tmp_path / "status", tmp_path / "scratch"
    scratch.mkdir()
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text("{}")
    time.sleep(0.1)
    end = time.time()
    time.sleep(0.1)
    after.write_text("{}")  # its inode changed after grader_end: forged
    results = "\n".join([str(before), str(after), str(tmp_path / "never-written.json")])
    status.write_text(f"grader_end=1\ngrader_end={end:.6f}\n")  # the last one counts
    run_script(COPY_OUT, status, scratch, 10, 10, results)
    got = status_lines(status)
    assert got["forged"] == str(after)
    assert int(got["scratch_total"]) > 0 and int(got["scratch_used"]) >= 0 and int(got["inodes_free"]) >= 0
    assert got["copied_files"] == "0"
    # no grader_end noted (the grader never returned): nothing is called forged
    status.write_text("")
    run_script(COPY_OUT, status, "", 10, 10, results)
    assert status_lines(status) == {"copied_files": "0"}


def test_copy_out_reads_a_follow_ups_pairs_from_a_file(tmp_path):
    status = tmp_path / "status"
    status.write_text("")
    for name in ("one", "two"):
        (tmp_path / f"{name}.txt").write_text(name)
    pairs = tmp_path / "copy"
    pairs.write_text("\n".join(str(p) for p in [tmp_path / "one.txt", tmp_path / "got" / "1", tmp_path / "two.txt",
                                                tmp_path / "got" / "2"]) + "\n")
    run_script(COPY_OUT, status, "", 100, 100, "", f"@{pairs}")
    assert (tmp_path / "got" / "1").read_text() == "one" and (tmp_path / "got" / "2").read_text() == "two"
    assert status_lines(status)["copied_files"] == "2"


# ---------------------------------------------------------------- written_scan.py

RULE = ("def startup_file(path):\n    return path.endswith(('/sitecustomize.py', '.pth'))\n"
        "def vcs_control(path):\n    return None\n")


def scan(tmp_path: Path, spec: dict) -> dict:
    rule, out = tmp_path / "rule.py", tmp_path / "scan.json"
    rule.write_text(RULE)
    run_script(WRITTEN_SCAN, out, rule, json.dumps({"max_found": 50, "max_text": 64, "skip": [], "image": [], **spec}))
    return json.loads(out.read_text())


def test_the_scan_finds_startup_files_by_the_rule_with_their_text_and_follows_no_link(tmp_path):
    tmp = tmp_path / "layer"
    (tmp / "repo").mkdir(parents=True)
    (tmp / "repo" / "sitecustomize.py").write_text("import time\n")
    (tmp / "repo" / "notes.py").write_text("x = 1\n")  # not a startup file
    (tmp / "big.pth").write_text("#" * 65)  # over max_text: named without its text
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "sitecustomize.py").write_text("planted\n")
    (tmp / "link").symlink_to(elsewhere, target_is_directory=True)  # not walked into
    got = scan(tmp_path, {"walk": [[str(tmp), "/tmp/"]]})
    assert sorted(got["found"]) == [["/tmp/big.pth", False, None], ["/tmp/repo/sitecustomize.py", False, "import time\n"]]
    assert got["image"] == []
    assert len(scan(tmp_path, {"walk": [[str(tmp), "/tmp"]], "max_found": 1})["found"]) == 1  # kept to max_found


def test_the_scan_names_the_images_modules_changed_less_the_candidates(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    for rel in ("bench/timing.py", "bench/__init__.py", "kern/kernel.py", "data/table.csv"):
        (lower / rel).parent.mkdir(parents=True, exist_ok=True)
        (lower / rel).write_text("x = 1\n")
    for rel in ("bench/timing.py", "kern/kernel.py", "gen/new.py", "data/table.csv"):
        (upper / rel).parent.mkdir(parents=True, exist_ok=True)
        (upper / rel).write_text("y = 2\n")
    whiteout = os.geteuid() == 0
    if whiteout:  # a 0/0 character device: the image's module removed
        os.mknod(upper / "bench/__init__.py", 0o600 | stat.S_IFCHR, os.makedev(0, 0))
    got = scan(tmp_path, {"walk": [], "image": [[str(upper), "/app", [str(tmp_path / "none"), str(lower)]]],
                          "skip": ["kern/kernel.py"]})
    want = [["/app/bench/timing.py", False]] + ([["/app/bench/__init__.py", True]] if whiteout else [])
    assert sorted(got["image"]) == sorted(want) and got["found"] == []


# ---------------------------------------------------------------- measure_ceilings.py

def test_the_cpu_measurement_prints_the_facts_ceilings_reads():
    facts = json.loads(run_script(MEASURE_CEILINGS, "cpu", "small", flags=()).stdout.strip().splitlines()[-1])
    assert facts["device"] == "cpu" and facts["name"] and facts["cores"] == (os.cpu_count() or 1)
    assert facts["bandwidth_gbs"] >= facts["bandwidth_one_thread_gbs"] > 0
    assert facts["bandwidth_threads"] in (1, facts["cores"])
    pytest.importorskip("numpy")
    assert facts["how"] == "with numpy" and facts["tflops"]["fp32"] > 0 and facts["tflops"]["fp64"] > 0


def test_the_cpu_measurement_without_numpy_is_a_plain_copy():
    # -S: no site-packages, so no numpy, as on a README install's bare python
    facts = json.loads(run_script(MEASURE_CEILINGS, "cpu", "small", flags=("-S",)).stdout.strip().splitlines()[-1])
    assert facts["how"] == "with a plain buffer copy: no numpy, no FLOP/s" and "tflops" not in facts
    assert facts["bandwidth_gbs"] == facts["bandwidth_one_thread_gbs"] > 0 and facts["bandwidth_threads"] == 1


# ---------------------------------------------------------------- the folder

def test_every_program_is_named_once_and_imports_the_standard_library_only():
    here = Path(programs.__file__).resolve().parent
    named = {p for p in vars(programs).values() if isinstance(p, Path) and p.suffix == ".py"}
    assert named == {p for p in here.glob("*.py") if p.name != "__init__.py"}
    optional = {"torch", "numpy"}  # imported where they are used, their absence handled
    for script in named:
        for node in ast.walk(ast.parse(script.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in optional, f"{script.name} imports {name}"
        assert ast.get_docstring(ast.parse(script.read_text())), script.name
