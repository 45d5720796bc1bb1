"""Hostile candidates, one per attack, graded for real by the local backend.

Each file of toy/ (appended to a correct, fast toy kernel) and router/ (appended to the oracle
of kfc/wre-router-power-of-two-choices-loop16) names its attack and what must stop it in its
header; patches/ are diffs the scope gate must refuse before anything runs. Every attack must
end with reward 0 and the named reason below, and then:
- the harness keeps working, and the next candidate's verdict is exactly that of a clean run
  (the toy's oracle on a deterministic metric, the router's negative);
- the host is untouched: no new files where the attacks aim, the packages unchanged, no
  process left that lives in a sandbox root or carries the attack's tag, nothing reached a
  listener on the host's loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from evaluator.candidate import apply_diff
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.limits import Limits
from evaluator.task import package_hash
from evaluator.verdict import Status
from tests.conftest import FIXTURES, REPO, needs_root, toy_tasks_root, scores_nothing

pytestmark = needs_root
HERE = Path(__file__).resolve().parent
ROUTER = "kfc/wre-router-power-of-two-choices-loop16"
TAG = f"pesflow-adv-{uuid.uuid4().hex[:8]}"
NONCE = uuid.uuid4().hex[:8]
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
TOY_TIMEOUT = 4
# small, so that the bombs end fast: a fresh CI machine faults new pages in at ~130 MB/s, so a
# 1 GiB cap let the memory and disk bombs run into the 4 s limit first (the grader's peak is 14 MB)
TOY_LIMITS = LocalConfig(max_pids=128, max_output_mb=8, memory_mb=256)

# attack -> (status, the named reasons the verdict must carry)
TOY_ATTACKS = {
    "infinite_loop": (Status.timeout, {"timeout"}),
    "fork_bomb": (Status.hard_fail, {"too_many_processes"}),
    "memory_bomb": (Status.hard_fail, {"out_of_memory"}),
    "disk_bomb": (Status.hard_fail, {"disk_quota"}),
    "gigantic_output": (Status.hard_fail, {"output_limit"}),
    "background_process": (Status.hard_fail, {"background_process"}),
    "network": (Status.hard_fail, {"import_failed"}),
    "sandbox_escape": (Status.hard_fail, {"import_failed"}),
    "symlink_logs": (Status.hard_fail, {"import_failed"}),
    "signals_the_supervisor": (Status.hard_fail, {"sandbox_tampering"}),
}
# attack -> (lane, the named reasons); all hard fails
ROUTER_ATTACKS = {
    "segfault": ("hidden", {"candidate_crashed:import"}),
    "network_direct": ("hidden", {"forbidden_pattern:socket"}),
    "network_disguised": ("hidden", {"forbidden_runtime:network"}),
    "reads_tests": ("hidden", {"forbidden_pattern:reads_grader_files"}),
    "reads_hidden_disguised": ("hidden", {"forbidden_runtime:touches_grader_files"}),
    "writes_verifier_atexit": ("hidden", {"forbidden_pattern:atexit", "forbidden_pattern:reads_verifier_output"}),
    "writes_verifier_disguised": ("hidden", {"forbidden_runtime:writes_verifier_output"}),
    "writes_outside_scope": ("hidden", {"forbidden_runtime:writes_outside_scope"}),
    "rewrites_grader_disguised": ("dev", {"forbidden_runtime:touches_grader_files"}),
    "baseline_import": ("hidden", {"forbidden_pattern:imports_frozen_baseline"}),
    # Its search for the baseline module by `type(m) is type(os)` misses it under the trust
    # screen's guard (which watches that module through a subclass), so only its write is left.
    "baseline_edit_disguised": ("hidden", {"forbidden_runtime:touches_grader_files"}),
    "timer_monkeypatch": ("hidden", {"forbidden_pattern:timer_access", "forbidden_pattern:time_monkeypatch"}),
    "timer_monkeypatch_disguised": ("hidden", {"forbidden_pattern:runtime_tampering"}),
    "identity_cache": ("hidden", {"correctness_failed"}),
    "background_process_disguised": ("hidden", {"forbidden_runtime:process_spawn"}),
}
# patch -> the scope gate's reasons
PATCHES = {
    "symlink_out_of_tree": ["symlink_or_special_file:toy/kernel.py"],
    "touches_git": ["touches_git:.git/hooks/post-checkout"],
    "moves_head": ["touches_git:.git/HEAD"],
    "path_escapes_tree": ["path_escapes_tree:../../../tmp/pesflow-adv-planted"],
}


class Listener:
    """TCP and UDP on the host's loopback (IPv4, and IPv6 where there is one): what reaches it."""

    def __init__(self):
        self.hits: list[str] = []
        self.socks: list[socket.socket] = []
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        self._serve(tcp, "tcp4")
        for family, host, name in ((socket.AF_INET, "127.0.0.1", "udp4"), (socket.AF_INET6, "::1", "tcp6"),
                                   (socket.AF_INET6, "::1", "udp6")):
            s = socket.socket(family, socket.SOCK_DGRAM if name.startswith("udp") else socket.SOCK_STREAM)
            try:
                s.bind((host, self.port))
            except OSError:
                s.close()
                continue
            self._serve(s, name)

    def _serve(self, s: socket.socket, name: str) -> None:
        self.socks.append(s)
        if s.type == socket.SOCK_STREAM:
            s.listen(8)

        def loop() -> None:
            while True:
                try:
                    if s.type == socket.SOCK_STREAM:
                        s.accept()
                    else:
                        s.recvfrom(65536)
                except OSError:
                    return
                self.hits.append(name)

        threading.Thread(target=loop, daemon=True).start()

    def close(self) -> None:
        for s in self.socks:
            s.close()


@pytest.fixture(scope="module")
def listener():
    lst = Listener()
    yield lst
    lst.close()


@pytest.fixture(scope="module")
def toy(cache_dir, tmp_path_factory):
    """The toy package on a deterministic metric (traced events), so that the reference
    verdict after an attack can be compared exactly with a clean one."""
    root = tmp_path_factory.mktemp("adv-tasks")
    pkg = toy_tasks_root(root)
    cfg = EvaluatorConfig(timeout_sec=TOY_TIMEOUT, local=TOY_LIMITS.model_copy(update={"cache_dir": str(cache_dir)}))
    ev = Evaluator(cfg, tasks_roots=[root], log_root=tmp_path_factory.mktemp("adv-toy-logs"))
    clean = summary(ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden"))
    yield ev, pkg, clean
    ev.close()


@pytest.fixture(scope="module")
def router(cache_dir, tmp_path_factory):
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), log_root=tmp_path_factory.mktemp("adv-router-logs"))
    task = ev.task(ROUTER)
    base = (task.root / "environment/repo/submission/kernel.py").read_text()
    oracle = apply_diff((task.root / "solution/oracle.patch").read_text(), {"submission/kernel.py": base})["submission/kernel.py"]
    clean = summary(ev.evaluate(task, mode="negative", grader="hidden"))
    assert clean["hard_fail_reasons"] == ["correctness_failed"], clean
    yield ev, task, oracle, clean
    ev.close()


def summary(v) -> dict:
    return {"status": v.status, "reward": v.reward, "speedup": v.speedup, "hard_fail_reasons": v.hard_fail_reasons,
            "tests": v.tests.model_dump()}


def fill(code: str, listener: Listener, hidden: Path) -> str:
    return (code.replace("__PORT__", str(listener.port)).replace("__TAG__", TAG).replace("__NONCE__", NONCE)
            .replace("__HIDDEN__", str(hidden)))


WATCHED_EXACT = [Path(p) for p in ("/root", "/opt", "/var/tmp", "/dev/shm", "/etc")]
WATCHED_NAMES = [Path(p) for p in ("/tmp", "/run", "/")]  # busy folders: only names the attacks use


def host_state(packages: list[Path]) -> dict:
    """What an attack must not change on the host."""
    state: dict = {}
    for d in WATCHED_EXACT:
        state[str(d)] = sorted(os.listdir(d)) if d.is_dir() else None
    for d in WATCHED_NAMES:
        state[str(d)] = sorted(n for n in os.listdir(d) if any(k in n for k in ("pesflow-adv", "fill-", "jail", "disk-", NONCE)))
    for p in packages:
        state[str(p)] = package_hash(p)
    state["names"] = (socket.gethostname(), Path("/proc/sys/kernel/domainname").read_text())
    return state


def sandboxed_processes(cache_dir: Path) -> list[str]:
    """Host processes rooted in a sandbox of this session's cache, or carrying the attack's tag."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            root = os.readlink(f"/proc/{entry.name}/root")
            args = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if root.startswith(str(cache_dir)) or TAG in args:
            found.append(f"{entry.name}: {args[:80]}")
    return found


def check_host_untouched(before: dict, packages: list[Path], cache_dir: Path, listener: Listener) -> None:
    assert host_state(packages) == before
    assert sandboxed_processes(cache_dir) == []
    assert listener.hits == []
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert TAG not in ps


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(TOY_ATTACKS))
def test_toy_attack(attack, toy, listener, cache_dir):
    ev, pkg, clean = toy
    status, reasons = TOY_ATTACKS[attack]
    packages = [pkg, FIXTURES / "kfc/toy-sum/task"]
    before = host_state(packages)
    code = fill((HERE / "toy" / f"{attack}.py").read_text(), listener, hidden=REPO / "tests")
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST + "\n" + code}), grader="hidden")
    log_dir = Path(v.log_dir)
    limits = json.loads((log_dir / "limits.json").read_text())
    if attack == "memory_bomb" and v.status == Status.timeout:
        # held at its memory limit, the kernel can reclaim the grader's own file pages again and
        # again (no swap) past the 4 s limit before it kills (1 run in 3 on a fresh machine): the
        # limit still held it, and it scored nothing
        peak = (limits.get("usage") or {}).get("memory_peak_bytes") or 0
        assert scores_nothing(v) and peak >= 0.9 * (limits["limits"]["memory_mb"] << 20), limits
        return
    assert v.status == status and scores_nothing(v), (v.status, v.message)
    assert reasons <= set(v.hard_fail_reasons), v.hard_fail_reasons
    # stopped promptly: a limit ends the grading well before the time limit
    assert v.seconds < TOY_TIMEOUT + 12
    if attack in ("fork_bomb", "memory_bomb", "disk_bomb", "gigantic_output"):
        assert limits["breach"] == v.hard_fail_reasons[0] and v.raw["pesflow_limits"][limits["breach"]]
    if attack == "gigantic_output":
        assert limits["usage"]["output_bytes"] > 8 << 20
        assert (log_dir / "grader_output.log").stat().st_size < TOY_LIMITS.max_log_bytes + 1024
    if attack == "background_process":
        assert limits["strays"] and v.raw.get("reward") == 0.0  # the forged 1.0 did not count
    if attack in ("network", "sandbox_escape"):
        tried = json.loads((log_dir / "logs/verifier/attack.json").read_text())
        assert tried and all(r.startswith("blocked") for r in tried.values()), tried
    if attack == "symlink_logs":
        kept = [p for p in (log_dir / "logs").rglob("*")]
        assert not any(p.is_symlink() for p in kept)
        assert not (log_dir / "logs/verifier/passwd").exists() and not (log_dir / "logs/loop/dev").exists()
    check_host_untouched(before, packages, cache_dir, listener)
    assert summary(ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")) == clean


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(ROUTER_ATTACKS))
def test_router_attack(attack, router, listener, cache_dir):
    ev, task, oracle, clean = router
    lane, reasons = ROUTER_ATTACKS[attack]
    before = host_state([task.root])
    code = fill((HERE / "router" / f"{attack}.py").read_text(), listener, hidden=REPO / "tests")
    v = ev.evaluate(task, candidate=CandidateSource(files={"submission/kernel.py": oracle + "\n\n" + code}), grader=lane)
    assert v.status == Status.hard_fail and scores_nothing(v), (v.status, v.message)
    assert reasons <= set(v.hard_fail_reasons), v.hard_fail_reasons
    assert v.speedup is None or v.speedup < 100  # no forged speedup got through
    check_host_untouched(before, [task.root], cache_dir, listener)
    assert summary(ev.evaluate(task, mode="negative", grader="hidden")) == clean


@pytest.mark.slow
@pytest.mark.parametrize("lane", ["hidden", "dev"])
def test_interpreter_swap_through_posixsubprocess_is_named_where_a_guard_runs(lane, router, listener, cache_dir):
    """The grader's interpreter swapped from a helper started through _posixsubprocess: the
    router's runtime guard names the spawn, and the figures are withheld."""
    ev, task, oracle, clean = router
    before = host_state([task.root])
    code = fill((HERE / "interpreter_swap.py").read_text(), listener, hidden=REPO / "tests")
    v = ev.evaluate(task, candidate=CandidateSource(files={"submission/kernel.py": oracle + "\n\n" + code}), grader=lane)
    assert v.status == Status.hard_fail and "forbidden_runtime:process_spawn" in v.hard_fail_reasons, v.message
    assert v.speedup is None and v.reward is None and "99.0" not in json.dumps(v.model_dump(mode="json", exclude={"raw"}))
    check_host_untouched(before, [task.root], cache_dir, listener)
    assert summary(ev.evaluate(task, mode="negative", grader="hidden")) == clean


@pytest.mark.slow
@pytest.mark.parametrize("lane", ["hidden", "dev"])
def test_interpreter_swap_cannot_forge_a_grader_without_a_guard(lane, toy, listener, cache_dir):
    """The toy's graders have no runtime guard: the read-only root alone keeps the interpreter
    the prepared one, so the swap fails, the score is the honest one, and the attempt is named."""
    ev, pkg, clean = toy
    code = fill((HERE / "interpreter_swap.py").read_text(), listener, hidden=REPO / "tests")
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST + "\n" + code}), grader=lane)
    assert v.status == Status.ok and v.speedup != 99.0 and v.speedup == clean["speedup"], v.message
    assert "read_only_root" in v.message and "/opt/kernelbench-venv/bin" in v.message
    look = "import os\nPROBE = [os.path.exists('/opt/kernelbench-venv/bin/py.real'), os.path.islink('/opt/kernelbench-venv/bin/python3')]\n"
    after = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST + "\n" + look}), grader=lane)
    assert after.raw["probe"] == [False, True]  # nothing of the swap, in the grading or after it


@pytest.mark.slow
@pytest.mark.parametrize("patch", sorted(PATCHES))
def test_patch_attack_is_refused_before_running(patch, toy):
    ev, pkg, clean = toy
    v = ev.evaluate("kfc/toy-sum", candidate=HERE / "patches" / f"{patch}.diff", grader="hidden")
    assert v.status == Status.scope_violation and v.reward == 0.0
    assert v.hard_fail_reasons == PATCHES[patch]
    assert not (Path(v.log_dir) / "grader_output.log").exists()  # nothing ran
    assert not Path("/tmp/pesflow-adv-planted").exists()


@pytest.mark.slow
def test_folder_candidate_with_a_symlink_is_refused(toy, tmp_path):
    ev, pkg, clean = toy
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "kernel.py").symlink_to("/etc/passwd")
    v = ev.evaluate("kfc/toy-sum", candidate=tmp_path, grader="hidden")
    assert v.status == Status.scope_violation and v.hard_fail_reasons == ["symlink_or_special_file:toy/kernel.py"]


# ---------------------------------------------------------------- the limits themselves (fast)
HOG = "import sys\nhog = []\nwhile True:\n    hog.append(b'x' * (8 << 20))\n"
FORKS = "import os, time\nfor _ in range(200):\n    try:\n        os.fork() or time.sleep(30)\n    except OSError:\n        pass\ntime.sleep(30)\n"


def test_cgroup_limits_name_what_they_stopped():
    from evaluator import sandbox

    for code, limits, reason in ((HOG, Limits(memory_mb=64), "out_of_memory"), (FORKS, Limits(pids=16), "too_many_processes")):
        r = sandbox.run(f"exec {sys.executable} -c {sandbox.q(code)}", network=False, timeout=20, limits=limits)
        assert r.killed == reason and r.seconds < 10, (r.killed, r.seconds, r.output[-300:])
        if support().memory and reason == "out_of_memory":
            assert r.usage["memory_peak_bytes"] <= 64 << 20
    # nothing of them is left: the forks sleeping 30 s went with the rest
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "os.fork() or time.sleep" not in ps and "hog.append" not in ps


def test_without_cgroups_the_fallbacks_still_stop_them_and_say_so(monkeypatch):
    from evaluator import limits as limits_mod
    from evaluator import sandbox

    monkeypatch.setattr(limits_mod, "detect", lambda: limits_mod.Support(None, None))
    r = sandbox.run(f"exec {sys.executable} -c {sandbox.q(FORKS)}", network=False, timeout=20, limits=Limits(pids=16))
    assert r.killed == "too_many_processes" and any("polling /proc" in w for w in r.warnings)
    r = sandbox.run(f"{sys.executable} -c {sandbox.q(HOG)}; echo rc=$?", network=False, timeout=20, limits=Limits(memory_mb=256))
    assert "MemoryError" in r.output and any("RLIMIT_AS" in w for w in r.warnings)
    gpu = limits_mod.Plan.make(Limits(memory_mb=256, gpu=True))
    assert gpu.rlimit_as_mb is None and "without a memory limit" in gpu.warnings[0]


def test_a_broken_limit_puts_its_name_first_and_zeroes_the_reward():
    from evaluator.backends.local_scratch import full as _scratch_full
    from evaluator.grading_policy import limit_verdict
    from evaluator.verdict import from_reward_json

    graders = {"reward": 0.7, "speedup": 3.0, "hard_fails": "slow_path", "tests": {"passed": 5, "total": 5}}
    raw = limit_verdict(graders, ["out_of_memory", "background_process"], memory_mb=1024, disk_mb=512, strays=["7:python3"])
    v = from_reward_json(raw, task="t", mode="candidate", backend="local", grader="hidden")
    assert v.status == Status.hard_fail and v.reward == 0.0 and v.speedup == 3.0
    assert v.hard_fail_reasons == ["out_of_memory", "background_process", "slow_path"]
    assert "1024 MiB" in raw["pesflow_limits"]["out_of_memory"] and "7:python3" in raw["pesflow_limits"]["background_process"]
    assert limit_verdict(None, ["disk_quota"], disk_mb=512)["pesflow_grader_verdict"] is False
    full = {"scratch_used": str(511 << 20), "scratch_total": str(512 << 20), "inodes_free": "100"}
    assert _scratch_full(full, 512) == "disk_quota"
    assert _scratch_full({**full, "scratch_used": str(100 << 20)}, 512) is None
    assert _scratch_full({**full, "scratch_used": str(100 << 20), "inodes_free": "0"}, 512) == "disk_quota"
    assert _scratch_full(full, None) is None  # no cap, no quota


def support():
    from evaluator.limits import detect

    return detect()


def test_an_oom_kill_far_under_the_limit_is_the_machines_not_the_candidates(tmp_path):
    """The group's oom_kill counter also counts the machine-wide OOM killer's victims."""
    from evaluator.limits import HOST_OUT_OF_MEMORY, OUT_OF_MEMORY, Plan

    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    plan = Plan(Limits(memory_mb=1024), groups={"memory": ("v1", tmp_path)})
    (tmp_path / "memory.max_usage_in_bytes").write_text(str(100 << 20))
    assert plan.breach(None) == HOST_OUT_OF_MEMORY
    (tmp_path / "memory.max_usage_in_bytes").write_text(str(1024 << 20))
    assert plan.breach(None) == OUT_OF_MEMORY
