"""What the grading wrote, read after the grader (evaluator/trust/written.py): the init's scan,
run here on a layer laid out as a grading leaves it, and the engines' lists of changes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from evaluator.trust import written


def _layer(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An upper layer over /app (what the grading wrote) and the image's layer under it."""
    upper, lower, tmp = tmp_path / "upper", tmp_path / "lower", tmp_path / "tmp"
    for rel in ("repo/bench/timing.py", "repo/bench/__init__.py", "submission/ckpt_transfer.py", "repo/kern/kernel.py"):
        (lower / rel).parent.mkdir(parents=True, exist_ok=True)
        (lower / rel).write_text("x = 1\n")
    files = {
        "repo/sitecustomize.py": "import time\n",           # a startup file, on PYTHONPATH
        "repo/ckpt/model.pth": "weights",                    # a checkpoint's name, not a site folder
        "venv/lib/site-packages/z.pth": "import os\n",      # a .pth where site reads it
        "repo/bench/timing.py": "x = 1\n",                  # the image's module, rewritten with the same text
        "repo/gen/jit_kernel.py": "def f(): pass\n",        # a JIT's new module: not the image's
        "submission/ckpt_transfer.py": "y = 2\n",           # the candidate's scope file, its oracle applied here
        "repo/kern/kernel.py": "y = 3\n",                   # the same scope, where the source tree is
    }
    for rel, text in files.items():
        (upper / rel).parent.mkdir(parents=True, exist_ok=True)
        (upper / rel).write_text(text)
    if os.geteuid() == 0:  # a whiteout (a 0/0 character device): the image's module removed
        os.mknod(upper / "repo/bench/__init__.py", 0o600 | stat.S_IFCHR, os.makedev(0, 0))
    (tmp / "notes.py").parent.mkdir(parents=True, exist_ok=True)
    (tmp / "notes.py").write_text("")
    return upper, lower, tmp


def test_the_init_scan_names_startup_files_and_the_images_changed_modules_only(tmp_path):
    upper, lower, tmp = _layer(tmp_path)
    out = tmp_path / "scan.json"
    skip = written.candidate_paths(["submission/ckpt_transfer.py", "kern/kernel.py"], [])
    line = written.scan_command(sys.executable, [(upper, "/app"), (tmp, "/tmp")], [(upper, "/app", [lower])], sorted(skip), out)
    subprocess.run(["bash", "-c", line], check=True, timeout=60)
    events = written.read_scan(out)
    got = {(e["family"], e["evidence"].split(",")[0]) for e in events}
    want = {("guard_evasion", "/app/repo/sitecustomize.py"), ("guard_evasion", "/app/venv/lib/site-packages/z.pth"),
            ("harness_patched", "/app/repo/bench/timing.py")}
    if os.geteuid() == 0:  # a whiteout: the image's module removed
        want.add(("harness_patched", "/app/repo/bench/__init__.py"))
        assert any("was removed during" in e["evidence"] for e in events), events
    assert got == want, events
    assert all(e["via"] == "host" and e["kind"] == "finding" for e in events)
    assert written.read_scan(tmp_path / "never-written.json") is None


def test_an_engines_changes_read_by_the_same_rules():
    changes = {("/app/repo/sitecustomize.py", 1), ("/app/repo/bench/timing.py", 0), ("/app/repo/bench/old.py", 2),
               ("/app/repo/gen/new.py", 1), ("/app/submission/ckpt_transfer.py", 0), ("/opt/venv/lib/x.py", 0),
               ("/app/repo/ckpt/model.pth", 1), ("/usr/lib/python3/dist-packages/a.pth", 0)}
    assert sorted(written.startup_changes(changes)) == [("/app/repo/sitecustomize.py", False),
                                                        ("/usr/lib/python3/dist-packages/a.pth", False)]
    # with the text a backend read of each startup file, sent for graders_own
    sent = written.from_changes(changes, ["/app/repo"], set(), {"/app/repo/sitecustomize.py": "import time\n"})
    assert {e["evidence"].split(",")[0]: e.get("text") for e in sent if e["family"] == "guard_evasion"} == {
        "/app/repo/sitecustomize.py": "import time\n", "/usr/lib/python3/dist-packages/a.pth": None}, sent
    assert written.text_of(b"x" * written.MAX_TEXT) and written.text_of(b"x" * (written.MAX_TEXT + 1)) is None
    assert written.text_of(b"\xff\xfe") is None and written.text_of("a\ufffd") is None and written.text_of("ok") == "ok"
    skip = written.candidate_paths(["submission/ckpt_transfer.py"], [])
    assert written.image_changes(changes, ["/app/repo", "/app/submission"], skip) == [
        ("/app/repo/bench/old.py", True), ("/app/repo/bench/timing.py", False)]


# Git's own files: a repository the image holds (its .git in the lower layer) against one the
# grading made anew; git's daily writes (index, refs, logs, objects) are no finding.
VCS_LOWER = ("repo/.git/config", "repo/.git/HEAD", "repo/src/a.py")
VCS_WRITES = {
    "repo/.git/config": True,  # a smudge filter, an alias, a hooks path
    "repo/.git/info/attributes": True,  # new, in the image's repository
    "repo/.git/hooks/post-checkout": True,
    "repo/src/.gitattributes": True,  # a folder the image held
    ".gitattributes": True,  # the writable path's own folder
    "repo/.git/index": False, "repo/.git/ORIG_HEAD": False, "repo/.git/logs/HEAD": False,
    "repo/.git/objects/ab/cdef": False,
    "snap/.git/config": False, "snap/.git/hooks/pre-commit.sample": False, "snap/.gitattributes": False,  # made anew
}


def test_git_s_own_files_changed_in_the_image_s_repository_are_found_by_the_scan_and_the_engines(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    for rel in VCS_LOWER:
        (lower / rel).parent.mkdir(parents=True, exist_ok=True)
        (lower / rel).write_text("x\n")
    for rel in VCS_WRITES:
        (upper / rel).parent.mkdir(parents=True, exist_ok=True)
        (upper / rel).write_text("[filter \"x\"]\n\tsmudge = sh -c 'cat; cat'\n")
    want = {f"/app/{rel}" for rel, found in VCS_WRITES.items() if found}
    out = tmp_path / "scan.json"
    line = written.scan_command(sys.executable, [], [(upper, "/app", [lower])], [], out)
    subprocess.run(["bash", "-c", line], check=True, timeout=60)
    events = written.read_scan(out)
    assert {e["evidence"].split(",")[0] for e in events} == want, events
    assert {e["rule"] for e in events} == {"written.vcs_control"} and {e["family"] for e in events} == {"harness_patched"}
    # an engine's list: 1 added, 0 modified; the repository made anew is named as added itself
    changes = {(f"/app/{rel}", 0 if rel in VCS_LOWER else 1) for rel in VCS_WRITES} | {
        ("/app/snap", 1), ("/app/snap/.git", 1), ("/app/repo/.git/info", 1)}
    assert {p for p, _ in written.vcs_changes(changes, ["/app"])} == want
    assert {e["evidence"].split(",")[0] for e in written.from_changes(changes, ["/app"], set())} == want
    assert written.vcs_changes(changes, ["/elsewhere"]) == []


def test_modal_listings_before_and_after():
    before = "/usr/lib/python3/dist-packages/pesflow_guard.pth\t100.0\n/app/repo/usercustomize.py\t100.0\n"
    after = ("/usr/lib/python3/dist-packages/pesflow_guard.pth\t100.0\n/app/repo/sitecustomize.py\t200.0\n"
             "/app/repo/ckpt/model.pth\t200.0\n")
    assert written.listing_changes(before, after) == [("/app/repo/sitecustomize.py", False), ("/app/repo/usercustomize.py", True)]


GRADER_SH = """#!/usr/bin/env bash
SITE="$(mktemp -d)"
cat > "$SITE/sitecustomize.py" <<'PYEOF'
import sys, importlib.abc
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        return None
sys.meta_path.insert(0, _Block())
PYEOF
export PYTHONPATH="$SITE:/app/repo"
"""


def test_a_file_the_graders_own_script_spells_out_is_the_graders_not_a_finding(tmp_path):
    from evaluator.trust import runtime  # noqa: PLC0415 - beside its one use
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "test.sh").write_text(GRADER_SH)
    (task / "environment" / "repo").mkdir(parents=True)
    (task / "environment" / "repo" / "notes.sh").write_text("import time\ntime.perf_counter = lambda: 0.0\n")  # the source tree: not the grader's
    graders = written.grader_text(task)
    own = GRADER_SH.split("<<'PYEOF'\n", 1)[1].split("PYEOF", 1)[0]
    # the init's scan reads a startup file's text, as the grader's heredoc left it
    tmp = tmp_path / "tmp"
    (tmp / "tmp.x1").mkdir(parents=True)
    (tmp / "tmp.x1" / "sitecustomize.py").write_text(own)
    (tmp / "tmp.x2").mkdir()
    (tmp / "tmp.x2" / "sitecustomize.py").write_text(own + "import time\ntime.perf_counter = lambda: 0.0\n")
    out = tmp_path / "scan.json"
    subprocess.run(["bash", "-c", written.scan_command(sys.executable, [(tmp, "/tmp")], [], [], out)], check=True, timeout=60)
    events = written.read_scan(out)
    assert len(events) == 2 and all(e.get("text") for e in events), events
    found, checks = runtime.read(events, set(), set(), graders)
    assert [f.evidence.split(",")[0] for f in found] == ["/tmp/tmp.x2/sitecustomize.py"], found  # more than the grader's
    assert checks["graders_own_files"] and "/tmp/tmp.x1/sitecustomize.py" in checks["graders_own_files"][0]
    assert len(runtime.read(events, set(), set(), "")[0]) == 2  # without the grader's text, both are findings
    # a text only the source tree holds, and one too short to say anything, are not the grader's
    assert not written.graders_own("import time\ntime.perf_counter = lambda: 0.0\n", graders)
    assert not written.graders_own("import sys\n", graders) and not written.graders_own(None, graders)
