"""The ray backend on a real Ray cluster of a head and two worker nodes on this machine (issue 21).

One cluster for the module (ray.cluster_utils.Cluster): the head takes no task, node "cpu" has 2
CPUs, node "gpu" 2 CPUs and 2 logical GPUs (Ray schedules GPUs as resources and sets
CUDA_VISIBLE_DEVICES; no real GPU is needed to check placement). The packages are the toy's,
with graders that measure a deterministic cost (tests/conftest.py toy_tasks_root), one that
also sleeps (to be caught in flight) and one that asks for a GPU and writes down the devices it
was given. The nodes import this checkout (PYTHONPATH, inherited by the nodes' processes).

One package serves every test (preparing one costs most of a minute here): the toy with a
deterministic grader, asking for one GPU, whose test.sh writes down CUDA_VISIBLE_DEVICES and
sleeps as long as a comment in the candidate's kernel says. Checked on the CPU (--device cpu)
its gradings ask Ray for no GPU and go to either node; as a GPU task, only to the GPU node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.rundir import journal
from evaluator.backends.base import BackendUnavailable
from evaluator.config import EvaluatorConfig, RayConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.verdict import Status
from tests.conftest import REPO, needs_root, policy_gist, toy_tasks_root
from tests.test_docker_backend import engine_url  # noqa: F401 (fixture)

ray = pytest.importorskip("ray")
pytestmark = needs_root
RECORD = ('mkdir -p "$LOG"; echo "${CUDA_VISIBLE_DEVICES:-none} $(date +%s.%N)" > "$LOG/placed.txt"\n'
          'S=$(sed -n "s/^# pesflow-test-sleep: *//p" /app/repo/toy/kernel.py); [ -n "$S" ] && sleep "$S"\n')
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
SLOW_MARK = 6.5  # the sleep of a grading to be caught in flight (a number no other process sleeps)


def sleeping(seconds: float) -> CandidateSource:
    return CandidateSource(files={"toy/kernel.py": FAST + f"# pesflow-test-sleep: {seconds}\n"})


class Box:
    pass


@pytest.fixture(scope="module")
def cluster():  # noqa: ANN201
    from ray.cluster_utils import Cluster

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *([old] if old else [])])
    small = {"object_store_memory": 80 << 20}
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **small})
    box = Box()
    box.c, box.address = c, c.address
    box.cpu = c.add_node(num_cpus=2, **small)
    box.gpu = c.add_node(num_cpus=2, num_gpus=2, **small)
    c.wait_for_nodes()
    yield box
    ray.shutdown()
    c.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def tasks_root(tmp_path_factory) -> Path:  # noqa: ANN001
    root = tmp_path_factory.mktemp("ray-tasks")
    pkg = toy_tasks_root(root, "toy-gpu")
    test = pkg / "tests/test.sh"
    lines = test.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("LOG="))
    test.write_text("".join([*lines[: at + 1], RECORD, *lines[at + 1 :]]))
    toml = pkg / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 0", "gpus = 1"))
    toy_tasks_root(root)  # a CPU package, for the baselines' cells (a GPU cell needs a real GPU on its node)
    return root


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:  # noqa: ANN001
    """The nodes' and the local backend's cache, for the whole module: one preparation of the package."""
    return tmp_path_factory.mktemp("ray-cache")


def make(cluster: Box, tasks_root: Path, shared: Path, tmp: Path, **ray_cfg) -> Evaluator:  # noqa: ANN003
    cfg = EvaluatorConfig(backend="ray", workers=ray_cfg.pop("workers", None),
                          ray=RayConfig(address=cluster.address, node_cache_dir=str(shared / "nodes"), ship_code=False, **ray_cfg))
    cfg.local.cache_dir = str(shared / "backend")
    return Evaluator(cfg, tasks_roots=[tasks_root], log_root=tmp / "logs")


def _node_ids(cluster: Box) -> dict[str, str]:
    return {n.node_id: name for name, n in (("cpu", cluster.cpu), ("gpu", cluster.gpu))}


def test_cpu_gradings_give_the_local_backends_verdicts(cluster, tasks_root, shared, tmp_path):
    local_cfg = EvaluatorConfig()
    local_cfg.local.cache_dir = str(shared / "backend")
    local = Evaluator(local_cfg, tasks_roots=[tasks_root], log_root=tmp_path / "local")
    ev = make(cluster, tasks_root, shared, tmp_path)
    for mode in ("oracle", "negative"):
        got = ev.evaluate("kfc/toy-gpu", mode=mode, grader="hidden", device="cpu")
        want = local.evaluate("kfc/toy-gpu", mode=mode, grader="hidden", device="cpu")
        assert (got.status, got.correct, got.speedup, got.hard_fail_reasons) == \
            (want.status, want.correct, want.speedup, want.hard_fail_reasons)
        assert got.backend == "ray" and got.environment["node"]["node"] in _node_ids(cluster) and got.environment["node"]["gpus"] == []
        assert "graded on Ray node" in got.message and (Path(got.log_dir) / "logs/verifier/reward.json").is_file()
    got = ev.evaluate("kfc/toy-gpu", mode="oracle", grader="hidden", device="cpu")
    assert got.status == Status.ok and got.correct
    # prepared once, whatever node and worker process asked (the nodes share this machine's cache)
    marks = list((shared / "nodes").glob("*/prepared/*"))
    assert len(marks) == 1 and len(marks[0].read_text().splitlines()) == 1
    local.close()
    ev.close()


def test_a_memory_hog_and_a_leftover_process_get_the_local_backends_verdict_and_wording(cluster, tasks_root, shared, tmp_path):
    # issue 41: the node grades with the local backend, so the one grading policy decides there too
    local_cfg = EvaluatorConfig()
    local_cfg.local.cache_dir = str(shared / "backend")
    local = Evaluator(local_cfg, tasks_roots=[tasks_root], log_root=tmp_path / "local")
    ev = make(cluster, tasks_root, shared, tmp_path)
    hog = "hog = []\nwhile True:\n    hog.append(b'x' * (32 << 20))\n"
    stray = ("import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True, stdin=subprocess.DEVNULL,"
             " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n")
    try:
        for code, reason in ((hog, "out_of_memory"), (stray, "background_process")):
            cand = CandidateSource(files={"toy/kernel.py": FAST + code})
            got = ev.evaluate("kfc/toy-sum", candidate=cand, grader="hidden")
            want = local.evaluate("kfc/toy-sum", candidate=cand, grader="hidden")
            assert policy_gist(got) == policy_gist(want) and policy_gist(got)[1][0] == reason, (got.message, want.message)
    finally:
        local.close()
        ev.close()


def test_gpu_gradings_land_one_per_logical_gpu_with_its_devices_set(cluster, tasks_root, shared, tmp_path):
    ev = make(cluster, tasks_root, shared, tmp_path, workers=2)
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(ev.evaluate("kfc/toy-gpu", candidate=sleeping(2), grader="hidden")))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert len(out) == 2 and all(v.status == Status.ok for v in out), [v.message for v in out]
    nodes = [v.environment["node"] for v in out]
    assert {n["node"] for n in nodes} == {cluster.gpu.node_id}  # the only node with GPUs
    assert all("graded on Ray node" in v.message and "GPU " in v.message for v in out)
    assert sorted(g for n in nodes for g in n["gpus"]) == ["0", "1"]  # one grading per declared GPU
    placed = [(Path(v.log_dir) / "logs/verifier/placed.txt").read_text().split() for v in out]
    assert sorted(p[0] for p in placed) == ["0", "1"]  # what the grader saw in CUDA_VISIBLE_DEVICES
    assert abs(float(placed[0][1]) - float(placed[1][1])) < 2.0  # both at once: a GPU each, none shared
    ev.close()


def test_an_unreachable_cluster_or_missing_resources_is_one_line_exit_3(cluster, tasks_root, shared, tmp_path, capsys):
    from agent.cli import main

    ev = make(cluster, tasks_root, shared, tmp_path, resource_wait_sec=1, cpus=3)  # no node has 3 CPUs
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"no node of the Ray cluster at \S+ has 3 CPU, 1024 MiB memory for one grading within 1 s \(.*2 CPU, 2 GPU.*"
                                                 r"evaluator\.ray\.cpus and evaluator\.ray\.memory_mb"):
        ev.evaluate("kfc/toy-gpu", mode="oracle", grader="hidden")
    assert time.monotonic() - t0 < 20
    ray.shutdown()  # a new driver: the address alone decides
    t0 = time.monotonic()
    rc = main(["evaluate", "kfc/toy-gpu", "--mode", "noop", "--backend", "ray", "--tasks-root", str(tasks_root),
               "--set", "evaluator.ray.address=127.0.0.1:9", "--set", "evaluator.ray.connect_timeout_sec=1"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 3 and time.monotonic() - t0 < 15
    assert last == ("pesflow evaluate: no Ray cluster answers at 127.0.0.1:9 within 1 s "
                    "(evaluator.ray.address; is `ray start --head` running there?)")


def _running(shared: Path) -> dict[str, int]:
    """Gradings in flight, by the worker's pid -> the node's id prefix (node.py lists each under
    its node while it runs; a killed worker leaves an entry naming a dead process)."""
    out = {}
    for m in (shared / "nodes").glob("*/inflight/*"):
        pid = int(m.name.split("-")[0])
        if Path(f"/proc/{pid}").exists():
            out[str(pid)] = m.parent.parent.name
    return out


def _idle() -> bool:
    """No Ray task holds a resource anywhere in the cluster."""
    total, free = ray.cluster_resources(), ray.available_resources()
    return all(free.get(k, 0) == v for k, v in total.items() if k in ("CPU", "GPU"))


def _sleepers() -> list[int]:
    """Processes of this machine running the slow grader's sleep (the sandbox on some node)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", str(SLOW_MARK).encode()]:
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def test_sigterm_to_pesflow_leaves_no_task_and_no_sandbox(cluster, tasks_root, shared, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    (tmp_path / "cand").mkdir()
    (tmp_path / "cand/toy").mkdir()
    (tmp_path / "cand/toy/kernel.py").write_text(sleeping(SLOW_MARK).files["toy/kernel.py"])
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from agent.cli import entry; sys.exit(entry())", "evaluate",
                             "kfc/toy-gpu", "--candidate", str(tmp_path / "cand"), "--grader", "hidden", "--backend", "ray",
                             "--tasks-root", str(tasks_root), "--set", f"evaluator.ray.address={cluster.address}", "--set",
                             "evaluator.ray.ship_code=false", "--set", f"evaluator.ray.node_cache_dir={shared / 'nodes'}",
                             "--set", f"evaluator.local.cache_dir={shared / 'backend'}", "--out", str(tmp_path / "out")],
                            cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _sleepers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sleepers(), "the grading never started"
    proc.send_signal(signal.SIGTERM)
    rc, err = proc.wait(30), proc.stderr.read()
    assert rc == 130 and "interrupted" in err, err[-2000:]
    deadline = time.monotonic() + 20
    ray.init(address=cluster.address, ignore_reinit_error=True)
    while (_sleepers() or _running(shared) or not _idle()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _sleepers() and not _running(shared) and _idle()


def test_a_node_lost_mid_grading_is_graded_again_on_the_other(cluster, tasks_root, shared, tmp_path):
    ev = make(cluster, tasks_root, shared, tmp_path)
    out: list = []
    t = threading.Thread(target=lambda: out.append(ev.evaluate("kfc/toy-gpu", candidate=sleeping(SLOW_MARK), grader="hidden",
                                                               device="cpu")))
    t.start()
    deadline = time.monotonic() + 120
    while not _sleepers() and time.monotonic() < deadline:
        time.sleep(0.2)
    lost, node = _drop_grading_node(cluster, shared, "the grading never started")
    t.join(240)
    v = out[0]
    assert v.status == Status.ok and v.environment["node"]["node"] != lost and v.environment["node"]["attempts"] == 2
    assert "graded again on another, an infra retry" in v.message
    _replace(cluster, node)
    ev.close()


def _drop_grading_node(cluster: Box, shared: Path, why: str) -> tuple[str, object]:
    """Remove the worker node that runs the one grading in flight: (its node id, the node)."""
    running = _running(shared)
    assert _sleepers() and len(running) == 1, why
    ids = {n.node_id: n for n in (cluster.cpu, cluster.gpu)}
    lost = next(i for i in ids if i.startswith(next(iter(running.values()))))
    cluster.c.remove_node(ids[lost])
    return lost, ids[lost]


def _replace(cluster: Box, lost) -> None:  # noqa: ANN001
    """A node like the removed one, so the module's later tests find the cluster as it was."""
    replacement = cluster.c.add_node(num_cpus=2, num_gpus=2 if lost is cluster.gpu else 0, object_store_memory=80 << 20)
    if lost is cluster.gpu:
        cluster.gpu = replacement
    else:
        cluster.cpu = replacement


def test_a_three_cell_matrix_with_ray_resumes_after_its_driver_is_killed(cluster, tasks_root, shared, tmp_path):
    import yaml

    out = tmp_path / "matrix"
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({
        "out": str(out), "tasks": ["kfc/toy-sum"], "seeds": [0],
        "methods": {"noop": {"kind": "noop"}, "oracle": {"kind": "oracle"}, "oracle-again": {"kind": "oracle"}},
        "config": {"evaluator": {"local": {"cache_dir": str(shared / "backend")},
                                 "ray": {"ship_code": False, "node_cache_dir": str(shared / "nodes")}}}}))
    argv = [sys.executable, "-c", "import sys; from agent.cli import entry; sys.exit(entry())", "baselines",
            str(tmp_path / "b.yaml"), "--ray", cluster.address, "--tasks-root", str(tasks_root)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def finished() -> list[Path]:
        return [p.parent for p in out.glob("cells/*/*/*/seed-0/run.json") if json.loads(p.read_text()).get("status") == "finished"]

    first = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not finished() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    first.kill()  # the driver dies without a word; its cells in flight end with it
    first.wait(30)
    kept = {d: (d / "run.json").stat().st_mtime_ns for d in finished()}
    assert kept, first.stdout.read()[-2000:]
    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert f"cells: {3 - len(kept)} run, {len(kept)} already done, 0 failed" in again.stdout
    assert len(finished()) == 3 and all((d / "run.json").stat().st_mtime_ns == t for d, t in kept.items())
    rows = [json.loads(ln) for ln in (out / "summary.jsonl").read_text().splitlines()]
    assert sorted(r["method"] for r in rows) == ["noop", "oracle", "oracle-again"]
    assert [r["reward"] > 0 for r in sorted(rows, key=lambda r: r["method"])] == [False, True, True]




def test_a_docker_node_backend_grades_as_the_local_one(cluster, tasks_root, shared, tmp_path, engine_url):
    """evaluator.ray.node_backend=docker: each node grades in the container engine (podman here)."""
    from evaluator.config import DockerConfig

    cfg = EvaluatorConfig(backend="ray", ray=RayConfig(address=cluster.address, node_backend="docker", ship_code=False,
                                                       node_cache_dir=str(shared / "nodes-docker")),
                          docker=DockerConfig(base_url=engine_url, cache_dir=str(shared / "docker")))
    ev = Evaluator(cfg, tasks_roots=[tasks_root], log_root=tmp_path / "logs")
    local_cfg = EvaluatorConfig()
    local_cfg.local.cache_dir = str(shared / "backend")
    local = Evaluator(local_cfg, tasks_roots=[tasks_root], log_root=tmp_path / "local")
    for mode in ("oracle", "negative"):
        got = ev.evaluate("kfc/toy-sum", mode=mode, grader="hidden")
        want = local.evaluate("kfc/toy-sum", mode=mode, grader="hidden")
        assert (got.status, got.correct, got.speedup, got.hard_fail_reasons) == \
            (want.status, want.correct, want.speedup, want.hard_fail_reasons), got.message
        assert got.backend == "ray" and got.environment["node"]["node"] in _node_ids(cluster)
        assert json.loads((Path(got.log_dir) / "limits.json").read_text())["container"].startswith("pesflow-")  # graded in one
    ev.close()
    local.close()

def test_a_search_through_ray_that_loses_a_node_ends_as_the_same_search_graded_here(cluster, shared, tmp_path):
    """The same scripted search graded on this machine and on the cluster, a worker node removed
    while it grades: the grading runs again on the other node, and the search ends with the same
    best and population (where a grading ran never changes a result); run.json names the nodes."""
    from tests.llm_server import ScriptedLLMServer
    from tests.test_durable import finish, pesflow, run_args, summary
    from tests.test_loop import kernel_engineer

    root = tmp_path / "tasks"
    pkg = toy_tasks_root(root)
    for test in (pkg / "tests/test.sh", pkg / "environment/loop/private/dev_tests/test.sh"):  # both graders sleep
        lines = test.read_text().splitlines(keepends=True)
        at = next(i for i, ln in enumerate(lines) if ln.startswith("LOG="))
        test.write_text("".join([*lines[: at + 1], RECORD, *lines[at + 1 :]]))

    def slow_closed_form(req):  # the first unrolled loop, graded slowly enough to lose its node meanwhile
        reply = kernel_engineer(req)
        if "while i + 1 < n" in reply.text and ">>>>>>> REPLACE" in reply.text:
            reply.text = reply.text.replace(">>>>>>> REPLACE", f"# pesflow-test-sleep: {SLOW_MARK}\n>>>>>>> REPLACE")
        return reply

    ray_args = ["--backend", "ray", "--set", f"evaluator.ray.address={cluster.address}", "--set", "evaluator.ray.ship_code=false",
                "--set", f"evaluator.ray.node_cache_dir={shared / 'nodes'}"]
    env = {"PYTHONPATH": str(REPO)}
    # the same prompts both ways: engineer's machine section names the machine that grades (here, or the cluster's)
    same = ["--set", "search.feedback=benchmark"]
    with ScriptedLLMServer(slow_closed_form) as server:
        local = Path(finish(pesflow(*run_args(server.openai_base_url, tmp_path / "local", shared / "backend", root), *same,
                                    env_extra=env)))
    with ScriptedLLMServer(slow_closed_form) as server:
        p = pesflow(*run_args(server.openai_base_url, tmp_path / "ray", shared / "backend", root), *ray_args, *same, env_extra=env)
        deadline = time.monotonic() + 180
        while not (_sleepers() and _running(shared)) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        lost, node = _drop_grading_node(cluster, shared, "the slow grading never started")
        on_ray = Path(finish(p))
    _replace(cluster, node)
    assert summary(on_ray) == summary(local)
    nodes = json.loads((on_ray / "run.json").read_text())["utilization"]["nodes"]
    assert nodes and lost[:12] in nodes and len(nodes) == 2, nodes  # both graded: the lost one first
    retried = [e for e in journal.read(on_ray / "journal.jsonl") if e["kind"] == "verdict"
               and "graded again on another, an infra retry" in e["data"]["verdict"]["message"]]
    assert len(retried) == 1, retried
