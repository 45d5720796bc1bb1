"""The modal backend: each candidate graded in a fresh Modal Sandbox of the task's image.

NOT EXERCISED END TO END: nothing here can reach Modal. tests/test_modal_backend.py checks
everything up to the SDK's entry points (which it substitutes): the image, the sandbox's
settings, what goes in and out, and that the sandbox is always terminated.

Prepare: the image is Modal's build of environment/Dockerfile, with the same build context
as the docker backend (tests/ and solution/ left out, heredocs rewritten), or the task's
registry image ([environment].docker_image) with evaluator.modal.image=registry. It is built
at prepare time, so a broken build is an infra error there and not in the first grading.
A small reference sandbox answers what the baseline holds (scope files, the dev engine).

Grade: a new sandbox per candidate (Modal's start-up is paid per candidate; isolation is a
new machine), network blocked, the task's cpus and memory each as (request, limit) (a bare
number is only a reservation: a grading could use more, and its out-of-memory would never be
the candidate's), for GPU tasks the configured GPU type pinned ("H100!") with the task's count.
A sandbox Modal does not schedule within evaluator.modal.queue_timeout_sec (a workspace at its
quota queues it) stops the command: BackendUnavailable, one line, exit 3. tests/ is added to the
sandbox's image only for the hidden
grader (and the reviewer's patch for oracle/negative), the candidate's files go in as a tar,
the grader runs as one exec with the grading's timeout (the sandbox's own timeout backs it),
its leftovers are killed by pid (never `kill -9 -1`: that kills the sandbox's own command, and
the execs that follow would find the sandbox finished), /logs comes back as regular files, and
the sandbox is terminated whatever happened.

Modal offers no H20: the verdict's message names the GPU nvidia-smi saw in the sandbox and
flags a task whose anchor was calibrated on other hardware (its reward is then not comparable).
A GPU grading sent here never reads the driver's GPUs (capabilities: gpus="remote").

The trust screen's guard (evaluator/trust/instrument.py) goes in with the candidate's files: its
files into every site-packages folder of the image (found at prepare), its config and the
probes' inputs into /.pesflow-trust; the guard's event files come back from /.pesflow-trust-out.
No socket reaches this side from a sandbox, so the events are the files alone: the guard names
candidate code that opens its folders (guard_evasion), but a process it does not watch could
rewrite them (README). The probes run as a grading of their own in a fresh sandbox of the same image.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import shlex
import shutil
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from evaluator.backends import archive
from evaluator.backends.base import (BackendUnavailable, Capabilities, GradeRequest, GradeRun, InfraError, Prepared,
                                     command_for)
from evaluator.backends.build_context import build_context
from evaluator.backends.in_container import forged_results, grader_script, grader_seconds, left_running
from evaluator.config import ModalConfig
from evaluator.grading_policy import grading_result
from evaluator.grading_records import GradingReport
from evaluator.dockerfile import DockerfileError
from evaluator.sandbox import BoundedSink
from evaluator.task import DEV_ENGINES, NOT_IN_IMAGE, Task, dev_engine_of, package_hash
from evaluator.trust import collect, instrument, written
from evaluator.verdict import read_reward_file

BACKEND_VERSION = "modal-2"
REVIEWER = "/.pesflow-reviewer"
REFERENCE_TIMEOUT_SEC = 3600


def _short(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


class ModalBackend:
    name = "modal"
    # each grading's sandbox brings its GPUs: the driver's are neither read nor required
    capabilities = Capabilities(gpus="remote")

    def __init__(self, config: ModalConfig | None = None, sdk: Any = None):
        self.config = config or ModalConfig()
        self.cache = Path(self.config.cache_dir).expanduser().resolve() / "modal"
        self._sdk_module = sdk
        self._lock = threading.Lock()
        self._app: Any = None
        self._images: dict[str, Any] = {}
        self._refs: dict[str, Any] = {}
        self._baseline: dict[tuple[str, str], str | None] = {}

    def sdk(self) -> Any:
        if self._sdk_module is None:
            try:
                import modal  # the SDK is an extra: pip install 'pesflow[modal]'
            except ImportError:
                raise InfraError("the modal backend needs the Modal SDK: pip install 'pesflow[modal]', "
                                 "then `modal token new` (or MODAL_TOKEN_ID / MODAL_TOKEN_SECRET)") from None
            self._sdk_module = modal
        return self._sdk_module

    def _app_handle(self) -> Any:
        with self._lock:
            if self._app is None:
                self._app = self.sdk().App.lookup(self.config.app_name, create_if_missing=True)
            return self._app

    # ---------------------------------------------------------------- prepare
    def _key(self, task: Task) -> str:
        h = hashlib.sha256()
        h.update(package_hash(task.root, exclude_top=NOT_IN_IMAGE).encode())
        h.update(f"{BACKEND_VERSION} {self.config.image}".encode())
        return h.hexdigest()[:20]

    def prepare(self, task: Task) -> Prepared:
        start = time.monotonic()
        key = self._key(task)
        warnings: list[str] = []
        try:
            app = self._app_handle()
            image = self._image(task, key, warnings).build(app)
            self._images[key] = image
            ref = self._reference(key)
            found = _run(ref, "sh", "-c", 'for f in "$@"; do [ -f "$f" ] && echo "$f"; done', "pesflow",
                         *DEV_ENGINES)[1].split()
            sites = _run(ref, "sh", "-c", instrument.FIND_SITE_DIRS)[1].split()  # where the trust screen's guard goes
        except BackendUnavailable:
            raise
        except (InfraError, DockerfileError) as e:
            raise InfraError(str(e)) from None
        except Exception as e:  # the SDK's errors (auth, quota, build, network) come in many types
            raise InfraError(f"Modal could not prepare {task.name}: {_short(e)}") from None
        dev_engine = dev_engine_of(set(found))
        state = {"dev_engine": dev_engine, "backend": BACKEND_VERSION, "image": self.config.image, "task": task.name,
                 "site_dirs": sorted(set(sites))}
        return Prepared(task=task, key=key, seconds=round(time.monotonic() - start, 3), cached=False, warnings=warnings,
                        state=state)

    def _image(self, task: Task, key: str, warnings: list[str]) -> Any:
        modal = self.sdk()
        if self.config.image == "registry":
            tag = task.toml.environment.docker_image
            if not tag:
                raise InfraError(f"{task.name} names no [environment].docker_image; use "
                                 "evaluator.modal.image=dockerfile")
            return modal.Image.from_registry(tag)
        ctx = build_context(task)
        home = self.cache / key / "context"
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(ctx.tar)) as tf:
            archive.extract_tree(tf, home)
        if ctx.rewritten.steps:
            warnings.append(f"{ctx.rewritten.steps} BuildKit heredoc step(s) rewritten as "
                            "COPY + RUN of a generated file")
        # the context is already filtered: Modal must not apply a .dockerignore of its own
        return modal.Image.from_dockerfile(home / ctx.dockerfile, context_dir=home, ignore=[])

    def _reference(self, key: str) -> Any:
        with self._lock:
            ref = self._refs.get(key)
        if ref is not None and ref.poll() is None:
            return ref
        ref = self._create(self._images[key], {"timeout": REFERENCE_TIMEOUT_SEC, "block_network": True})
        with self._lock:
            self._refs[key] = ref
        return ref

    def baseline_text(self, prepared: Prepared, rel: str) -> str | None:
        k = (prepared.key, rel)
        if k not in self._baseline:
            try:
                rc, out = _run(self._reference(prepared.key), "cat", f"{prepared.task.source_root}/{rel}")
            except Exception as e:
                raise InfraError(f"Modal could not read the baseline of {rel}: {_short(e)}") from None
            self._baseline[k] = out if rc == 0 else None
        return self._baseline[k]

    # ---------------------------------------------------------------- grade
    def sandbox_settings(self, prepared: Prepared, request: GradeRequest) -> dict[str, Any]:
        """Everything Sandbox.create is given, besides the image and the app."""
        env = prepared.task.toml.environment
        on_cpu = request.env.get("KERNELBENCH_DEVICE") == "cpu"
        gpus = 0 if on_cpu else prepared.task.gpus
        out: dict[str, Any] = {"timeout": int(math.ceil(request.timeout + self.config.startup_timeout_sec)),
                               "block_network": True, "gpu": f"{self.gpu_type()}:{gpus}" if gpus else None}
        cpu, memory = self.config.cpu or env.cpus, self.config.memory_mb or env.memory_mb
        # (request, limit): a bare number only reserves, and the grading could take more
        if cpu:
            out["cpu"] = (float(cpu), float(cpu))
        if memory:
            out["memory"] = (int(memory), int(memory))
        return out

    def gpu_type(self) -> str:
        """The GPU type asked of Modal; pinned with "!" unless exact_gpu is off (Modal may serve
        an unpinned H100 request on an H200, and a timing is only comparable on one type)."""
        t = self.config.gpu.rstrip("!")
        return f"{t}!" if self.config.exact_gpu else t

    def _create(self, image: Any, settings: dict[str, Any]) -> Any:
        """Sandbox.create, waiting at most queue_timeout_sec for Modal to schedule it (the SDK's
        own wait is long, and older SDKs wait without bound). A sandbox that turns up after the
        wait was given up is terminated at once: nothing is left to pay for."""
        box: dict[str, Any] = {}
        done, lock = threading.Event(), threading.Lock()

        def make() -> None:
            try:
                sb = self.sdk().Sandbox.create("sleep", "infinity", app=self._app_handle(), image=image, **settings)
            except BaseException as e:  # handed to the waiting thread
                box["error"] = e
                sb = None
            with lock:
                if box.get("abandoned") and sb is not None:
                    _terminate(sb)
                else:
                    box["sb"] = sb
                done.set()

        threading.Thread(target=make, name="pesflow-modal-create", daemon=True).start()
        wait = self.config.queue_timeout_sec
        if not done.wait(wait):
            with lock:
                if not done.is_set():
                    box["abandoned"] = True
                    raise BackendUnavailable(
                        f"Modal did not schedule a sandbox ({settings.get('gpu') or 'CPU'}) within {wait:g} s "
                        "(a quota or capacity queue); raise evaluator.modal.queue_timeout_sec or try again later")
        err = box.get("error")
        if err is not None:
            if type(err).__name__ == "ResourceExhaustedError":  # modal.exception's: no capacity, after its own wait
                raise BackendUnavailable(f"Modal has no capacity for a sandbox ({settings.get('gpu') or 'CPU'}): "
                                         f"{_short(err)}; try again later, or ask for another type with "
                                         "evaluator.modal.gpu") from None
            raise err
        return box["sb"]

    def grade(self, prepared: Prepared, request: GradeRequest) -> GradeRun:
        task = prepared.task
        start = time.monotonic()
        command, results = command_for(request, prepared)
        image = self._images[prepared.key]
        if request.grader == "hidden":
            image = image.add_local_dir(str(task.tests_dir), "/tests")  # only the hidden grader's sandbox has them
        for name, host in request.reviewer_files.items():
            image = image.add_local_file(str(host), f"{REVIEWER}/{name}")
        settings = self.sandbox_settings(prepared, request)
        sb = None
        try:
            sb = self._create(image, settings)
            if request.trust is not None:
                self._put(sb, instrument.guard_tar_files(prepared.state.get("site_dirs") or [],
                                                         {**request.trust, "socket": None}, request.trust_files))
                _run(sb, "mkdir", "-p", "-m", "1777", instrument.OUT_DIR)
            deletions = self._write_candidate(sb, task.source_root, request.files)
            if deletions:
                command = f"rm -f -- {' '.join(shlex.quote(p) for p in deletions)}; {command}"
            scan = request.trust is not None or request.scan_writes
            startup = _run(sb, "sh", "-c", written.LIST_STARTUP)[1] if scan else ""
            rc, output, timed_out = self._run_grader(sb,
                                                     grader_script(command, "", spare_existing=True, results=results),
                                                     request)
            (request.out_dir / "grader_output.log").write_text(output)
            logs = request.out_dir / "logs"
            _, tar = _run(sb, "sh", "-c", "cd /logs 2>/dev/null && tar -cf - . || true", text=False)
            archive.extract_regular(io.BytesIO(tar), logs, limit=self.config.max_log_bytes)
            trust_events = []
            if request.trust is not None:  # the guard's files (and the probes' probe.json)
                _, tar = _run(sb, "sh", "-c", f"cd {instrument.OUT_DIR} 2>/dev/null && tar -cf - . || true", text=False)
                archive.extract_regular(io.BytesIO(tar), request.out_dir / "trust", limit=64 << 20)
                trust_events = collect.read_event_files(request.out_dir / "trust")
            if scan:  # startup files the grading wrote, whatever wrote them, with their text (trust/written.py)
                found = written.listing_changes(startup, _run(sb, "sh", "-c", written.LIST_STARTUP)[1])
                trust_events += written.events(found,
                                               [None if removed
                                                else written.text_of(_run(sb, *written.READ_TEXT, path, text=False)[1])
                                               for path, removed in found])
            # the memory cgroup's OOM kills (a fresh sandbox: any is this grading's), and the GPU's name
            probe = _run(sb, "sh", "-c", "grep -h '^oom_kill ' /sys/fs/cgroup/memory.events 2>/dev/null; "
                         "echo \"memory_peak $(cat /sys/fs/cgroup/memory.peak 2>/dev/null)\"; "
                         + ("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1"
                            if settings["gpu"] else "true"))[1]
            oom = sum(int(n) for n in re.findall(r"^oom_kill (\d+)", probe, re.M))
            peaks = re.findall(r"^memory_peak (\d+)", probe, re.M)
            peak = int(peaks[0]) if peaks else None  # a kernel without memory.peak: unknown, so the candidate's
            gpu_name = "\n".join(ln for ln in probe.splitlines()
                                 if not ln.startswith(("oom_kill ", "memory_peak"))).strip()
        except (InfraError, BackendUnavailable):
            raise
        except Exception as e:
            raise InfraError(f"Modal failed while grading: {_short(e)}") from None
        finally:
            if sb is not None:
                _terminate(sb)
        reward = None
        for rel in results:
            reward = read_reward_file(logs / rel[len("/logs/"):]) if rel.startswith("/logs/") else None
            if reward is not None:
                break
        memory = settings.get("memory")
        report = GradingReport(rc, output, time.monotonic() - start, reward=reward, timed_out=timed_out,
                               grader_seconds=grader_seconds(output), oom_killed=bool(oom), memory_peak_bytes=peak,
                               memory_mb=memory[1] if memory else None,
                               strays=left_running(output) if not timed_out else [],
                               forged=bool(forged_results(output)),
                               notes=hardware_notes(task, settings["gpu"], gpu_name), trust_events=trust_events)
        return grading_result(report, self.config.stray_processes)

    def _write_candidate(self, sb: Any, root: str, files: dict[str, str | None]) -> list[str]:
        self._put(sb,
                  {f"{root}/{rel}": (text.encode(), 0o644, 0, 0) for rel, text in files.items() if text is not None})
        return [f"{root}/{rel}" for rel, text in files.items() if text is None]

    def _put(self, sb: Any, put: dict[str, tuple[bytes, int, int, int]]) -> None:
        """Files into the sandbox, as one tar."""
        if put:
            p = sb.exec("tar", "-xf", "-", "-C", "/", text=False)
            p.stdin.write(archive.files_tar(put))
            p.stdin.write_eof()
            p.stdin.drain()
            if p.wait() != 0:
                raise InfraError("the sandbox refused the grading's files (tar -x failed)")

    def _run_grader(self, sb: Any, script: str, request: GradeRequest) -> tuple[int, str, bool]:
        sink = BoundedSink(self.config.max_log_bytes)
        t0 = time.monotonic()
        p = sb.exec("sh", "-c", "exec 2>&1\n" + script, env=request.env, timeout=int(math.ceil(request.timeout)),
                    text=False)
        for chunk in p.stdout:
            sink.feed(chunk if isinstance(chunk, bytes) else str(chunk).encode())
        rc = p.wait()
        timed_out = time.monotonic() - t0 >= request.timeout and rc != 0
        return rc, sink.text(), timed_out

    def close(self) -> None:
        with self._lock:
            refs, self._refs = list(self._refs.values()), {}
        for ref in refs:
            _terminate(ref)


def _terminate(sb: Any) -> None:
    try:
        sb.terminate()
    except Exception:  # already gone: nothing left to pay for
        pass


def _run(sb: Any, *argv: str, text: bool = True) -> tuple[int, Any]:
    """One command in a sandbox, its exit status and its whole stdout."""
    p = sb.exec(*argv, text=text)
    out = p.stdout.read()
    return p.wait(), out


def gpu_model(text: str) -> str:
    """The model token of a GPU's name or type: "NVIDIA H100 80GB HBM3" -> "H100", "H100!:2" ->
    "H100", "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA H20" -> "H20" (never a prefix of H200)."""
    for word in re.split(r"[\s:!-]+", text.upper()):
        if re.fullmatch(r"[A-Z]{1,2}\d{1,4}[A-Z]?", word):
            return word
    return ""


def hardware_notes(task: Task, gpu_spec: str | None, gpu_name: str) -> list[str]:
    """What the verdict's message says about where it was graded, and whether the anchor fits:
    what nvidia-smi named in the sandbox is compared, not what was asked for (an unpinned
    request may be served on another type)."""
    where = f"Modal GPU {gpu_name or gpu_spec}" if gpu_spec else "a Modal CPU sandbox"
    notes = [f"graded on {where}"]
    asked, seen = gpu_model(gpu_spec or ""), gpu_model(gpu_name)
    if gpu_spec and seen and asked and seen != asked:
        notes.append(f"Modal served a {seen} for a {asked} request (pin it: evaluator.modal.exact_gpu=true)")
    anchor_hw = task.anchor.calibrated_on
    here = seen or asked
    if task.anchor.value is not None and anchor_hw and not (here and here == gpu_model(anchor_hw)):
        notes.append(f"anchor calibrated on {anchor_hw}, not here: the reward is not comparable "
                     "(re-measure it with `pesflow calibrate --set evaluator.backend=modal`)")
    return notes
