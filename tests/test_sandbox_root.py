"""The local sandbox's / holds what the task's image would and nothing else of the host.

Each test looks from inside a real grading (the toy grader echoes the candidate's PROBE into
reward.json): planted host files are absent, another copy of a package (its solution/ with it)
does not break that package's own anti-leak build assert, a venv under /tmp stands in for the
image's python, the host's processes and loopback listeners are out of reach, the root is
read-only but for the writable paths, and a missing module of the stand-in is pesflow's fault.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from evaluator.backends.local_root import Layout
from evaluator.backends.standin import StandIn, discover, missing_modules, outermost
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.verdict import Status
from tests.conftest import FIXTURES, needs_root

NONCE = uuid.uuid4().hex[:8]
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"


def probe(code: str) -> CandidateSource:
    return CandidateSource(files={"toy/kernel.py": FAST + "\n" + code + "\n"})


# ---------------------------------------------------------------- pure parts (no root needed)
def test_layout_keeps_system_folders_and_the_stand_in_and_nothing_else():
    stand_in = StandIn(python="/tmp/v/bin/python3", version="3.11.7", site_packages=(),
                       paths=("/usr/lib/python3.11", "/tmp/v", "/tmp/v/lib/python3.11/site-packages", "/opt/conda"))
    lay = Layout.make(stand_in, writable=["/app/repo", "/logs", "/root", "/app/repo/sub"])
    assert "/usr" in lay.areas and "/etc" in lay.areas
    assert "/tmp/v" in lay.areas and "/opt/conda" in lay.areas  # a venv or prefix anywhere stands in
    assert "/usr/lib/python3.11" not in lay.areas  # inside /usr already
    assert not any(a in lay.areas for a in ("/root", "/home", "/srv", "/work", "/var", "/opt", "/mnt"))
    assert lay.writable == ["/logs", "/root", "/app/repo"]  # outermost only
    assert lay.area_of("/tmp/v/bin/python3") == "/tmp/v" and lay.area_of("/app/repo") is None
    assert outermost(["/a/b", "/a", "/ab"]) == ["/a", "/ab"]


def test_stand_in_leaves_out_folders_that_hold_private_ones(tmp_path):
    found = discover(sys.executable, refuse=(str(Path(__file__).resolve().parent.parent),))
    assert found.python == sys.executable and found.version.startswith("3.")
    repo = str(Path(__file__).resolve().parent.parent)
    assert not any(repo.startswith(p.rstrip("/") + "/") or p == repo for p in found.paths)  # pesflow's tree never bound


def test_missing_modules_are_read_from_tracebacks():
    text = "Traceback...\nModuleNotFoundError: No module named 'torch'\nImportError: No module named numpy.linalg\n"
    assert missing_modules(text) == ["torch", "numpy"]




@pytest.fixture(scope="module")
def planted():
    """Files of the host a candidate must not see, one in each place the issue names."""
    places = [Path(p) for p in ("/root", "/srv", "/opt", "/work", "/var", "/var/lib", "/home")]
    made = []
    for d in places:
        created = not d.exists()
        d.mkdir(parents=True, exist_ok=True)
        f = d / f"pesflow-planted-{NONCE}"
        f.write_text("secret\n")
        made.append((f, d if created else None))
    yield [str(f) for f, _ in made]
    for f, d in made:
        f.unlink(missing_ok=True)
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)


@needs_root
def test_host_files_processes_and_listeners_are_out_of_reach(evaluator, planted):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = (
        "import os, socket\n"
        f"planted = {planted!r}\n"
        "cmdlines = []\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit():\n"
        "        try:\n            cmdlines.append(open(f'/proc/{p}/cmdline', 'rb').read())\n"
        "        except OSError:\n            pass\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    net = 'connected'\n"
        "except OSError:\n    net = 'refused'\n"
        "PROBE = {'planted': [p for p in planted if os.path.exists(p)], 'pytest': any(b'pytest\\x00' in c or c.endswith(b'pytest') for c in cmdlines),\n"
        "         'procs': len(cmdlines), 'net': net, 'hostname': open('/etc/hostname').read().strip(),\n"
        "         'shadow': os.path.exists('/etc/shadow'), 'git': os.path.exists('/usr/bin/git'),\n"
        "         'python': os.path.realpath(os.__file__)}\n"
    )
    try:
        v = evaluator.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    finally:
        server.close()
    p = v.raw["probe"]
    assert p["planted"] == [], p  # nothing of /root, /srv, /opt, /work, /var, /home
    assert p["pytest"] is False and p["procs"] < 20  # the host's processes are not there
    assert p["net"] == "refused"
    assert p["hostname"] == "pesflow" and p["shadow"] is False  # a container's identity, not the host's
    # the stand-in's standard library: under its prefix, or its base prefix when it is a venv (the README's set-up line)
    assert p["git"] is True and p["python"].startswith((os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)))  # the system and the stand-in are


@needs_root
def test_the_root_is_read_only_but_for_the_writable_paths(evaluator):
    targets = ["/opt/kernelbench-venv/bin/python3", "/usr/bin/pesflow-x", "/opt/loop/x", "/etc/x", "/app/x",
               "/app/repo/x", "/logs/x", "/root/.cache/x", "/tmp/x", "/var/tmp/x", "/dev/shm/x", "/app/.timer/x"]
    code = (
        "import os\nPROBE = {}\n"
        f"for t in {targets!r}:\n"
        "    try:\n"
        "        os.makedirs(os.path.dirname(t), exist_ok=True)\n"
        "        with open(t, 'a') as f:\n            f.write('x')\n"
        "        PROBE[t] = 'written'\n"
        "    except OSError as e:\n        PROBE[t] = e.strerror\n"
    )
    v = evaluator.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    got = v.raw["probe"]
    for t in targets[:5]:
        assert got[t] == "Read-only file system", (t, got[t])
    for t in targets[5:]:
        assert got[t] == "written", (t, got[t])
    assert v.status == Status.ok  # the grader itself needed nothing else


@needs_root
def test_another_copy_of_the_package_does_not_break_its_anti_leak_build_assert(cache_dir, tmp_path):
    # the package's own assert, as the benchmark's Dockerfiles write it: no reference file anywhere
    pkg = tmp_path / "tasks/kfc/toy-sum/task"
    shutil.copytree(FIXTURES / "kfc/toy-sum/task", pkg)
    df = pkg / "environment/Dockerfile"
    df.write_text(df.read_text() + "RUN hits=\"$(find / -xdev -type f -name 'oracle*.patch' 2>/dev/null | head -5)\"; "
                  "if [ -n \"$hits\" ]; then echo \"BUILD_ASSERT_FAIL: $hits\"; exit 1; fi\n")
    copy = Path(f"/srv/pesflow-copy-{NONCE}")
    shutil.copytree(FIXTURES / "kfc/toy-sum", copy / "kfc/toy-sum")  # solution/oracle.patch included
    try:
        ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[tmp_path / "tasks"],
                       log_root=tmp_path / "logs")
        v = ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert v.status == Status.ok and v.reward > 0, v.message


@pytest.fixture(scope="module")
def tmp_venv():
    """A venv under /tmp, without the system's site-packages, with numpy copied into it."""
    import numpy

    venv = Path(f"/tmp/pesflow-venv-{NONCE}")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    src = Path(numpy.__file__).parent
    shutil.copytree(src, site / "numpy", symlinks=True)
    for extra in src.parent.glob("numpy.libs"):
        shutil.copytree(extra, site / extra.name, symlinks=True)
    (site / "pesflow_standin_only.py").write_text("WHERE = __file__\n")  # installed nowhere else
    yield venv
    shutil.rmtree(venv, ignore_errors=True)


@needs_root
def test_a_venv_under_tmp_stands_in(cache_dir, tmp_path, tmp_venv):
    cfg = EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir), python=str(tmp_venv / "bin/python3")))
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path)
    v = ev.evaluate("kfc/toy-sum", candidate=probe("import numpy, sys\nPROBE = [numpy.__file__, sys.prefix]"), grader="hidden")
    assert v.status == Status.ok, v.message
    numpy_file, prefix = v.raw["probe"]
    # the image's venv runs (test.sh puts it first on PATH), seeing the stand-in venv's packages
    assert numpy_file.startswith(str(tmp_venv)) and prefix == "/opt/kernelbench-venv"


@needs_root
def test_a_module_the_stand_in_lacks_is_an_infra_error_not_the_candidates(cache_dir, tmp_path, tmp_venv):
    bare = Path(f"/tmp/pesflow-bare-{NONCE}")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    pkg = tmp_path / "tasks/kfc/toy-sum/task"
    shutil.copytree(FIXTURES / "kfc/toy-sum/task", pkg)
    grade = pkg / "tests/grade.py"
    grade.write_text("import pesflow_standin_only  # the package's grader needs it\n" + grade.read_text())
    try:
        for python, want in ((bare, Status.infra_error), (tmp_venv, Status.ok)):
            cfg = EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir), python=str(python / "bin/python3")))
            ev = Evaluator(cfg, tasks_roots=[tmp_path / "tasks"], log_root=tmp_path / "logs")
            v = ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")
            assert v.status == want, v.message
            if want == Status.infra_error:
                assert "no module 'pesflow_standin_only'" in v.message and str(bare) in v.message and "\n" not in v.message
        # a module only the candidate asks for stays the candidate's failure
        ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[FIXTURES],
                       log_root=tmp_path / "logs2")
        v = ev.evaluate("kfc/toy-sum", candidate=probe("import pesflow_no_such_module"), grader="hidden")
        assert v.status == Status.hard_fail and v.hard_fail_reasons == ["import_failed"]
    finally:
        shutil.rmtree(bare, ignore_errors=True)
