"""The modal backend up to the SDK's boundary: nothing here reaches Modal.

The SDK's entry points (App.lookup, Image.from_dockerfile / from_registry, Sandbox.create)
are replaced on the real `modal` module by recording stand-ins; every call the backend
makes through them is then checked against the real SDK's signatures, so a renamed or
misspelt argument fails here. The stand-in sandbox really unpacks the tar of the candidate's
files and grades what it received (a fast kernel scores, the baseline does not), so a verdict
only comes out right when files went in and logs came back as they should.
"""

from __future__ import annotations

import inspect
import os
import io
import json
import re
import shlex
import shutil
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from evaluator.backends.modal_backend import ModalBackend, hardware_notes
from evaluator.config import EvaluatorConfig, ModalConfig
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.parallel import ParallelBackend
from evaluator.task import load_task
from evaluator.trust import instrument, watch, written
from evaluator.verdict import Status
from tests.conftest import FIXTURES

modal = pytest.importorskip("modal")
SITE_DIRS = ("/opt/venv/lib/python3.11/site-packages", "/usr/lib/python3/dist-packages")  # what the image's find prints
FAST = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
BASELINE = (FIXTURES / "kfc/toy-sum/task/environment/repo/toy/kernel.py").read_text()


class Stream:
    def __init__(self, data: bytes | str):
        self.data = data

    def read(self) -> bytes | str:
        return self.data

    def __iter__(self):
        yield self.data


class Stdin:
    def __init__(self, on_close):  # noqa: ANN001
        self.buf, self.on_close = b"", on_close

    def write(self, data: bytes) -> None:
        self.buf += data

    def write_eof(self) -> None:
        self.on_close(self.buf)

    def drain(self) -> None:
        pass


class Process:
    def __init__(self, out: bytes | str = b"", rc: int = 0, on_stdin=None):  # noqa: ANN001
        self.stdout, self.rc = Stream(out), rc
        self.stdin = Stdin(on_stdin or (lambda b: None))

    def wait(self) -> int:
        return self.rc


class Image:
    def __init__(self, rec: "Recorder", how: tuple):
        self.rec, self.how, self.layers = rec, how, []

    def _new(self, layer: tuple) -> "Image":
        img = Image(self.rec, self.how)
        img.layers = [*self.layers, layer]
        return img

    def build(self, app):  # noqa: ANN001, ANN201
        self.rec.call("Image.build", modal.Image.build, self, app)
        return self

    def add_local_dir(self, local_path, remote_path, **kw):  # noqa: ANN001, ANN201
        self.rec.call("Image.add_local_dir", modal.Image.add_local_dir, self, local_path, remote_path, **kw)
        return self._new(("dir", str(local_path), remote_path))

    def add_local_file(self, local_path, remote_path, **kw):  # noqa: ANN001, ANN201
        self.rec.call("Image.add_local_file", modal.Image.add_local_file, self, local_path, remote_path, **kw)
        return self._new(("file", str(local_path), remote_path))


class Sandbox:
    """A stand-in sandbox: keeps the files tarred into it, and 'grades' the kernel it holds."""

    def __init__(self, rec: "Recorder", image: Image, kwargs: dict[str, Any]):
        self.rec, self.image, self.kwargs = rec, image, kwargs
        self.files: dict[str, bytes] = {}
        self.logs: dict[str, bytes] = {}
        self.terminated = 0
        self.graded = False

    def poll(self):  # noqa: ANN201
        return None

    def terminate(self, **kw):  # noqa: ANN001, ANN201
        self.rec.call("Sandbox.terminate", modal.Sandbox.terminate, self, **kw)
        self.terminated += 1

    def _untar(self, data: bytes) -> None:
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for m in tf.getmembers():
                self.files["/" + m.name] = tf.extractfile(m).read()

    def exec(self, *argv, **kw):  # noqa: ANN001, ANN201
        self.rec.call("Sandbox.exec", modal.Sandbox.exec, self, *argv, **kw)
        self.rec.execs.append((argv, kw))
        text = kw.get("text", True)
        if argv[:2] == ("tar", "-xf"):
            return Process(on_stdin=self._untar)
        if argv[:len(written.READ_TEXT)] == written.READ_TEXT:  # a found startup file's text
            return Process(self.rec.startup_texts.get(argv[-1], "").encode())
        if argv[0] == "cat":
            return Process(BASELINE if argv[1].endswith("toy/kernel.py") else "", 0 if argv[1].endswith("toy/kernel.py") else 1)
        script = argv[-1] if argv[0] == "sh" else ""
        if "score_engine.sh" in " ".join(argv) and "@@pesflow:grader_ns=" not in script:  # the dev engine probe
            return Process("/opt/loop/score_engine.sh\n")
        if script == instrument.FIND_SITE_DIRS:
            return Process("\n".join(SITE_DIRS) + "\n")
        if script == written.LIST_STARTUP:  # what the image holds, then what the grading wrote besides
            names = [f"{d}/{n}\t1700000000.5" for d in SITE_DIRS for n in instrument.GUARD_FILES if d in SITE_DIRS[:1]]
            return Process("\n".join(names + (self.rec.startup_written if self.graded else [])) + "\n")
        if "nvidia-smi" in script or "memory.events" in script:
            return Process(("oom_kill 1\n" if self.rec.oom else "oom_kill 0\n")
                           + (f"memory_peak {self.rec.peak}\n" if self.rec.peak is not None and "memory.peak" in script else "")
                           + ("NVIDIA H100 80GB HBM3\n" if "nvidia-smi" in script else ""))
        if "tar -cf" in script:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tf:
                for name, data in (self.rec.trust_out if instrument.OUT_DIR in script else self.logs).items():
                    info = tarfile.TarInfo("./" + name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
            return Process(buf.getvalue())
        if "@@pesflow:grader_ns=" in script:  # the grader: scores the kernel it was given
            if self.rec.fail_grading:
                raise RuntimeError("connection to Modal lost")
            kernel = self.files.get("/app/repo/toy/kernel.py", BASELINE.encode()).decode()
            self.graded = True
            hidden = any(layer[2] == "/tests" for layer in self.image.layers)
            speedup = 500.0 if "n * (n + 1)" in kernel else 1.0
            reward = {"reward": 1.0 if speedup > 2 else 0.0, "speedup": speedup, "hard_fail_reasons": [],
                      "tests": {"passed": 5, "total": 5}, "saw_tests": hidden}
            self.logs["verifier/reward.json" if "/tests/test.sh" in script else "loop/dev/reward.json"] = json.dumps(reward).encode()
            out = f"graded\n@@pesflow:grader_ns=123000000\n@@pesflow:strays={self.rec.strays}\n@@pesflow:forged={self.rec.forged}\n"
            return Process(out.encode() if not text else out)
        return Process(b"" if not text else "")


class Recorder:
    def __init__(self):
        self.calls: list[tuple[str, inspect.BoundArguments]] = []
        self.execs: list[tuple[tuple, dict]] = []
        self.sandboxes: list[Sandbox] = []
        self.fail_grading = False
        self.oom = False
        self.peak: int | None = None  # the sandbox's memory.peak, where the kernel keeps one
        self.strays = ""  # what the grader's last line lists as left running ("7:sleep")
        self.forged = ""  # the result files the grader's script found rewritten after it returned
        self.create_delay = 0.0  # seconds Sandbox.create takes (a queue for quota)
        self.trust_out: dict[str, bytes] = {}  # what the guard left in /.pesflow-trust-out
        self.startup_written: list[str] = []  # startup files the grading 'writes' (written.LIST_STARTUP's lines)
        self.startup_texts: dict[str, str] = {}  # and their texts, by path

    def call(self, name: str, real, *args, **kwargs) -> None:  # noqa: ANN001
        # the real SDK's signature must accept exactly what the backend passed
        self.calls.append((name, inspect.signature(real).bind(*args, **kwargs)))

    def named(self, name: str) -> list[inspect.BoundArguments]:
        return [b for n, b in self.calls if n == name]


@pytest.fixture
def rec(monkeypatch) -> Recorder:
    r = Recorder()
    real_create, real_lookup = modal.Sandbox.create, modal.App.lookup
    real_dockerfile, real_registry = modal.Image.from_dockerfile, modal.Image.from_registry

    def lookup(name, **kw):  # noqa: ANN001, ANN202
        r.call("App.lookup", real_lookup, name, **kw)
        return "app-handle"

    def from_dockerfile(path, **kw):  # noqa: ANN001, ANN202
        r.call("Image.from_dockerfile", real_dockerfile, path, **kw)
        return Image(r, ("dockerfile", Path(path), kw))

    def from_registry(tag, **kw):  # noqa: ANN001, ANN202
        r.call("Image.from_registry", real_registry, tag, **kw)
        return Image(r, ("registry", tag))

    def create(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        r.call("Sandbox.create", real_create, *args, **kw)
        time.sleep(r.create_delay)
        sb = Sandbox(r, kw["image"], kw)
        r.sandboxes.append(sb)
        return sb

    monkeypatch.setattr(modal.App, "lookup", staticmethod(lookup))
    monkeypatch.setattr(modal.Image, "from_dockerfile", staticmethod(from_dockerfile))
    monkeypatch.setattr(modal.Image, "from_registry", staticmethod(from_registry))
    monkeypatch.setattr(modal.Sandbox, "create", staticmethod(create))
    return r


def make_evaluator(tmp_path: Path, **modal_cfg: Any) -> Evaluator:
    cfg = EvaluatorConfig(backend="modal", modal=ModalConfig(cache_dir=str(tmp_path / "cache"), **modal_cfg))
    return Evaluator(cfg, tasks_roots=[FIXTURES], log_root=tmp_path / "logs")


def test_image_is_built_from_the_rewritten_dockerfile(rec, tmp_path):
    ev = make_evaluator(tmp_path)
    prepared = ev.prepare(ev.task("kfc/toy-sum"))
    assert rec.named("App.lookup")[0].arguments == {"name": "pesflow-grading", "create_if_missing": True}
    call = rec.named("Image.from_dockerfile")[0].arguments
    path, ctx = Path(call["path"]), Path(call["context_dir"])
    assert path == ctx / ".pesflow-gen/Dockerfile" and call["ignore"] == []
    assert "<<" not in path.read_text() and "RUN . /.pesflow-heredoc/run-10.sh" in path.read_text()
    assert "/opt/heredoc-ran" in (ctx / ".pesflow-gen/run-10.sh").read_text()  # the heredoc's body, as a file
    assert not (ctx / "tests").exists() and not (ctx / "solution").exists()  # the hidden grader never enters the image
    assert len(rec.named("Image.build")) == 1  # built at prepare, so a broken build fails there
    assert prepared.state["dev_engine"] == "score_engine"
    assert ev.backend.baseline_text(prepared, "toy/kernel.py") == BASELINE


def test_a_hidden_grading_goes_in_and_comes_back_and_is_terminated(rec, tmp_path):
    ev = make_evaluator(tmp_path)
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.status == Status.ok and v.speedup == 500.0 and v.backend == "modal" and v.raw["saw_tests"] is True
    assert v.grader_seconds == pytest.approx(0.123)
    sb = rec.sandboxes[-1]
    assert sb.files["/app/repo/toy/kernel.py"].decode() == FAST  # the candidate went in as a tar
    kw = rec.named("Sandbox.create")[-1].arguments
    assert kw["args"] == ("sleep", "infinity") and kw["block_network"] is True
    assert kw["gpu"] is None and kw["cpu"] == (1.0, 1.0) and kw["memory"] == (1024, 1024)  # the task's [environment], as limits
    assert kw["timeout"] == 60 + 600  # the grading's limit plus start-up: the sandbox cannot outlive it
    grader = [k for a, k in rec.execs if "@@pesflow:grader_ns=" in a[-1]][-1]
    assert grader["timeout"] == 60 and grader["env"]["KERNELBENCH_VERIFY_MODE"] == "candidate"
    assert ("dir", str(FIXTURES / "kfc/toy-sum/task/tests"), "/tests") in sb.image.layers
    assert sb.terminated == 1
    assert "graded on a Modal CPU sandbox" in v.message and "anchor calibrated on CPU lane" in v.message
    assert (Path(v.log_dir) / "logs/verifier/reward.json").is_file()


def test_tests_only_for_the_hidden_grader_and_the_reviewers_patch_for_oracle(rec, tmp_path):
    ev = make_evaluator(tmp_path)
    dev = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="dev")
    assert dev.status == Status.ok and dev.raw["saw_tests"] is False
    assert not any(layer[2] == "/tests" for layer in rec.sandboxes[-1].image.layers)
    oracle = ev.evaluate("kfc/toy-sum", mode="oracle", grader="hidden")
    layers = rec.sandboxes[-1].image.layers
    assert ("file", str(FIXTURES / "kfc/toy-sum/task/solution/oracle.patch"), "/.pesflow-reviewer/oracle.patch") in layers
    assert oracle.raw["saw_tests"] is True
    assert all(sb.terminated == 1 for sb in rec.sandboxes if "gpu" in sb.kwargs)  # every grading's sandbox


def test_the_sandbox_is_terminated_even_when_grading_raises(rec, tmp_path):
    ev = make_evaluator(tmp_path)
    rec.fail_grading = True
    v = ev.evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert v.status == Status.infra_error and "connection to Modal lost" in v.message and "tried 2 times" in v.message
    graded = [sb for sb in rec.sandboxes if "gpu" in sb.kwargs]  # the grading sandboxes, not the reference
    assert len(graded) == 2 and all(sb.terminated == 1 for sb in graded)  # retried once, each one terminated
    ev.close()
    assert all(sb.terminated == 1 for sb in rec.sandboxes)  # the reference too


def test_gpu_type_and_count_come_from_config_and_task(rec, tmp_path):
    task = load_task("kfc/toy-sum", [FIXTURES]).model_copy(deep=True)
    task.toml.environment.gpus = 2
    backend = ModalBackend(ModalConfig(gpu="A100-80GB", cache_dir=str(tmp_path)))
    from evaluator.backends.base import GradeRequest, Prepared

    prepared = Prepared(task=task, key="k", seconds=0, cached=False)

    def request(env: dict[str, str]) -> GradeRequest:
        return GradeRequest(files={}, grader="hidden", env=env, reviewer_files={}, timeout=100, out_dir=tmp_path)

    assert backend.sandbox_settings(prepared, request({}))["gpu"] == "A100-80GB!:2"  # pinned: no other type
    assert backend.sandbox_settings(prepared, request({"KERNELBENCH_DEVICE": "cpu"}))["gpu"] is None
    # Modal has no H20: an anchor measured there is flagged; one from the same GPU family is not
    task.anchor.calibrated_on = "NVIDIA H20 (pesflow calibrate)"
    notes = hardware_notes(task, "H100:1", "NVIDIA H100 80GB HBM3")
    assert notes[0] == "graded on Modal GPU NVIDIA H100 80GB HBM3" and "H20" in notes[1] and "not comparable" in notes[1]
    task.anchor.calibrated_on = "NVIDIA H100 SXM"
    assert hardware_notes(task, "H100:1", "NVIDIA H100 80GB HBM3") == ["graded on Modal GPU NVIDIA H100 80GB HBM3"]


def test_registry_images_and_a_missing_sdk(rec, tmp_path, monkeypatch):
    ev = make_evaluator(tmp_path, image="registry")
    ev.prepare(ev.task("kfc/toy-sum"))
    assert rec.named("Image.from_registry")[0].arguments["tag"] == "pesflow/toy-sum:test"
    import builtins

    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "modal" else real_import(name, *a, **k))
    v = Evaluator(EvaluatorConfig(backend="modal", infra_retries=0), tasks_roots=[FIXTURES], log_root=tmp_path / "l2") \
        .evaluate("kfc/toy-sum", mode="noop", grader="hidden")
    assert v.status == Status.infra_error and "pip install 'pesflow[modal]'" in v.message
    assert re.search(r"modal token new", v.message)


def test_parallel_wrapper_passes_modal_through(rec, tmp_path):
    backend = ModalBackend(ModalConfig(cache_dir=str(tmp_path)))
    assert ParallelBackend(backend).name == "modal"


# ------------------------------------------------------------------ issue 21, item 6
from evaluator.backends.base import BackendUnavailable, GradeRequest, Prepared  # noqa: E402
from evaluator.backends.in_container import grader_script, left_running  # noqa: E402


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a pid namespace needs root and unshare")
def test_the_wrapper_kills_the_graders_leftovers_but_never_the_sandboxs_own_command():
    """As in a Modal sandbox: pid 1 an init, its child the sandbox's command. The grader leaves a
    process behind; it is listed and killed, and the sandbox's command lives on (with `kill -9 -1`
    it died, the sandbox finished, and the execs after the grader raised)."""
    def run(spare: bool) -> str:
        script = grader_script("sleep 300 & sleep 0.1; echo graded", "", spare_existing=spare)
        outer = ("sleep infinity & cmd=$!; sh -c " + shlex.quote(script) + "; echo rc=$?; sleep 0.2; "
                 "for d in /proc/[0-9]*; do read -r c < $d/comm && echo \"left:$c\"; done; kill -0 $cmd 2>/dev/null && echo CMD_ALIVE")
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", outer],
                              capture_output=True, text=True, timeout=30).stdout
    out = run(spare=True)
    assert "graded" in out and "rc=0" in out and [s.split(":")[1] for s in left_running(out)] == ["sleep"]
    assert "CMD_ALIVE" in out and out.count("left:sleep") == 1  # the command only: the stray is gone
    assert "CMD_ALIVE" not in run(spare=False)  # the docker wrapper's kill -9 -1: what Modal must not get


def _gpu_task(gpus: int = 1):  # noqa: ANN202
    task = load_task("kfc/toy-sum", [FIXTURES]).model_copy(deep=True)
    task.toml.environment.gpus = gpus
    return task


def test_a_gpu_grading_never_reads_or_hides_the_drivers_gpus(rec, tmp_path):
    """This machine has no GPU, and the driver is told it has GPU 3: a GPU task still goes to
    Modal, on the pinned type, and the sandbox's GPU is not renamed by the driver's devices."""
    cfg = EvaluatorConfig(backend="modal", modal=ModalConfig(cache_dir=str(tmp_path / "cache")))
    backend = ParallelBackend(ModalBackend(cfg.modal), workers=2, gpu_devices=[3])
    ev = Evaluator(cfg, tasks_roots=[FIXTURES], backend=backend, log_root=tmp_path / "logs")
    v = ev.evaluate(_gpu_task(), candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.status == Status.ok and v.speedup == 500.0
    assert rec.named("Sandbox.create")[-1].arguments["gpu"] == "H100!:1"
    grader = [k for a, k in rec.execs if "@@pesflow:grader_ns=" in a[-1]][-1]
    assert "CUDA_VISIBLE_DEVICES" not in grader["env"] and grader["env"]["KERNELBENCH_DEVICE"] == "cuda"
    assert "graded on Modal GPU NVIDIA H100 80GB HBM3" in v.message


def test_cpu_memory_and_gpu_reach_modal_as_limits_and_a_pinned_type(tmp_path):
    """Read through the SDK's own conversion to its wire format: a bare number is a request with
    no limit (max 0), a (request, limit) pair is capped; "!" stays on the type Modal is sent."""
    from modal._resources import convert_fn_config_to_resources_config

    backend = ModalBackend(ModalConfig(gpu="A100-80GB", cache_dir=str(tmp_path)))
    prepared = Prepared(task=_gpu_task(2), key="k", seconds=0, cached=False)
    s = backend.sandbox_settings(prepared, GradeRequest(files={}, grader="hidden", env={}, reviewer_files={}, timeout=100,
                                                        out_dir=tmp_path))
    res = convert_fn_config_to_resources_config(cpu=s["cpu"], memory=s["memory"], gpu=s["gpu"])
    assert (res.milli_cpu, res.milli_cpu_max, res.memory_mb, res.memory_mb_max) == (1000, 1000, 1024, 1024)
    assert (res.gpu_config.gpu_type, res.gpu_config.count) == ("A100-80GB!", 2)
    bare = convert_fn_config_to_resources_config(cpu=1.0, memory=1024, gpu=None)
    assert bare.milli_cpu_max == 0 and bare.memory_mb_max == 0  # what the backend used to send: no limit at all
    inspect.signature(modal.Sandbox.create).bind("sleep", "infinity", **s)  # the SDK takes every setting
    assert ModalBackend(ModalConfig(gpu="H100", exact_gpu=False)).gpu_type() == "H100"


def test_hardware_notes_compare_what_nvidia_smi_named():
    task = load_task("kfc/toy-sum", [FIXTURES]).model_copy(deep=True)
    task.anchor.calibrated_on = "NVIDIA H100 SXM"
    served = hardware_notes(task, "H100:1", "NVIDIA H200")  # an unpinned request, served on another type
    assert served[0] == "graded on Modal GPU NVIDIA H200" and "served a H200 for a H100 request" in served[1]
    assert "not comparable" in served[2]
    task.anchor.calibrated_on = "NVIDIA H20"
    assert "not comparable" in hardware_notes(task, "H200!:1", "NVIDIA H200")[-1]  # H20 is not a prefix match of H200


def test_an_oom_in_the_sandbox_is_the_candidates_out_of_memory(rec, tmp_path):
    rec.oom = True
    v = make_evaluator(tmp_path).evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.status == Status.hard_fail and v.hard_fail_reasons[0] == "out_of_memory" and v.reward == 0


def test_an_oom_far_under_the_limit_and_a_leftover_process_follow_the_one_grading_policy(rec, tmp_path):
    # as the local and docker backends (evaluator/grading_policy.py): the machine's OOM is not the candidate's
    rec.oom, rec.peak = True, 100 << 20  # 100 MiB of the toy's 1024
    v = make_evaluator(tmp_path).evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.status == Status.infra_error and "the machine ran out of memory" in v.message
    rec.oom, rec.peak, rec.strays = False, None, "7:sleep"
    v = make_evaluator(tmp_path).evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.hard_fail_reasons[0] == "background_process" and "7:sleep" in v.raw["pesflow_limits"]["background_process"]
    v = make_evaluator(tmp_path / "kill", stray_processes="kill").evaluate(
        "kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.status == Status.ok and v.reward > 0  # killed with the sandbox, the grading stands


def test_a_sandbox_never_scheduled_stops_the_command_with_one_line(rec, tmp_path, monkeypatch, capsys):
    from agent.cli import main

    rec.create_delay = 3.0  # a workspace at its quota: Modal queues the sandbox
    monkeypatch.chdir(tmp_path)
    rc = main(["evaluate", "kfc/toy-sum", "--mode", "noop", "--grader", "hidden", "--backend", "modal", "--tasks-root",
               str(FIXTURES), "--set", "evaluator.modal.queue_timeout_sec=0.3", "--set", f"evaluator.modal.cache_dir={tmp_path}"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # (a line before it says where the package came from)
    # the command gave up before Modal got round to the sandbox: none had arrived when it returned
    arrived_before_return = len(rec.sandboxes)
    assert rc == 3 and arrived_before_return == 0
    assert last.startswith("pesflow evaluate: Modal did not schedule a sandbox (CPU) within 0.3 s") and "queue_timeout_sec" in last
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (rec.sandboxes and rec.sandboxes[-1].terminated):
        time.sleep(0.05)
    assert rec.sandboxes and all(sb.terminated == 1 for sb in rec.sandboxes)  # the late one, terminated on arrival
    rec.create_delay = 0.0
    monkeypatch.setattr(modal.Sandbox, "create", staticmethod(
        lambda *a, **k: (_ for _ in ()).throw(modal.exception.ResourceExhaustedError("Insufficient capacity"))))
    with pytest.raises(BackendUnavailable, match="no capacity"):
        make_evaluator(tmp_path).evaluate("kfc/toy-sum", mode="noop", grader="hidden")


def test_the_modal_floor_is_where_the_sdk_calls_used_came_in():
    """Image.build and Sandbox.exec(env=) first appear in modal 1.2 (read in 1.1.4's and 1.2.0's
    sources): pyproject's floor must not promise less, and the installed SDK must have both."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    floors = re.findall(r'"modal>=([\d.]+)"', text)
    assert floors and all(tuple(map(int, f.split("."))) >= (1, 2) for f in floors)
    assert hasattr(modal.Image, "build") and "env" in inspect.signature(modal.Sandbox.exec).parameters


def test_the_trust_guard_goes_in_and_what_it_saw_comes_back(rec, tmp_path):
    """The guard's files into every site-packages folder the image has, its config (no socket
    reaches a sandbox) into /.pesflow-trust; the event files a real guard wrote come back from
    /.pesflow-trust-out and decide the trust verdict."""
    from tests.test_trust_guard import guarded  # the real guard, run on a clock-replacing kernel
    guarded(tmp_path / "g", "import time\ntime.perf_counter = lambda: 0.0\ndef entry(x):\n    return x\n")
    rec.trust_out = {p.name: p.read_bytes() for p in (tmp_path / "g" / "out").glob("events-*.jsonl")}
    assert rec.trust_out
    ev = make_evaluator(tmp_path)
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.status == Status.ok and v.trust.suspect and any(r.startswith("timer_replaced") for r in v.trust.reasons), v.trust
    sb = rec.sandboxes[-1]
    for d in SITE_DIRS:
        assert all(f"{d}/{name}" in sb.files for name in instrument.GUARD_FILES), sorted(sb.files)
    config = json.loads(sb.files[f"{instrument.CONFIG_DIR}/config.json"])
    assert config["socket"] is None and config["candidate_paths"] == {"toy/kernel.py": "/app/repo/toy/kernel.py"}
    # in the grading the screen watched (the official one has nothing of pesflow's in it)
    kept = Path(v.log_dir) / watch.WATCHED / "trust"
    assert kept.is_dir() and any(kept.glob("events-*.jsonl")) and not (Path(v.log_dir) / "trust").exists()
    # an honest grading's guard says nothing against it
    guarded(tmp_path / "h", "def entry(x):\n    return x\n")
    rec.trust_out = {p.name: p.read_bytes() for p in (tmp_path / "h" / "out").glob("events-*.jsonl")}
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST + "# honest\n"}), grader="hidden")
    assert v.status == Status.ok and not v.trust.suspect, v.trust
    assert v.trust.checks["runtime"]["processes"] >= 1, v.trust.checks


def test_a_startup_file_the_grading_wrote_unseen_is_found_after_the_grader(rec, tmp_path):
    """A sitecustomize a shell put on the path (no guard event names it) shows in the listings
    taken before and after the grader: suspect. A checkpoint's .pth outside a site folder, and
    the guard's own files already there before, are not."""
    ev = make_evaluator(tmp_path)
    rec.startup_written = ["/app/repo/ckpt/model.pth\t1700000100.0", f"{SITE_DIRS[0]}/pesflow_guard.py\t1700000000.5"]
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST}), grader="hidden")
    assert v.status == Status.ok and not v.trust.suspect, v.trust
    rec.startup_written = ["/app/repo/sitecustomize.py\t1700000100.0"]
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST + "# again\n"}), grader="hidden")
    assert v.status == Status.ok and v.trust.suspect, v.trust
    assert any(r.startswith("guard_evasion: /app/repo/sitecustomize.py") for r in v.trust.reasons), v.trust.reasons
    listings = [a for a, _ in rec.execs if a[-1] == written.LIST_STARTUP]
    assert len(listings) == 8  # before and after each grading: the official one and the watched one, twice
    # one whose whole text the package's grader scripts spell out (a line of its tests/grade.py) is the grader's
    rec.startup_written = ["/tmp/tmp.a1/sitecustomize.py\t1700000100.0", "/tmp/tmp.a2/sitecustomize.py\t1700000100.0"]
    own = "import importlib.util, json, math, os, subprocess, sys, time\n"
    rec.startup_texts = {"/tmp/tmp.a1/sitecustomize.py": own}
    v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": FAST + "# own\n"}), grader="hidden")
    assert v.trust.suspect and [r.split(",")[0] for r in v.trust.reasons] == ["guard_evasion: /tmp/tmp.a2/sitecustomize.py"], v.trust
    assert "/tmp/tmp.a1/sitecustomize.py" in v.trust.checks["runtime"]["graders_own_files"][0], v.trust.checks
