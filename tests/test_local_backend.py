"""The local backend on a tiny package: modes, graders, refusals, timeouts and isolation.

The toy grader echoes the candidate module's PROBE attribute into reward.json, so these
tests can see what a candidate saw from inside the sandbox.
"""

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.verdict import Status
from tests.conftest import FIXTURES, needs_root

pytestmark = needs_root
KERNEL = "toy/kernel.py"
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"


def probe(code: str) -> CandidateSource:
    """A correct, fast candidate that also runs `code` at import and exposes PROBE."""
    return CandidateSource(files={KERNEL: FAST + "\n" + code + "\n"})


@pytest.mark.parametrize("grader", ["hidden", "dev"])
def test_noop_oracle_negative(evaluator, grader):
    noop = evaluator.evaluate("kfc/toy-sum", mode="noop", grader=grader)
    assert noop.status in (Status.ok, Status.hard_fail) and noop.reward == 0.0
    assert 0.5 < noop.speedup < 2.0
    oracle = evaluator.evaluate("kfc/toy-sum", mode="oracle", grader=grader)
    assert oracle.status == Status.ok and oracle.hard_fail_reasons == [] and oracle.reward > 0
    assert oracle.speedup > 10 and oracle.tests.passed == oracle.tests.total == 5
    negative = evaluator.evaluate("kfc/toy-sum", mode="negative", grader=grader)
    assert negative.status == Status.hard_fail and negative.reward == 0.0
    assert negative.hard_fail_reasons == ["correctness_failed"]
    # the verdict says which package it graded
    assert oracle.package.path == str(FIXTURES / "kfc" / "toy-sum" / "task")
    assert len(oracle.package.content_hash) == 64
    # Dockerfile replay: ARG default reached ENV, the heredoc step ran
    assert oracle.raw["greeting"] == "hello" and oracle.raw["heredoc"] == "hello"


def test_patch_candidate_from_file(evaluator, tmp_path):
    patch = tmp_path / "c.diff"
    patch.write_text((FIXTURES / "kfc/toy-sum/task/solution/oracle.patch").read_text())
    v = evaluator.evaluate("kfc/toy-sum", candidate=patch, grader="hidden")
    assert v.status == Status.ok and v.speedup > 10
    assert "n * (n + 1)" in (Path(v.log_dir) / "candidate.diff").read_text()


def test_scope_violation_is_refused_before_running(evaluator, tmp_path):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "kernel.py").write_text(FAST)
    (tmp_path / "toy" / "other.py").write_text("VALUE = 2\n")
    v = evaluator.evaluate("kfc/toy-sum", candidate=tmp_path, grader="hidden")
    assert v.status == Status.scope_violation and v.hard_fail_reasons == ["out_of_scope:toy/other.py"]
    assert not (Path(v.log_dir) / "grader_output.log").exists()  # nothing ran


def test_non_applying_patch_is_the_candidates_failure(evaluator):
    bad = "--- a/toy/kernel.py\n+++ b/toy/kernel.py\n@@ -1,2 +1,2 @@\n-not in the file\n+x\n"
    v = evaluator.evaluate("kfc/toy-sum", candidate=CandidateSource(diff=bad))
    assert v.status == Status.hard_fail and v.hard_fail_reasons == ["patch_does_not_apply"]


def test_tests_are_visible_only_to_the_hidden_grader_and_packages_never(evaluator):
    code = (
        "import os\n"
        f"PROBE = [os.path.exists('/tests/test.sh'), os.path.exists({str(FIXTURES / 'kfc/toy-sum/task/tests/test.sh')!r}),"
        " os.path.exists('/opt/verifier-baseline/kernel.py')]\n"
    )
    hidden = evaluator.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    dev = evaluator.evaluate("kfc/toy-sum", candidate=probe(code), grader="dev")
    assert hidden.raw["probe"] == [True, False, True]
    assert dev.raw["probe"] == [False, False, True]


def test_tests_mount_is_read_only(evaluator):
    code = (
        "try:\n    open('/tests/ref_speedup.txt', 'w').write('1000')\n    PROBE = 'wrote'\n"
        "except OSError as e:\n    PROBE = type(e).__name__\n"
    )
    v = evaluator.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    assert v.raw["probe"] == "OSError" and v.ref_speedup == 2.0
    assert (FIXTURES / "kfc/toy-sum/task/tests/ref_speedup.txt").read_text().strip() == "2.0"


def test_network_is_off_while_grading(evaluator):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    code = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    PROBE = 'connected'\n"
        "except OSError as e:\n    PROBE = 'refused'\n"
    )
    try:
        v = evaluator.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    finally:
        server.close()
    assert v.raw["probe"] == "refused" and not accepted


def test_what_one_candidate_leaves_cannot_reach_the_next_or_the_host(evaluator):
    marker = "/root/pesflow-leak-marker"  # HOME is writable (caches), the rest of the root is not
    code = (f"import os\nopen({marker!r}, 'w').write('x')\nopen('/app/repo/stray.txt', 'w').write('x')\n"
            "try:\n    open('/opt/pesflow-leak-marker', 'w')\n    PROBE = 'wrote /opt'\n"
            "except OSError as e:\n    PROBE = ['wrote', e.strerror]\n")
    first = evaluator.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    assert first.raw["probe"] == ["wrote", "Read-only file system"]
    check = f"import os\nPROBE = [os.path.exists({marker!r}), os.path.exists('/app/repo/stray.txt')]\n"
    second = evaluator.evaluate("kfc/toy-sum", candidate=probe(check), grader="hidden")
    assert second.raw["probe"] == [False, False]
    assert not os.path.exists(marker) and not os.path.exists("/opt/pesflow-leak-marker")


def test_timeout_kills_the_whole_tree(cache_dir, tmp_path):
    cfg = EvaluatorConfig(timeout_sec=4, local=LocalConfig(cache_dir=str(cache_dir)))
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path)
    tag = f"pesflow-sleeper-{os.getpid()}"
    code = (
        "import subprocess, time\n"
        f"subprocess.Popen(['bash', '-c', 'exec -a {tag} sleep 300'], start_new_session=True)\n"
        "while True:\n    time.sleep(0.1)\n"
    )
    start = time.monotonic()
    v = ev.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    assert v.status == Status.timeout and time.monotonic() - start < 20
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert tag not in ps, "a process started by the candidate outlived its grading"


def test_grader_that_writes_no_verdict_is_a_grader_error(evaluator, toy_package, tmp_path):
    (toy_package / "tests" / "test.sh").write_text("#!/bin/bash\necho 'I crashed' >&2\nexit 4\n")
    ev = Evaluator(evaluator.config, tasks_roots=[toy_package.parent.parent.parent], log_root=tmp_path)
    v = ev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert v.status == Status.grader_error and "I crashed" in v.message


def test_broken_dockerfile_step_is_an_infra_error_naming_the_line(evaluator, toy_package, tmp_path):
    df = toy_package / "environment" / "Dockerfile"
    df.write_text(df.read_text().replace("WORKDIR /app/repo", "RUN false\nWORKDIR /app/repo"))
    ev = Evaluator(evaluator.config, tasks_roots=[toy_package.parent.parent.parent], log_root=tmp_path)
    v = ev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert v.status == Status.infra_error and "Dockerfile:" in v.message and "RUN exited 1" in v.message


def test_prepared_layer_is_reused(evaluator):
    task = evaluator.task("kfc/toy-sum")
    from evaluator.backends.local import LocalBackend

    fresh = LocalBackend(evaluator.config.local)  # a new backend object, same cache on disk
    assert fresh.prepare(task).cached


def test_gpu_task_needs_a_gpu_or_an_explicit_cpu_check(evaluator, toy_package, tmp_path):
    from evaluator.hardware import gpu_available
    from evaluator.task import TaskError

    if gpu_available():
        pytest.skip("this machine has a GPU")
    toml = toy_package / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 0", "gpus = 1"))
    ev = Evaluator(evaluator.config, tasks_roots=[toy_package.parent.parent.parent], log_root=tmp_path)
    with pytest.raises(TaskError, match="needs a GPU.*--device cpu") as e:
        ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")
    assert "\n" not in str(e.value)
    code = "import os\nPROBE = [os.environ.get('KERNELBENCH_DEVICE'), os.environ.get('TRITON_INTERPRET')]\n"
    v = ev.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden", device="cpu")
    assert v.status == Status.ok and v.hardware == "cpu" and v.reward == 0.0
    assert v.raw["probe"] == ["cpu", "1"]


def test_a_candidate_has_one_name_whether_it_names_its_unchanged_files_or_not(evaluator):
    # the journal names a candidate by its whole scope, the evaluator is given its changed files: one hash (issue 41)
    from evaluator.candidate import candidate_hash
    base = (FIXTURES / "kfc/toy-sum/task/environment/repo" / KERNEL).read_text()
    changed = evaluator.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: FAST}), grader="dev")
    assert changed.candidate_hash == candidate_hash({KERNEL: FAST}, {KERNEL: base}) == candidate_hash({KERNEL: FAST})
    same = evaluator.evaluate("kfc/toy-sum", candidate=CandidateSource(files={KERNEL: base}), grader="dev")
    assert same.candidate_hash == candidate_hash({KERNEL: base}, {KERNEL: base}) == candidate_hash({})
