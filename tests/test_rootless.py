"""The local backend as an ordinary user: the same sandbox, in a user namespace.

CI runs as root; these tests make an ordinary user (tests/rootless_user.py: a home, a venv of
the system python there, a copy of pesflow) and drop to it for every grading. They are a
representative subset of the sandbox and adversarial suites, each batch of gradings in one
process sharing one prepared layer: verdicts equal to root's on a bundled CPU task; the user's
home (but its venv) and /root unseen, the host's loopback unreached; a forging daemon named and
its figures null; nothing left running after a grading, or after pesflow is killed (SIGTERM,
SIGKILL); a memory bomb and a fork bomb stopped with the mechanism that held them named (rlimits
inside the user namespace, or a cgroup handed to the user); and the one-line error, exit 3,
where the kernel refuses the user a namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests import rootless_user as ru
from tests.conftest import REPO, needs_root

WHY = ru.usable()
pytestmark = [needs_root, pytest.mark.skipif(WHY is not None, reason=WHY or "")]
TAG = f"pesflow-rl-{uuid.uuid4().hex[:8]}"
NONCE = uuid.uuid4().hex[:8]
TOY = "kfc/toy-sum"
ROUTER = "kfc/wre-router-power-of-two-choices-loop16"
ATTACKS = REPO / "tests/adversarial/toy"
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
SMALL = {"max_pids": 128, "max_output_mb": 8, "memory_mb": 1024}  # the adversarial suite's, so the bombs end fast


def toy(code: str) -> dict:
    return {"task": TOY, "files": {"toy/kernel.py": FAST + "\n" + code + "\n"}}


def attack(name: str) -> str:
    return (ATTACKS / f"{name}.py").read_text().replace("__TAG__", TAG)


def tagged() -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,user,args"], capture_output=True, text=True).stdout
    return [ln for ln in ps.splitlines() if TAG in ln]


def test_root_keeps_its_arguments_and_rootless_differs_only_where_it_must():
    from evaluator.isolation import ROOT, ROOTLESS, Isolation

    root, user_ns = Isolation(ROOT), Isolation(ROOTLESS)
    today = ["unshare", "--mount", "--pid", "--fork", "--kill-child=SIGKILL", "--propagation", "private", "--net", "--uts", "--ipc"]
    assert root.unshare(network=False) == today and root.overlay_options == "" and root.key == "root"
    assert root.hostname_line("pesflow", "/p") == "echo pesflow > /proc/sys/kernel/hostname\n"
    assert user_ns.unshare(network=False) == today[:1] + ["--user", "--map-root-user"] + today[1:]
    assert "--net" not in user_ns.unshare(network=True)  # a Dockerfile step keeps the host's network
    assert user_ns.overlay_options == ",userxattr" and user_ns.key != root.key


@pytest.fixture(scope="module")
def user():
    return ru.make()


@pytest.fixture(scope="module")
def planted(user):
    """Secrets where an ordinary user keeps them, another project and another copy of a task, and one under /root."""
    h = user.home
    files = [h / ".ssh/id_ed25519", h / ".aws/credentials", h / ".config/gh/hosts.yml", h / "other-project/secret.txt",
             h / "task-copies/kfc/toy-sum/task/solution/oracle.patch", Path(f"/root/pesflow-planted-{NONCE}")]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("secret\n")
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", *(str(h / d) for d in (".ssh", ".aws", ".config", "other-project", "task-copies"))], check=True)
    yield [str(f) for f in files]
    Path(f"/root/pesflow-planted-{NONCE}").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    s.settimeout(0.2)
    yield s
    s.close()


@pytest.fixture(scope="module")
def batch(user, planted, listener):
    """One process of the user grading everything the checks below read."""
    port = listener.getsockname()[1]
    see = (
        "import os, socket\n"
        f"planted = {planted!r}\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    net = 'connected'\n"
        "except OSError:\n    net = 'refused'\n"
        f"home = {str(user.home)!r}\n"
        "try:\n    open(home + '/venv/pesflow-x', 'w')\n    venv_write = 'written'\n"
        "except OSError as e:\n    venv_write = e.strerror\n"
        "PROBE = {'planted': [p for p in planted if os.path.exists(p)], 'net': net, 'home': sorted(os.listdir(home)),\n"
        "         'hostname': open('/etc/hostname').read().strip(), 'uid': os.getuid(), 'venv_write': venv_write,\n"
        "         'procs': len([p for p in os.listdir('/proc') if p.isdigit()])}\n"
    )
    evals = [toy(see), toy(attack("background_process")), toy(attack("memory_bomb")), toy(attack("fork_bomb")),
             {"task": TOY, "mode": "oracle"}]
    out = ru.drive(user, {"tasks_root": str(user.tree / "tests/fixtures/tasks"), "local": SMALL, "timeout_sec": 20,
                          "evals": evals})
    return dict(zip(["see", "daemon", "memory", "fork", "oracle"], out))


def test_verdicts_equal_roots_on_a_bundled_cpu_task(user, evaluator):
    mine = ru.drive(user, {"tasks_root": str(user.tree / "tasks"), "local": {"install_steps": "skip"},
                           "evals": [{"task": ROUTER, "mode": "negative"}]})[0]
    root = evaluator.evaluate(ROUTER, mode="negative", grader="hidden")
    assert mine["euid"] != 0 and mine["environment"]["sandbox"] == "rootless" and root.environment["sandbox"] == "root"
    assert (mine["status"], mine["reward"], mine["hard_fail_reasons"], mine["tests"]) == \
        (root.status.value, root.reward, root.hard_fail_reasons, [root.tests.passed, root.tests.total])
    assert mine["limits"]["sandbox"] == "rootless"


def test_the_users_home_and_root_are_unseen_and_the_host_unreached(batch, user, listener):
    v = batch["see"]
    assert v["status"] == "ok", v["message"]
    p = v["probe"]
    assert p["planted"] == [], p  # ~/.ssh, ~/.aws, ~/.config, another project, another task copy, /root
    assert p["home"] == ["venv"]  # of the home, the stand-in's venv only (the skeleton's mount point)
    assert p["venv_write"] == "Read-only file system"
    assert p["net"] == "refused" and p["hostname"] == "pesflow" and p["uid"] == 0 and p["procs"] < 20
    with pytest.raises(socket.timeout):
        listener.accept()  # nothing reached the host's loopback
    assert not (user.home / "venv/pesflow-x").exists()


def test_a_forging_daemon_is_named_its_figures_count_for_nothing_and_it_is_gone(batch):
    v = batch["daemon"]
    assert v["status"] == "hard_fail" and "background_process" in v["hard_fail_reasons"], v
    assert "result_forged_after_grader" in v["hard_fail_reasons"] and v["reward"] is None and v["speedup"] is None
    assert v["limits"]["strays"]
    assert tagged() == []  # killed with the namespace
    oracle = batch["oracle"]
    assert oracle["status"] == "ok" and oracle["reward"] == 1.0  # the harness keeps working
    # the trust screen's guard ran in the grading's interpreters (its layer over site-packages, its config bound)
    runtime = oracle["trust"]["checks"]["runtime"]
    assert oracle["trust"]["suspect"] is False and runtime["candidate_processes"] >= 1 and runtime["events"] > 0


@pytest.mark.parametrize("bomb, reason, mechanism", [("memory", "out_of_memory", "poll_rss+rlimit_as"),
                                                     ("fork", "too_many_processes", "rlimit_nproc")])
def test_bombs_are_stopped_by_rlimits_in_the_user_namespace_and_named(batch, bomb, reason, mechanism):
    v = batch[bomb]
    assert v["status"] == "hard_fail" and v["reward"] == 0.0 and v["hard_fail_reasons"][0] == reason, v
    what = "memory" if bomb == "memory" else "pids"
    assert v["limits"]["mechanisms"][what] == mechanism and v["limits"]["breach"] == reason
    assert v["seconds"] < 20


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_pesflow_leaves_nothing_running(user, sig):
    spec = {"tasks_root": str(user.tree / "tests/fixtures/tasks"), "timeout_sec": 60,
            "evals": [toy(f"import subprocess, time\nsubprocess.Popen(['bash', '-c', 'exec -a {TAG}-{sig.name} sleep 300'],"
                          " start_new_session=True)\ntime.sleep(300)\n")]}
    proc = subprocess.Popen(ru.as_user_argv(user, [user.python, str(user.tree / "tests/rootless_driver.py"), json.dumps(spec)]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(user.home))
    try:
        deadline = time.monotonic() + 60
        while not any(f"{TAG}-{sig.name}" in ln for ln in tagged()):
            assert time.monotonic() < deadline and proc.poll() is None, "the grading never started"
            time.sleep(0.1)
        proc.send_signal(sig)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while [ln for ln in tagged() if f"{TAG}-{sig.name}" in ln] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [ln for ln in tagged() if f"{TAG}-{sig.name}" in ln] == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_limit_nothing_holds_is_named_in_the_verdicts_message(user):
    # A GPU task's memory: no RLIMIT_AS (its drivers reserve far more address space than they
    # use) and no cgroup handed over, so nothing holds it; graded on the CPU path here.
    pkg = user.home / f"gpu-tasks-{NONCE}/kfc/toy-sum/task"
    shutil.copytree(user.tree / "tests/fixtures/tasks/kfc/toy-sum/task", pkg)
    toml = pkg / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 0", "gpus = 1"))
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(pkg.parents[2])], check=True)
    try:
        v = ru.drive(user, {"tasks_root": str(pkg.parents[2]), "evals": [{"task": TOY, "mode": "oracle", "device": "cpu"}]})[0]
    finally:
        shutil.rmtree(pkg.parents[2], ignore_errors=True)
    assert v["status"] == "ok" and v["limits"]["unenforced"] == ["memory"] and v["limits"]["mechanisms"]["memory"] == "none"
    assert "unenforced_limit" in v["message"] and "memory" in v["message"] and "cgroup_parents" in v["message"], v["message"]


@pytest.fixture
def delegated(user):
    """cgroups handed to the user, as a machine's admin (or systemd's user manager) would: a v2
    subtree it owns with pesflow running inside it, or v1 groups of memory and pids it owns."""
    name = f"pesflow-user-{NONCE}"
    cg = Path("/sys/fs/cgroup")
    made: list[Path] = []
    if (cg / "cgroup.controllers").exists():
        top = cg / name
        top.mkdir()
        made.append(top)
        for c in ("memory", "pids"):
            if c not in (cg / "cgroup.subtree_control").read_text().split():
                (cg / "cgroup.subtree_control").write_text(f"+{c}")
        (top / "cgroup.subtree_control").write_text("+memory +pids")
        for d in ("driver", "grading"):
            (top / d).mkdir()
            made.insert(0, top / d)
        subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(top)], check=True)
        parents, join = [str(top / "grading")], top / "driver/cgroup.procs"
    else:
        parents, join = [], None
        for c in ("memory", "pids"):
            if not (cg / c / "cgroup.procs").exists():
                pytest.skip(f"no cgroup {c} controller to hand over")
            (cg / c / name).mkdir()
            made.append(cg / c / name)
            subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(cg / c / name)], check=True)
            parents.append(str(cg / c / name))
    yield parents, join
    for d in made:
        for sub in sorted(d.glob("pesflow-*"), reverse=True):
            sub.rmdir()
        d.rmdir()


def test_a_cgroup_handed_to_the_user_holds_its_limits(user, delegated):
    parents, join = delegated
    spec = {"tasks_root": str(user.tree / "tests/fixtures/tasks"), "timeout_sec": 20,
            "local": {**SMALL, "memory_mb": 256, "cgroup_parents": parents},
            "evals": [toy(attack("memory_bomb")), toy(attack("fork_bomb"))]}
    argv = ru.as_user_argv(user, [user.python, str(user.tree / "tests/rootless_driver.py"), json.dumps(spec)])
    if join is not None:  # v2: moving a process needs the common ancestor's, so pesflow runs inside the subtree
        argv = ["sh", "-c", f'echo $$ > {join} && exec "$@"', "join", *argv]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=str(user.home))
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("@@result ")]
    assert line, r.stdout[-2000:] + r.stderr[-2000:]
    memory, fork = json.loads(line[0][len("@@result "):])
    version = "v2" if join is not None else "v1"
    assert memory["hard_fail_reasons"][0] == "out_of_memory" and memory["limits"]["mechanisms"]["memory"] == f"cgroup-{version}"
    assert fork["hard_fail_reasons"][0] == "too_many_processes" and fork["limits"]["mechanisms"]["pids"] == f"cgroup-{version}"


def test_where_the_kernel_refuses_a_user_namespace_one_line_and_exit_3(user):
    # A user namespace may hold at most one more below it: the one pesflow runs in. Its own is refused.
    inner = ru.env_of(user)
    out = user.home / f"refused-{NONCE}"
    cmd = (f"echo 1 > /proc/sys/user/max_user_namespaces && exec unshare --user --map-user={user.uid} --map-group={user.gid} "
           f"env -i {' '.join(f'{k}={v}' for k, v in inner.items())} {user.python} -m agent.cli evaluate {TOY} "
           f"--tasks-root {user.tree / 'tests/fixtures/tasks'} --mode oracle --grader hidden --out {out}")
    r = ru.run_as(user, ["unshare", "--user", "--map-root-user", "sh", "-c", cmd], timeout=120)
    assert r.returncode == 3, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    v = json.loads((out / "verdict.json").read_text())
    said = v["message"]
    assert v["status"] == "infra_error" and "\n" not in said, said
    assert "unprivileged user namespaces" in said and "max_user_namespaces" in said, said
    assert "--backend docker" in said and "podman" in said and "as root" in said, said
