"""The docker backend: real gradings through a Docker API engine (podman's in CI,
tools/podman_setup.sh): the same verdicts as the local backend, isolation between candidates in
one warm container, limits, retries.

Engine tests skip when no engine answers, unless PESFLOW_REQUIRE_DOCKER=1 (CI sets it), which
turns that into a failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from evaluator.verdict import code_reasons
from evaluator.backends.base import InfraError
from evaluator.backends.docker.engine import unenforced_limits
from evaluator.config import DockerConfig, EvaluatorConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.task import load_task
from evaluator.verdict import Status
from tests.conftest import FIXTURES, needs_root

KERNEL = "toy/kernel.py"
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
LH = "lh/wro-vllm-v1-priority-request-queue"


def probe(code: str) -> CandidateSource:
    return CandidateSource(files={KERNEL: FAST + "\n" + code + "\n"})


# ------------------------------------------------------------------ no engine needed
# (the build context and the Dockerfile rewrite: tests/test_docker_context.py)
def test_no_engine_is_an_infra_error_naming_the_fix(tmp_path):
    cfg = EvaluatorConfig(backend="docker", docker=DockerConfig(base_url=f"unix://{tmp_path}/no.sock", cache_dir=str(tmp_path)))
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path / "logs")
    v = ev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert v.status == Status.infra_error and v.backend == "docker"
    assert "no container engine answers" in v.message and "podman_setup.sh" in v.message and "tried 2 times" in v.message


# ------------------------------------------------------------------ a real engine
def _engine_url() -> str | None:
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    for sock in ("/var/run/docker.sock", "/run/podman/podman.sock"):
        if os.path.exists(sock):
            return f"unix://{sock}"
    return None


@pytest.fixture(scope="module")
def engine_url() -> str:
    from evaluator.backends.docker import DockerBackend

    url = _engine_url()
    try:
        if url is None:
            raise InfraError("no DOCKER_HOST and no engine socket; run tools/podman_setup.sh")
        DockerBackend(DockerConfig(base_url=url)).api()
    except InfraError as e:
        if os.environ.get("PESFLOW_REQUIRE_DOCKER"):
            pytest.fail(f"PESFLOW_REQUIRE_DOCKER is set and {e}")
        pytest.skip(str(e))
    return url


def docker_config(url: str, cache: Path, **docker: object) -> EvaluatorConfig:
    return EvaluatorConfig(backend="docker", docker=DockerConfig(base_url=url, cache_dir=str(cache), **docker))


@pytest.fixture(scope="module")
def dev(engine_url, tmp_path_factory):
    """The docker evaluator shared by this module's tests (one warm container, one build)."""
    ev = Evaluator(docker_config(engine_url, tmp_path_factory.mktemp("docker-cache")), tasks_roots=[FIXTURES],
                   log_root=tmp_path_factory.mktemp("docker-evaluations"))
    yield ev
    ev.close()


def _gist(v) -> tuple[str, list[str]]:  # noqa: ANN001
    """What must agree across backends: the status and the named reasons, timing noise aside."""
    reasons = sorted(code_reasons(v.hard_fail_reasons))
    status = "ok" if v.status == Status.hard_fail and not reasons else v.status.value
    return status, reasons


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("task", ["kfc/toy-sum", LH])
def test_same_verdicts_as_the_local_backend(dev, evaluator, task, tmp_path):
    # noop, oracle and negative through the hidden grader, then a scope violation
    for mode in ("noop", "oracle", "negative"):
        d = dev.evaluate(task, mode=mode, grader="hidden")
        loc = evaluator.evaluate(task, mode=mode, grader="hidden")
        assert d.backend == "docker" and loc.backend == "local"
        assert _gist(d) == _gist(loc), (mode, d.message, loc.message)
        assert d.tests.total == loc.tests.total and d.tests.passed == loc.tests.passed
        assert d.grader_seconds is not None and d.grader_seconds < d.seconds
    assert d.status == Status.hard_fail and "correctness_failed" in d.hard_fail_reasons  # the negative
    oracle = dev.evaluate(task, mode="oracle", grader="hidden")
    assert oracle.correct and oracle.speedup > 5
    scope = dev.task(task).scope[0]
    (tmp_path / "README.md").write_text("not in scope\n")
    (tmp_path / Path(scope)).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / scope).write_text(dev.backend.baseline_text(dev.prepare(dev.task(task)), scope))
    d = dev.evaluate(task, candidate=tmp_path, grader="hidden")
    loc = evaluator.evaluate(task, candidate=tmp_path, grader="hidden")
    assert d.status == loc.status == Status.scope_violation
    assert d.hard_fail_reasons == loc.hard_fail_reasons == ["out_of_scope:README.md"]


@pytest.mark.slow
def test_dev_engine_and_heredoc_build(dev):
    v = dev.evaluate("kfc/toy-sum", mode="oracle", grader="dev")
    assert v.correct and v.speedup > 10
    # the image was built by the engine from the rewritten Dockerfile: ARG reached ENV, the heredoc ran
    assert v.raw["greeting"] == "hello" and v.raw["heredoc"] == "hello"


DIRTY = r'''
import os, subprocess
refused = []
def attempt(fn, *a):
    try:
        fn(*a)
    except OSError as e:
        refused.append(e.strerror)
for p in ("/tmp/leak", "/opt/leak", "/app/repo/stray.txt", "/dev/shm/leak", "/dev/leak", "/var/tmp/leak", "/root/.leak"):
    attempt(lambda p: open(p, "w").write("x"), p)
# a cheat that would make every later candidate look fast: a slow frozen baseline (the read-only root refuses it)
attempt(lambda: open("/opt/verifier-baseline/kernel.py", "w").write("def sum_squares(n):\n    import time; time.sleep(0.05)\n    return sum(i*i for i in range(n))\n"))
os.remove("/app/repo/toy/other.py")
attempt(os.chmod, "/opt/loop", 0)
attempt(lambda: open("/etc/hosts", "a").write("1.2.3.4 evil\n"))
subprocess.run("cd /app/repo && git add -A && git commit -qm cheat", shell=True)
subprocess.Popen(["sh", "-c", "sleep 1; echo late > /tmp/late; while :; do sleep 1; done"], start_new_session=True)
PROBE = ["dirty", sorted(set(refused)), len(refused)]
'''
CHECK = r'''
import os, subprocess
PROBE = [os.path.exists(p) for p in ("/tmp/leak", "/opt/leak", "/app/repo/stray.txt", "/dev/shm/leak", "/dev/leak",
                                     "/var/tmp/leak", "/root/.leak", "/tmp/late")]
PROBE += [open("/opt/verifier-baseline/kernel.py").read().count("sleep"), os.path.exists("/app/repo/toy/other.py"),
          oct(os.stat("/opt/loop").st_mode & 0o777), "evil" in open("/etc/hosts").read(),
          subprocess.run("git -C /app/repo rev-list --count HEAD", shell=True, capture_output=True, text=True).stdout.strip(),
          sorted(set(open(f"/proc/{p}/comm").read().strip() for p in os.listdir("/proc") if p.isdigit()))]
'''


def trojan(folder: str) -> str:
    """A candidate planting do-nothing `rm`, `chmod` and `kill` in `folder`, and a file to clean up."""
    return (
        "import os\ntry:\n"
        f"    for tool in ('rm', 'chmod', 'kill'):\n"
        f"        with open('{folder}/' + tool, 'w') as f:\n"
        "            f.write('#!/bin/sh\\nexit 0\\n')\n"
        f"        os.chmod('{folder}/' + tool, 0o755)\n"
        "    open('/opt/trojan-leak', 'w').write('x')\n    PROBE = 'planted'\n"
        "except OSError as e:\n    PROBE = 'refused: ' + e.strerror\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["/opt/kernelbench-venv/bin", "/usr/local/bin"])
def test_a_candidate_cannot_plant_programs_for_the_reset(dev, folder):
    """`rm`, `chmod`, `kill` planted where the image's PATH or the system looks first: the root is
    read-only, so nothing is planted, and the container is reset and reused as usual."""
    first = dev.evaluate("kfc/toy-sum", candidate=probe(trojan(folder)), grader="hidden")
    assert first.raw["probe"] == "refused: Read-only file system"
    check = f"import os\nPROBE = [os.path.exists(p) for p in ('/opt/trojan-leak', '{folder}/rm')]\n"
    second = dev.evaluate("kfc/toy-sum", candidate=probe(check), grader="hidden")
    assert second.raw["probe"] == [False, False]
    seen = [json.loads((Path(v.log_dir) / "limits.json").read_text()) for v in (first, second)]
    # the same container, graded in again (the trust probes may have graded in it between)
    assert seen[1]["container"] == seen[0]["container"] and seen[1]["container_gradings"] > seen[0]["container_gradings"]


@pytest.mark.slow
def test_what_one_candidate_leaves_cannot_reach_the_next(dev):
    noop_before = dev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    first = dev.evaluate("kfc/toy-sum", candidate=probe(DIRTY), grader="hidden")
    # the root is read-only: /opt (the frozen baseline, the dev engine) refused; /etc/hosts is the engine's file
    assert first.raw["probe"][0] == "dirty" and first.raw["probe"][1] == ["Read-only file system"] and first.raw["probe"][2] >= 3
    assert first.status == Status.hard_fail and first.hard_fail_reasons[0] == "background_process"
    time.sleep(1.5)  # the background process would have written /tmp/late by now, had it lived
    second = dev.evaluate("kfc/toy-sum", candidate=probe(CHECK), grader="hidden")
    leaks, rest = second.raw["probe"][:8], second.raw["probe"][8:]
    assert leaks == [False] * 8
    assert rest[:5] == [0, True, "0o755", False, "1"]  # baseline, repo, modes, /etc/hosts and git history back
    assert set(rest[5]) <= {"sh", "sleep", "bash", "python3", "python"}  # no survivor of the first candidate
    assert second.status == Status.ok  # the same container, and a clean verdict
    noop_after = dev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert 0.5 < noop_after.speedup < 2.0 and abs(noop_after.speedup - noop_before.speedup) < 0.5  # no cheat carried over
    names = {(Path(v.log_dir) / "limits.json").read_text().split('"container": ')[1].split(",")[0] for v in (first, second, noop_after)}
    assert len(names) == 1, "a warm container is reset and reused, not replaced"


@pytest.mark.slow
def test_what_a_shell_wrote_is_in_the_containers_changes_and_suspect(dev):
    """A sitecustomize a shell wrote into the repository (no guard sees a shell's write) is in the
    engine's list of the container's changes: suspect, and reset like anything else. What an
    honest grading writes there (a checkpoint's .pth, a note in /tmp) is not."""
    honest = "mkdir -p ckpt && : > ckpt/model.pth && : > /tmp/notes.txt"
    run = "import subprocess\nsubprocess.run({!r}, shell=True, check=True)\n"
    clean = dev.evaluate("kfc/toy-sum", candidate=probe(run.format(honest)), grader="hidden")
    assert clean.correct and not clean.trust.suspect, clean.trust.reasons
    planted = dev.evaluate("kfc/toy-sum", candidate=probe(run.format(honest + " && echo x=1 > sitecust''omize.py")), grader="hidden")
    assert planted.correct and planted.trust.suspect, planted.trust.reasons
    assert any("sitecustomize.py, a file interpreters run at start, was written" in r for r in planted.trust.reasons), planted.trust.reasons
    # the scratch tmpfs, which the engine's list of changes leaves out: what a shell wrote there is
    # found too; one whose whole text the grader's scripts spell out (a line of tests/grade.py) is the grader's
    own = "echo 'import importlib.util, json, math, os, subprocess, sys, time' > /tmp/sitecustomize.py"
    scratch = dev.evaluate("kfc/toy-sum", candidate=probe(run.format(own + " && mkdir -p /dev/shm/a && echo x=1 > /dev/shm/a/sitecustomize.py")),
                           grader="hidden")
    assert scratch.correct and [r.split(",")[0] for r in scratch.trust.reasons] == ["guard_evasion: /dev/shm/a/sitecustomize.py"], \
        scratch.trust.reasons
    assert "/tmp/sitecustomize.py" in scratch.trust.checks["runtime"]["graders_own_files"][0], scratch.trust.checks
    check = "import os\nPROBE = os.path.exists('/app/repo/sitecustomize.py')\n"
    assert dev.evaluate("kfc/toy-sum", candidate=probe(check), grader="hidden").raw["probe"] is False
    # a module of the repository that is not the candidate's, touched: the guard would take it for the grading's
    touched = dev.evaluate("kfc/toy-sum", candidate=probe(run.format(honest + " && touch toy/other.py")), grader="hidden")
    assert touched.correct and any(r.startswith("harness_patched: /app/repo/toy/other.py") for r in touched.trust.reasons), \
        touched.trust.reasons


def _host_ip() -> str:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


@pytest.mark.slow
def test_tests_only_for_the_hidden_grader_read_only_and_no_network(dev):
    server = socket.socket()
    server.bind(("0.0.0.0", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:  # the socket closed at the test's end with nobody connected: what it asserts
            pass
    threading.Thread(target=accept, daemon=True).start()
    code = (
        "import os, socket\n"
        "try:\n    open('/tests/ref_speedup.txt', 'w').write('1000'); w = 'wrote'\nexcept OSError as e:\n    w = type(e).__name__\n"
        "try:\n"
        f"    socket.create_connection(({_host_ip()!r}, {port}), timeout=2); net = 'connected'\n"
        "except OSError:\n    net = 'refused'\n"
        "PROBE = [os.path.exists('/tests/test.sh'), w, net, sorted(os.listdir('/sys/class/net'))]\n"
    )
    try:
        hidden = dev.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
        devv = dev.evaluate("kfc/toy-sum", candidate=probe(code), grader="dev")
    finally:
        server.close()
    assert hidden.raw["probe"][:3] == [True, "OSError", "refused"] and hidden.ref_speedup == 2.0
    assert devv.raw["probe"][0] is False
    assert hidden.raw["probe"][3] == ["lo"] and not accepted  # network none: loopback only
    assert (FIXTURES / "kfc/toy-sum/task/tests/ref_speedup.txt").read_text().strip() == "2.0"


@pytest.mark.slow
def test_timeout_kills_everything_and_the_container_serves_the_next(engine_url, tmp_path):
    cfg = docker_config(engine_url, tmp_path / "cache")
    cfg.timeout_sec = 4
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path / "logs")
    try:
        code = ("import subprocess, time\nsubprocess.Popen(['sh', '-c', 'sleep 300'], start_new_session=True)\n"
                "while True:\n    time.sleep(0.1)\n")
        start = time.monotonic()
        v = ev.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
        assert v.status == Status.timeout and time.monotonic() - start < 25
        after = ev.evaluate("kfc/toy-sum", candidate=probe("import os\nPROBE = sorted(p for p in os.listdir('/proc') if p.isdigit())"),
                            grader="hidden")
        assert after.status == Status.ok and len(after.raw["probe"]) <= 6  # init, its sleep, the grader's shells and python
    finally:
        ev.close()


@pytest.mark.slow
def test_memory_limit_is_the_candidates_failure(dev):
    code = "blocks = [bytearray(64 << 20) for _ in range(40)]  # 2.5 GiB in a 1 GiB container\nPROBE = len(blocks)\n"
    v = dev.evaluate("kfc/toy-sum", candidate=probe(code), grader="hidden")
    assert v.status == Status.hard_fail and v.hard_fail_reasons[0] == "out_of_memory", v.message
    assert dev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden").correct  # and the container lives on


@pytest.mark.slow
def test_the_containers_of_a_dead_pesflow_are_swept_and_a_reused_pid_keeps_none(engine_url, dev):
    import docker

    from evaluator.limits import process_start

    dev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")  # its image exists
    backend = dev.backend.inner
    api = docker.APIClient(base_url=engine_url)
    gone = subprocess.Popen(["true"])
    gone.wait()
    me, started = str(os.getpid()), process_start(os.getpid())
    owners = {"living": (me, started), "reused pid": (me, "1"), "dead": (str(gone.pid), "")}
    made = {}
    for name, (pid, start) in owners.items():
        labels = {"pesflow.backend": "docker", "pesflow.kind": "sweep-test", "pesflow.session": "sweep-test",
                  "pesflow.host": socket.gethostname()[:20], "pesflow.pid": pid, "pesflow.started": start}
        made[name] = api.create_container(backend.image_tag(load_task("kfc/toy-sum", [FIXTURES])), command=["true"],
                                          labels=labels)["Id"]
    try:
        backend.containers.sweep_leftovers(api)
        left = {c["Id"] for c in api.containers(all=True, filters={"label": "pesflow.kind=sweep-test"})}
        assert {n for n, i in made.items() if i in left} == {"living"}
    finally:
        for i in made.values():
            try:
                api.remove_container(i, force=True)
            except docker.errors.NotFound:
                pass


def test_a_container_killed_from_outside_is_retried_then_infra_error(engine_url, tmp_path):
    import docker

    for retries, expect in ((1, Status.ok), (0, Status.infra_error)):
        cfg = docker_config(engine_url, tmp_path / f"cache{retries}")
        cfg.infra_retries = retries
        ev = Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path / f"logs{retries}")
        api = docker.APIClient(base_url=engine_url)
        try:
            ev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")  # warm
            session = ev.backend.inner.session
            killed: list[str] = []

            def kill_once() -> None:
                time.sleep(1.0)
                for c in api.containers(filters={"label": ["pesflow.kind=worker", f"pesflow.session={session}"]}):
                    api.kill(c["Id"])
                    killed.append(c["Id"])

            killer = threading.Thread(target=kill_once)
            killer.start()
            v = ev.evaluate("kfc/toy-sum", candidate=probe("import time\ntime.sleep(3)\nPROBE = 'slept'"), grader="hidden")
            killer.join()
            assert killed and v.status == expect, v.message
            if expect == Status.infra_error:
                assert "container died" in v.message or "engine failed" in v.message
            else:
                assert v.raw["probe"] == "slept"
        finally:
            ev.close()
            api.close()


@pytest.mark.slow
def test_build_failures_and_missing_base_images_are_infra_errors(engine_url, toy_package, tmp_path):
    df = toy_package / "environment" / "Dockerfile"
    roots = [toy_package.parent.parent.parent]
    df.write_text(df.read_text().replace("WORKDIR /app/repo", "RUN echo about to fail && false\nWORKDIR /app/repo"))
    ev = Evaluator(docker_config(engine_url, tmp_path / "cache"), tasks_roots=roots, log_root=tmp_path / "logs")
    v = ev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert v.status == Status.infra_error and "image build failed" in v.message and "build.log" in v.message
    assert "false" in v.message  # the step that broke is named
    df.write_text("FROM pesflow-test/does-not-exist:1\nRUN true\n")
    v = ev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert v.status == Status.infra_error and "pesflow-test/does-not-exist:1" in v.message and "pull" in v.message
    ev.close()


@pytest.mark.slow
def test_warm_against_cold_containers(engine_url, tmp_path):
    names = {}
    for warm in (True, False):
        ev = Evaluator(docker_config(engine_url, tmp_path / f"c{warm}", warm_containers=warm), tasks_roots=[FIXTURES],
                       log_root=tmp_path / f"l{warm}")
        vs = [ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden") for _ in range(2)]
        assert all(v.correct for v in vs)
        names[warm] = [(Path(v.log_dir) / "limits.json").read_text() for v in vs]
        ev.close()
    assert names[True][0].split('"container_gradings"')[0] == names[True][1].split('"container_gradings"')[0]
    count = {w: [json.loads(t)["container_gradings"] for t in names[w]] for w in names}
    assert count[True][1] > count[True][0] and count[False] == [1, 1]  # reused (probes grade in it too) / new each time


def test_a_cgroup_file_is_read_from_this_host_only_for_the_named_container():
    from evaluator.backends.docker import host_cgroup_file

    # this test's own process is in no container: whatever its cgroups, none names the id
    assert host_cgroup_file(os.getpid(), "0123456789abcdef" * 4, "pids", "pids.events") is None
    assert host_cgroup_file(0, "x", "pids", "pids.events") is None  # no pid (an engine elsewhere)


def test_limits_a_rootless_engine_on_cgroups_v1_drops_are_named():
    """Podman and Docker take the limits and, rootless on cgroups v1, hold none of them: named,
    never silently dropped (the info below is what a user's rootless podman 4.3 answers here)."""
    podman_user = {"Rootless": True, "CgroupVersion": "1", "MemoryLimit": True, "PidsLimit": True,
                   "SecurityOptions": ["name=seccomp,profile=default"]}
    assert unenforced_limits(podman_user) == ["memory", "processes", "cpus"]
    docker_rootless = {"CgroupVersion": "1", "SecurityOptions": ["name=seccomp,profile=builtin", "name=rootless"]}
    assert unenforced_limits(docker_rootless) == ["memory", "processes", "cpus"]
    assert unenforced_limits({**podman_user, "CgroupVersion": "2"}) == []  # v2 delegated: held
    assert unenforced_limits({"Rootless": False, "CgroupVersion": "1", "MemoryLimit": True, "PidsLimit": True}) == []
    assert unenforced_limits({"CgroupVersion": "2", "MemoryLimit": False, "PidsLimit": True}) == ["memory"]
