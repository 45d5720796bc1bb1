"""The local backend: a task's image reproduced on the host's own software, no container engine.

Prepare (once per package content): the Dockerfile is replayed into the package's image layer
(evaluator/backends/local_build.py). Grade (per candidate): in fresh mount, pid, net, UTS and
IPC namespaces, the sandbox's root is laid out from an allowlist (evaluator/backends/local_root.py):
the image layer over the host's system folders and the stand-in python, read-only, with only
the writable paths (the source tree, /logs, HOME, ...) and the scratch folders on a throwaway,
size-capped scratch; the candidate's files go into the source tree's throwaway layer; tests/ is
bound read-only at /tests only for the hidden grader; the grader runs chrooted without the
capabilities that would undo any of it, with the network off; its /logs are copied out.
Reset = a new scratch, so nothing one candidate leaves can reach the next.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time
from pathlib import Path
from typing import Any

from evaluator import isolation, sandbox, supervise
from evaluator.backends.base import GradeRequest, GradeRun, InfraError, Prepared, command_for
from evaluator.backends.local_build import READY, Build, last_line
from evaluator.backends import local_scratch
from evaluator.backends.local_probe import LiveProber
from evaluator.backends.local_folders import grading_folder, remove_tree, sweep_folders
from evaluator.backends.local_root import Layout, RootError, RootPlan, bind_lines, make_identity, make_skeleton, script
from evaluator.backends.standin import StandIn, StandInError, discover, stand_in_fault
from evaluator.config import LocalConfig
from evaluator.hardware import gpu_binds
from evaluator.grading_policy import failed_verdict, grading_result
from evaluator.grading_records import GradingReport
from evaluator.limits import HOST_OUT_OF_MEMORY, OUT_OF_MEMORY, Limits, sweep_leftovers, unenforced_note
from evaluator.task import BUNDLED_TASKS, NOT_IN_IMAGE, Task, package_hash
from evaluator.trust import collect, instrument, written
from evaluator.verdict import read_reward_file

BACKEND_VERSION = "local-8"  # bump to invalidate prepared layers when the replay or the root changes
PESFLOW_TREE = BUNDLED_TASKS.parent
EROFS = "Read-only file system"
# The warm probe's imports (torch's some 0.5 GiB) count in the grading's memory limit: beside the
# grader only where that leaves it room (every package of the benchmark allows 16 GiB or more),
# else started after it.
WARM_MIN_MEMORY_MB = 4096


class LocalBackend:
    name = "local"

    def __init__(self, config: LocalConfig | None = None, cache_dir: Path | None = None,
                 extra_hidden: list[Path] = (),  # type: ignore[assignment]
                 writable: list[str] = ()):  # type: ignore[assignment]
        self.config = config or LocalConfig()
        self.writable = list(writable)  # evaluator.writable_paths
        self.cache = Path(cache_dir or self.config.cache_dir).expanduser().resolve() / "local"
        # Never shown to a candidate, even when the stand-in python's paths would hold them (a
        # folder holding one is left out whole: an ordinary user's home, e.g., is never bound).
        self.private = [PESFLOW_TREE, self.cache.parent, *(Path(p).resolve() for p in extra_hidden),
                        *(Path(p).expanduser() for p in HOME_SECRETS)]
        self._swept = False

    # ---------------------------------------------------------------- helpers
    def stand_in(self) -> StandIn:
        python = self.config.python or os.path.abspath(sys.executable)
        try:
            return discover(python, tuple(str(p) for p in self.private))
        except StandInError as e:
            raise InfraError(str(e)) from None

    def layout(self, task: Task | None, home: str = "/root") -> Layout:
        """The root's areas; with a task, also what its gradings may write."""
        writable = task.writable_paths([home, *self.writable]) if task is not None else []
        return Layout.make(self.stand_in(), writable)

    def _key(self, task: Task) -> str:
        h = hashlib.sha256()
        h.update(package_hash(task.root, exclude_top=NOT_IN_IMAGE).encode())
        h.update(f"{BACKEND_VERSION} {self.stand_in().python} {self.config.install_steps}".encode())
        iso = self.isolation()
        if iso.rootless:  # root's key stays as it was: its layers already prepared stay valid
            h.update(f" sandbox={iso.key}".encode())
        return h.hexdigest()[:20]

    def isolation(self) -> isolation.Isolation:
        try:
            return sandbox.check_available()
        except sandbox.SandboxUnavailable as e:
            raise InfraError(str(e)) from None

    def _parents(self) -> tuple[str, ...]:
        return tuple(str(Path(p).expanduser()) for p in self.config.cgroup_parents)

    def _identity(self) -> Path:
        return make_identity(self.cache / "identity")

    def sweep(self) -> str | None:
        """Remove what a killed pesflow left (grading folders nobody holds, their processes,
        cgroups); one line saying so, or None when there was nothing."""
        folders, procs = sweep_folders(self.cache)
        groups = sweep_leftovers(self._parents())
        if not (folders or groups or procs):
            return None
        return (f"pesflow: removed what an interrupted grading left behind: {folders} sandbox folder(s), "
                f"{groups} cgroup(s), {procs} process(es)")

    # ---------------------------------------------------------------- prepare
    def prepare(self, task: Task) -> Prepared:
        iso = self.isolation()
        if not self._swept:
            self._swept = True
            note = self.sweep()
            if note:
                print(note, file=sys.stderr)
        key = self._key(task)
        home = self.cache / key
        self.cache.mkdir(parents=True, exist_ok=True)
        with open(self.cache / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            meta_path = home / "meta.json"
            if meta_path.is_file():
                meta = _with_sandbox(json.loads(meta_path.read_text()), iso)
                return Prepared(task=task, key=key, seconds=0.0, cached=True, warnings=meta["warnings"], state=meta)
            start = time.monotonic()
            remove_tree(home)
            for d in ("upper", "work", "root"):
                (home / d).mkdir(parents=True)
            try:
                meta = Build(task, home, self.config, self.stand_in(), self.layout(None), self._identity(),
                             BACKEND_VERSION, overlay_options=iso.overlay_options).run()
            except (InfraError, RootError) as e:
                shutil.rmtree(home / "upper", ignore_errors=True)
                raise InfraError(str(e)) from None
            meta["seconds"] = round(time.monotonic() - start, 3)
            meta["key"] = key
            tmp = home / "meta.json.tmp"
            tmp.write_text(json.dumps(meta, indent=1))
            tmp.replace(meta_path)
            meta = _with_sandbox(meta, iso)
            return Prepared(task=task, key=key, seconds=meta["seconds"], cached=False, warnings=meta["warnings"],
                            state=meta)

    def baseline_text(self, prepared: Prepared, rel: str) -> str | None:
        p = self.cache / prepared.key / "upper" / prepared.task.source_root.lstrip("/") / rel
        if p.is_file() and not p.is_symlink():
            return p.read_text()
        return None

    # ---------------------------------------------------------------- grade
    def limits_for(self, task: Task) -> tuple[Limits, int | None]:
        """The grading's limits from the task and the config, and the scratch size in MiB
        (None: writes go to the host's disk, uncapped). The scratch is a tmpfs, so its files
        are memory too: it is held to half the memory limit, leaving the rest to processes."""
        c = self.config
        memory = c.memory_mb if c.memory_mb is not None else task.toml.environment.memory_mb
        memory = memory or None
        scratch = c.disk_mb or None
        if scratch and memory:
            scratch = max(64, min(scratch, memory // 2))
        return (Limits(memory_mb=memory, pids=c.max_pids or None, gpu=task.gpus > 0, cgroup_parents=self._parents()),
                scratch)

    def grade(self, prepared: Prepared, request: GradeRequest) -> GradeRun:
        # a later pesflow removes it if we are killed
        with grading_folder(self.cache / prepared.key / "runs") as run_dir:
            return self._grade_in(run_dir, prepared, request)

    def _grade_in(self, run_dir: Path, prepared: Prepared, request: GradeRequest) -> GradeRun:
        task, meta = prepared.task, prepared.state
        home = self.cache / prepared.key
        for d in ("seed", "scratch", "root", "out"):
            (run_dir / d).mkdir()
        limits, scratch_mb = self.limits_for(task)
        iso = self.isolation()
        scratch = run_dir / "scratch"
        _write_files(run_dir / "seed", task.source_root, request.files, home / "upper")
        env = {**meta["env"], "HOME": "/root", **request.env}
        trust = self._trust_setup(run_dir, prepared, request)
        binds, binds_rw = _binds(task, request, run_dir, trust is not None)
        try:
            plan = RootPlan(layout=self.layout(task, env["HOME"]), image=home / "upper", skeleton=run_dir / "skel",
                            identity=self._identity(), root=run_dir / "root", trust=trust,
                            overlay_options=iso.overlay_options)
            for _, dest in binds_rw:  # folders made on the scratch once it exists: their mount points now
                (plan.skeleton / dest.lstrip("/")).mkdir(parents=True, exist_ok=True)
            make_skeleton(plan.skeleton, plan.layout, binds)
            root_lines = plan.grading_lines(scratch, isolation.readable_devices(_gpu_devices()) if task.gpus else [])
        except RootError as e:
            return GradeRun(None, -1, False, 0.0, "", infra_error=str(e))
        command, results = command_for(request, prepared)
        # the trust probes, once the grader is over, as fresh processes in this same sandbox
        follow = run_dir / "follow" if trust and request.then is not None else None

        def chroot(cmd: str) -> str:  # the grader's command line, each follow-up's and the warm probe's
            return sandbox.chroot_command(run_dir / "root", env, meta["workdir"], cmd, ["/bin/bash", "-c"],
                                          caps=sandbox.GRADER_CAPS)
        warm, late, when = None, False, (request.trust or {}).get("warm")
        if follow is not None and when in ("grader", "after"):
            # beside the grader only where its imports leave the grader room; else after it
            late = when == "after" or bool(limits.memory_mb and limits.memory_mb < WARM_MIN_MEMORY_MB)
            follow.mkdir()
            warm = chroot(instrument.warm_command())
        # Everything the grader writes lives on the scratch: copied out before it goes.
        copy = [(scratch / "upper/logs", run_dir / "out/logs")]
        copy += [(scratch / "upper" / r.lstrip("/"), run_dir / "out" / r.lstrip("/"))
                 for r in results if not r.startswith("/logs/")]
        bulk = [(scratch / "trust-out", run_dir / "trust-out")] if trust else []
        scan = written.scan_command(self.stand_in().python, plan.written_folders(scratch),
                                    plan.writable_layers(scratch), written.candidate_paths(task.scope, request.files),
                                    run_dir / written.SCAN_FILE) if trust or request.scan_writes else ""
        body = (
            sandbox.scratch_script(scratch, scratch_mb, run_dir / "seed")
            + script(root_lines + bind_lines(run_dir / "root", binds,
                                             [os.path.expanduser(p) for p in self.config.hide_paths], binds_rw))
            + iso.hostname_line("pesflow", self.stand_in().python) + f"echo {READY}\n"
            + supervise.supervised_command(
                chroot(command),
                proc=run_dir / "root/proc", status=run_dir / "status", python=self.stand_in().python, copy_out=copy,
                max_file_bytes=self.config.max_log_bytes, max_total_bytes=16 * self.config.max_log_bytes,
                scratch=scratch if scratch_mb else None, results=[scratch / "upper" / r.lstrip("/") for r in results],
                bulk_copy=bulk, follow=follow, warm=warm, warm_over=run_dir / "trust-in" / instrument.WARM_OVER,
                after_grader=scan, warm_late=bool(warm and late))
        )
        events = collect.EventSocket(run_dir / "trust-in" / "events.sock") if trust else None
        concluded: list[GradeRun] = []

        def conclude(res: sandbox.SandboxResult) -> GradeRun:
            trust_events = self._trust_collect(events, run_dir, request) if events else []
            trust_events += (written.read_scan(run_dir / written.SCAN_FILE) or []) if scan else []
            return self._conclude(res, run_dir, request, prepared, limits, scratch_mb, plan, iso, results, trust_events)

        def followups(phase: sandbox.SandboxResult, more: sandbox.FollowUp) -> None:  # only where `follow` is set
            concluded.append(conclude(phase))
            if not concluded[0].infra_error:
                request.then(concluded[0], LiveProber(more, run_dir, follow, scratch / "trust-out", chroot, request))

        try:
            res = sandbox.run(body, network=False, timeout=request.timeout, max_output=self.config.max_log_bytes,
                              limits=limits, watch=local_scratch.watch(scratch, scratch_mb), grace=STOP_GRACE_SEC,
                              max_output_total=self.config.max_output_mb << 20, followups=followups if follow else None)
        except BaseException as e:
            if events is not None:
                events.close()  # the socket's thread ends with the grading, whatever stopped it
            if isinstance(e, sandbox.SandboxUnavailable):
                raise InfraError(str(e)) from None
            raise
        return concluded[0] if concluded else conclude(res)

    def _conclude(self, res: sandbox.SandboxResult, run_dir: Path, request: GradeRequest, prepared: Prepared,
                  limits: Limits, scratch_mb: int | None, plan: RootPlan, iso: isolation.Isolation, results: list[str],
                  trust_events: list[dict[str, Any]]) -> GradeRun:
        """The grading's GradeRun from its sandbox's result and what the init copied out."""
        task = prepared.task
        status = supervise.read_status(run_dir / "status")
        report = GradingReport(res.returncode, res.output, res.seconds, timed_out=res.killed == "timeout",
                               grader_seconds=_grader_seconds(status), memory_mb=limits.memory_mb, pids=limits.pids,
                               disk_mb=scratch_mb, output_mb=round(res.usage.get("output_bytes", 0) / (1 << 20)),
                               memory_peak_bytes=res.usage.get("memory_peak_bytes"), trust_events=trust_events,
                               trust_socket=any(e.get("via") == "socket" for e in trust_events))
        if READY not in res.output and not res.killed:
            report.infra_error = f"sandbox setup failed: {last_line(res.output)}"
            return grading_result(report, self.config.stray_processes)
        if res.killed == HOST_OUT_OF_MEMORY:  # the sandbox stopped it as an OOM kill; the policy says whose
            report.oom_killed = True
            return grading_result(report, self.config.stray_processes)
        _copy_logs(run_dir / "out/logs", request.out_dir / "logs", self.config.max_log_bytes)
        for rel in results:
            report.reward = read_reward_file(run_dir / "out" / rel.lstrip("/"))
            if report.reward is not None:
                break
        (request.out_dir / "grader_output.log").write_text(res.output)
        breach = res.killed if res.killed != "timeout" else None
        logs_text = _logs_text(request.out_dir / "logs")
        breach = breach or local_scratch.full(status, scratch_mb) or _address_space_full(res, status, logs_text)
        report.oom_killed = breach == OUT_OF_MEMORY and res.killed == OUT_OF_MEMORY
        report.breaches = [breach] if breach and not report.oom_killed else []
        report.strays = status.get("strays", "").split()
        report.signalled = bool(status.get("signalled") or (status.get("stopped") and not res.killed))
        report.forged = bool(status.get("forged"))  # a result file changed after the grader had returned
        limits_seen = {"limits": {"memory_mb": limits.memory_mb, "pids": limits.pids, "disk_mb": scratch_mb,
                                  "output_mb": self.config.max_output_mb, "timeout_sec": request.timeout},
                       "killed": res.killed, "breach": breach, "strays": report.strays, "usage": res.usage,
                       "signalled": status.get("signalled")
                           or ("USR1" if status.get("stopped") and not res.killed else None),
                       "scratch_used_bytes": local_scratch.as_int(status.get("scratch_used")), "warnings": res.warnings,
                       "writable": plan.layout.writable, "host_areas": plan.layout.areas,
                       "sandbox": iso.mode, "mechanisms": _mechanisms(res, scratch_mb), "unenforced": res.unenforced}
        (request.out_dir / "limits.json").write_text(json.dumps(limits_seen, indent=1))
        report.notes = (_read_only_notes(res.output + logs_text, plan.layout.writable)
                        + _unenforced_notes(res.unenforced, iso))
        if failed_verdict(report.reward) and request.command is None and not report.timed_out:
            report.fault = stand_in_fault(res.output + logs_text, self.stand_in().python, task.root)
        return grading_result(report, self.config.stray_processes)

    # ---------------------------------------------------------------- the trust screen's guard
    def _trust_setup(self, run_dir: Path, prepared: Prepared, request: GradeRequest) -> Path | None:
        """The guard's layer (its files in every site-packages folder), its config read-only, its
        out folder writable; None when the request carries no guard."""
        if request.trust is None:
            return None
        home = self.cache / prepared.key
        layer = home / f"trust-{instrument.guard_hash()}"
        if not (layer / ".done").is_file():
            dirs = instrument.site_dirs(list(self.stand_in().site_packages), home / "upper")
            instrument.make_layer(layer, dirs, self.stand_in().python)
        instrument.write_config(run_dir / "trust-in", request.trust)
        for name, host in {**(instrument.warm_files() if request.trust.get("warm") else {}),
                           **request.trust_files}.items():
            shutil.copyfile(host, run_dir / "trust-in" / name)
        return layer

    def _trust_collect(self, events: collect.EventSocket, run_dir: Path, request: GradeRequest) -> list[dict[str, Any]]:
        sent = events.close()
        out = request.out_dir / "trust"
        _copy_logs(run_dir / "trust-out", out, 256 << 20)
        return collect.merge(sent, collect.read_event_files(out))

    def close(self) -> None:  # nothing warm to release: layers stay cached on disk
        pass


def _binds(task: Task, request: GradeRequest, run_dir: Path,
           trust: bool) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """The host folders a grading's root binds, read-only and writable (host path, path inside):
    the GPU's, the hidden tests (hidden grader only), the reviewer's files, the guard's folders."""
    binds: list[tuple[Path, str]] = gpu_binds() if task.gpus else []
    if request.grader == "hidden":
        binds.append((task.tests_dir, "/tests"))
    for name, host in request.reviewer_files.items():
        binds.append((host, f"/.pesflow-reviewer/{name}"))
    # on the scratch, so its size counts against the grading's disk cap; copied out with the logs
    binds_rw = [(run_dir / "scratch" / "trust-out", instrument.OUT_DIR)] if trust else []
    if trust:
        binds.append((run_dir / "trust-in", instrument.CONFIG_DIR))
    return binds, binds_rw


def _with_sandbox(meta: dict[str, Any], iso: isolation.Isolation) -> dict[str, Any]:
    """The verdict's environment names the sandbox that graded (root, or rootless: a user namespace)."""
    meta["environment"] = {**(meta.get("environment") or {}), "sandbox": iso.mode}
    return meta


def _mechanisms(res: sandbox.SandboxResult, scratch_mb: int | None) -> dict[str, str]:
    """What held each limit of the grading (limits.json): the plan's, and pesflow's own watches."""
    return {**res.mechanisms, "disk": "tmpfs" if scratch_mb else "none", "output": "pesflow", "timeout": "pesflow"}


def _address_space_full(res: sandbox.SandboxResult, status: dict[str, str], logs_text: str) -> str | None:
    """Under RLIMIT_AS (no memory cgroup) an allocation past the limit fails rather than being
    killed: a grader that died of it (MemoryError, ENOMEM) broke its memory limit."""
    if "rlimit_as" not in res.mechanisms.get("memory", "") or status.get("grader_rc") in (None, "0"):
        return None
    text = res.output + logs_text
    return OUT_OF_MEMORY if "MemoryError" in text or "Cannot allocate memory" in text else None


def _unenforced_notes(unenforced: list[str], iso: isolation.Isolation) -> list[str]:
    if not unenforced:
        return []
    how = "hand pesflow a cgroup (evaluator.local.cgroup_parents)" if iso.rootless else "enable the cgroup controller"
    return [unenforced_note(unenforced, f"nothing on this machine (sandbox: {iso.mode})", how)]


HOME_SECRETS = ("~/.ssh", "~/.aws", "~/.config", "~/.gnupg", "~/.docker", "~/.netrc", "~/.kube")
STOP_GRACE_SEC = 10.0  # a stopped grading's init gets this long to kill the rest and copy its logs out
def _gpu_devices() -> list[str]:
    """The GPU's device nodes, bound into a GPU task's otherwise minimal /dev."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia*")) + (["/dev/dri"] if Path("/dev/dri").is_dir() else [])


def _grader_seconds(status: dict[str, str]) -> float | None:
    """The grader's own run time, stamped by the namespace's init around it."""
    try:
        return round(float(status["grader_end"]) - float(status["grader_start"]), 6)
    except (KeyError, ValueError):
        return None


def _write_files(upper: Path, source_root: str, files: dict[str, str | None], prepared_upper: Path) -> None:
    """Put the candidate's files into the throwaway layer, before it is mounted."""
    for rel, text in files.items():
        dest = upper / source_root.lstrip("/") / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if text is None:  # an overlay whiteout hides the baseline file
            os.mknod(dest, stat.S_IFCHR | 0o600, os.makedev(0, 0))
            continue
        base = prepared_upper / source_root.lstrip("/") / rel
        dest.write_text(text)
        dest.chmod(base.stat().st_mode & 0o7777 if base.is_file() else 0o644)


def _copy_logs(src: Path, dest: Path, limit: int) -> int:
    """Regular files only (no symlink is followed), each cut at `limit` bytes."""
    n = 0
    if not src.is_dir() or src.is_symlink():
        return 0
    for p in sorted(src.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        out = dest / p.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "rb") as f:
            out.write_bytes(f.read(limit))
        n += 1
    return n




def _logs_text(logs: Path, limit: int = 4 << 20) -> str:
    out, n = [], 0
    for p in sorted(logs.rglob("*")) if logs.is_dir() else []:
        if p.is_file() and not p.is_symlink() and n < limit:
            t = p.read_text(errors="replace")[: limit - n]
            out.append(t)
            n += len(t)
    return "\n".join(out)


_EROFS_PATH = re.compile(r"(/[^\s'\":]+)['\"]?: " + EROFS + r"|" + EROFS + r": ['\"]?(/[^\s'\"]+)")


def _read_only_notes(output: str, writable: list[str]) -> list[str]:
    """A grading that tried to write on the read-only root is named, with where it tried: a grader
    that needs to write there needs evaluator.writable_paths (the root stays read-only)."""
    if EROFS not in output:
        return []
    paths = [m.group(1) or m.group(2) for m in _EROFS_PATH.finditer(output)]
    where = ", ".join(dict.fromkeys(paths[:5])) or "a path outside the writable ones"
    return [f"read_only_root: the grading tried to write {where} on the read-only root "
            f"(writable: {', '.join(writable)}, /tmp, /var/tmp, /dev/shm, /run); a grader that must write there "
            "needs evaluator.writable_paths"]
