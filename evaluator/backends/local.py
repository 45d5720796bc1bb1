"""The local backend: a task's image reproduced on the host's own software, no container engine.

Prepare (once per package content): the Dockerfile is replayed into an overlay upper layer
over the host's /: COPY/ADD/WORKDIR are written into the layer from here, RUN steps run
chrooted into the mounted overlay (heredocs included). Steps that install packages run when
the network allows and are skipped with a warning when they fail; venvs are made with the
host's site-packages visible so the host's python, numpy and torch stand in for the image's.

Grade (per candidate): in fresh mount+pid+net namespaces, the prepared layer is mounted
read-only over / and a throwaway layer over that; the candidate's files are written into the
throwaway layer, tests/ is bound read-only at /tests only for the hidden grader, the grader
runs chrooted with the network off, and its /logs are copied out. Reset = a new throwaway
layer, so nothing one candidate leaves can reach the next.
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import site
import stat
import sys
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any

from evaluator import dockerfile, sandbox
from evaluator.backends.base import GradeRequest, GradeRun, InfraError, Prepared
from evaluator.config import LocalConfig
from evaluator.hardware import gpu_mounts
from evaluator.limits import DISK_QUOTA, HOST_OUT_OF_MEMORY, Limits
from evaluator.task import NOT_IN_IMAGE, BUNDLED_TASKS, Task, package_hash
from evaluator.verdict import read_reward_file

BACKEND_VERSION = "local-5"  # bump to invalidate prepared layers when the replay changes
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
READY = "@@pesflow:ready"
_INSTALL = re.compile(
    r"\b(apt-get|apt|apk|yum|dnf|microdnf|conda|mamba|micromamba|npm)\s+(-\S+\s+)*(update|install|upgrade|add)\b"
    r"|\bpip[0-9.]*\s+(-\S+\s+)*install\b|-m\s+pip\s+install\b|\buv\s+pip\s+install\b|\b(curl|wget)\s"
)
_VENV = re.compile(r"(-m\s+venv)(?![^\n;&|]*--system-site-packages)")


PESFLOW_TREE = BUNDLED_TASKS.parent
_NEVER_HIDE = {"/", "/usr", "/etc", "/bin", "/lib", "/lib64", "/sbin", "/var", "/opt", "/root", "/proc", "/dev", "/sys"}


def hidden_paths(paths: list[Path], keep: list[Path], depth: int = 4) -> list[str]:
    """The folders to cover, keeping every `keep` path (the host's python) reachable: a folder
    that holds one is not covered itself, its other children are (down to `depth` levels)."""
    out: list[str] = []

    def visit(p: Path, level: int) -> None:
        if str(p) in _NEVER_HIDE or str(p) in out or not p.is_dir():
            return
        if not any(k == p or p in k.parents for k in keep):
            out.append(str(p))
        elif level < depth:
            for child in sorted(p.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    visit(child, level + 1)

    for p in paths:
        visit(Path(os.path.abspath(p)), 0)
    return out


def is_install_step(script: str) -> bool:
    return bool(_INSTALL.search(script))


def host_python() -> Path:
    """The interpreter pesflow runs on, as invoked: when it is a venv's python (torch in a venv on
    GPU machines), the venv is what stands in for the image's python, not its base interpreter."""
    return Path(os.path.abspath(sys.executable))


def host_site_packages() -> list[str]:
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


class LocalBackend:
    name = "local"

    def __init__(self, config: LocalConfig | None = None, cache_dir: Path | None = None, extra_hidden: list[Path] = ()):
        self.config = config or LocalConfig()
        self.cache = Path(cache_dir or self.config.cache_dir).expanduser().resolve() / "local"
        self.extra_hidden = [Path(p).resolve() for p in extra_hidden]

    # ---------------------------------------------------------------- helpers
    def _hidden(self, task: Task) -> list[str]:
        """Host paths a candidate must not see: pesflow's own tree (its tasks, tests, answers),
        the task packages, the cache, the runs, and the configured private folders."""
        paths = [self.cache.parent, PESFLOW_TREE, task.root.parent.parent, task.root, *self.extra_hidden]
        paths += [Path(p) for p in self.config.hide_paths]
        keep = [host_python().parent, *map(Path, host_site_packages())]
        return hidden_paths(paths, keep)

    def _key(self, task: Task) -> str:
        h = hashlib.sha256()
        h.update(package_hash(task.root, exclude_top=NOT_IN_IMAGE).encode())
        h.update(f"{BACKEND_VERSION} {host_python()} {self.config.install_steps}".encode())
        return h.hexdigest()[:20]

    # ---------------------------------------------------------------- prepare
    def prepare(self, task: Task) -> Prepared:
        try:
            sandbox.check_available()
        except sandbox.SandboxUnavailable as e:
            raise InfraError(str(e)) from None
        key = self._key(task)
        home = self.cache / key
        self.cache.mkdir(parents=True, exist_ok=True)
        with open(self.cache / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            meta_path = home / "meta.json"
            if meta_path.is_file():
                meta = json.loads(meta_path.read_text())
                return Prepared(task=task, key=key, seconds=0.0, cached=True, warnings=meta["warnings"], state=meta)
            start = time.monotonic()
            shutil.rmtree(home, ignore_errors=True)
            for d in ("upper", "work", "root"):
                (home / d).mkdir(parents=True)
            try:
                meta = _Build(self, task, home).run()
            except InfraError:
                shutil.rmtree(home / "upper", ignore_errors=True)
                raise
            meta["seconds"] = round(time.monotonic() - start, 3)
            meta["key"] = key
            tmp = home / "meta.json.tmp"
            tmp.write_text(json.dumps(meta, indent=1))
            tmp.replace(meta_path)
            return Prepared(task=task, key=key, seconds=meta["seconds"], cached=False, warnings=meta["warnings"], state=meta)

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
        return Limits(memory_mb=memory, pids=c.max_pids or None, gpu=task.gpus > 0), scratch

    def grade(self, prepared: Prepared, request: GradeRequest) -> GradeRun:
        task, meta = prepared.task, prepared.state
        home = self.cache / prepared.key
        run_dir = home / "runs" / uuid.uuid4().hex[:12]
        for d in ("pwork", "base", "seed", "scratch", "root", "out"):
            (run_dir / d).mkdir(parents=True)
        limits, scratch_mb = self.limits_for(task)
        scratch = run_dir / "scratch"
        try:
            _write_files(run_dir / "seed", task.source_root, request.files, home / "upper")
            binds: list[tuple[Path, str]] = [(Path(m), m) for m in gpu_mounts()] if task.gpus else []
            if request.grader == "hidden":
                binds.append((task.tests_dir, "/tests"))
            for name, host in request.reviewer_files.items():
                binds.append((host, f"/.pesflow-reviewer/{name}"))
            command, results = grader_command(request.grader, meta)
            env = {**meta["env"], "HOME": "/root", **request.env}
            # Everything the grader writes lives on the scratch: copied out before it goes.
            copy = [(scratch / "upper/logs", run_dir / "out/logs")]
            copy += [(scratch / "upper" / r.lstrip("/"), run_dir / "out" / r.lstrip("/")) for r in results if not r.startswith("/logs/")]
            script = (
                f"mount -t overlay overlay -o {sandbox.q(f'ro,lowerdir=/,upperdir={home}/upper,workdir={run_dir}/pwork')} "
                f"{sandbox.q(run_dir / 'base')}\n"
                + sandbox.scratch_script(scratch, scratch_mb, run_dir / "seed")
                + sandbox.mount_root_script(
                    lower=run_dir / "base", upper=scratch / "upper", work=scratch / "work", root=run_dir / "root",
                    hide=self._hidden(task), binds_ro=binds, scratch=scratch, devices=_gpu_devices() if task.gpus else [])
                + f"echo {READY}\n"
                + sandbox.supervised_command(
                    sandbox.chroot_command(run_dir / "root", env, meta["workdir"], command, ["/bin/bash", "-c"],
                                           caps=sandbox.GRADER_CAPS),
                    proc=run_dir / "root/proc", status=run_dir / "status", python=str(host_python()), copy_out=copy,
                    max_file_bytes=self.config.max_log_bytes, max_total_bytes=16 * self.config.max_log_bytes,
                    scratch=scratch if scratch_mb else None)
            )
            try:
                res = sandbox.run(script, network=False, timeout=request.timeout, max_output=self.config.max_log_bytes,
                                  limits=limits, watch=_scratch_watch(scratch, scratch_mb), grace=STOP_GRACE_SEC,
                                  max_output_total=self.config.max_output_mb << 20)
            except sandbox.SandboxUnavailable as e:
                raise InfraError(str(e)) from None
            status = sandbox.read_status(run_dir / "status")
            if READY not in res.output and not res.killed:
                return GradeRun(None, res.returncode, False, res.seconds, res.output,
                                infra_error=f"sandbox setup failed: {_last_line(res.output)}")
            if res.killed == HOST_OUT_OF_MEMORY:
                peak = res.usage.get("memory_peak_bytes") or 0
                return GradeRun(None, res.returncode, False, res.seconds, res.output,
                                infra_error=f"the machine ran out of memory while grading (the grading used {peak >> 20} "
                                            f"of its {limits.memory_mb} MiB); not the candidate's doing, grade it again")
            _copy_logs(run_dir / "out/logs", request.out_dir / "logs", self.config.max_log_bytes)
            reward = None
            for rel in results:
                reward = read_reward_file(run_dir / "out" / rel.lstrip("/"))
                if reward is not None:
                    break
            (request.out_dir / "grader_output.log").write_text(res.output)
            breach = res.killed if res.killed != "timeout" else None
            breach = breach or _scratch_full(status, scratch_mb)
            strays = status.get("strays", "").split()
            report = {"limits": {"memory_mb": limits.memory_mb, "pids": limits.pids, "disk_mb": scratch_mb,
                                 "output_mb": self.config.max_output_mb, "timeout_sec": request.timeout},
                      "killed": res.killed, "breach": breach, "strays": strays, "usage": res.usage,
                      "signalled": status.get("signalled") or ("USR1" if status.get("stopped") and not res.killed else None),
                      "scratch_used_bytes": _int(status.get("scratch_used")), "warnings": res.warnings}
            (request.out_dir / "limits.json").write_text(json.dumps(report, indent=1))
            if res.killed != "timeout":
                reasons = [breach] if breach else []
                if strays and self.config.stray_processes == "fail":
                    reasons.append(BACKGROUND_PROCESS)
                if status.get("signalled") or (status.get("stopped") and not res.killed):
                    reasons.append(SANDBOX_TAMPERING)  # the init was signalled from inside
                if reasons:
                    reward = _limit_verdict(reward, reasons, res, strays, scratch_mb, limits)
            return GradeRun(reward, res.returncode, res.killed == "timeout", res.seconds, res.output,
                            grader_seconds=_grader_seconds(status))
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

    def close(self) -> None:  # nothing warm to release: layers stay cached on disk
        pass


STOP_GRACE_SEC = 10.0  # a stopped grading's init gets this long to kill the rest and copy its logs out
BACKGROUND_PROCESS = "background_process"
SANDBOX_TAMPERING = "sandbox_tampering"
_DETAIL = {
    "out_of_memory": "the grading went past its memory limit ({memory} MiB) and the kernel killed it",
    "too_many_processes": "the grading tried to run more than {pids} processes and threads at once",
    "disk_quota": "the grading filled its {disk} MiB of writable space",
    "output_limit": "the grading printed more than {output} MiB",
    BACKGROUND_PROCESS: "processes it started outlived the grader: {strays}",
    SANDBOX_TAMPERING: "something in the grading signalled the sandbox's init",
}


def _limit_verdict(reward: dict[str, Any] | None, reasons: list[str], res: sandbox.SandboxResult, strays: list[str],
                   scratch_mb: int | None, limits: Limits) -> dict[str, Any]:
    """The grader's verdict (if it wrote one) with the named limits put first and reward 0: a
    broken limit is the candidate's failure whatever the grader concluded."""
    raw = dict(reward or {})
    prior = raw.get("hard_fail_reasons") or raw.get("hard_fails") or []
    if isinstance(prior, str):
        prior = prior.replace(",", " ").split()
    raw["hard_fail_reasons"] = reasons + [str(r) for r in prior if str(r) not in reasons]
    raw.pop("hard_fails", None)
    raw["reward"] = 0.0
    fields = {"memory": limits.memory_mb, "pids": limits.pids, "disk": scratch_mb,
              "output": round(res.usage.get("output_bytes", 0) / (1 << 20)), "strays": " ".join(strays[:5])}
    raw["pesflow_limits"] = {r: _DETAIL[r].format(**fields) for r in reasons if r in _DETAIL}
    raw["pesflow_grader_verdict"] = reward is not None
    return raw


def _gpu_devices() -> list[str]:
    """The GPU's device nodes, bound into a GPU task's otherwise minimal /dev."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia*")) + (["/dev/dri"] if Path("/dev/dri").is_dir() else [])


def _scratch_watch(scratch: Path, size_mb: int | None):
    """A watch for sandbox.run: the scratch tmpfs, seen through the namespace's init, is full."""
    if not size_mb:
        return None

    def watch(pid1: int) -> str | None:
        try:
            v = os.statvfs(f"/proc/{pid1}/root{scratch}")
        except OSError:
            return None
        if v.f_blocks * v.f_frsize != size_mb << 20:
            return None  # not mounted yet: this is the host's disk
        return DISK_QUOTA if _full(v.f_bfree * v.f_frsize, size_mb << 20, v.f_ffree) else None

    return watch


def _full(free: int, total: int, inodes_free: int) -> bool:
    return free < max(1 << 20, total // 100) or inodes_free == 0


def _scratch_full(status: dict[str, str], size_mb: int | None) -> str | None:
    used, total, inodes = _int(status.get("scratch_used")), _int(status.get("scratch_total")), _int(status.get("inodes_free"))
    if size_mb and used is not None and total and _full(total - used, total, inodes if inodes is not None else 1):
        return DISK_QUOTA
    return None


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _grader_seconds(status: dict[str, str]) -> float | None:
    """The grader's own run time, stamped by the namespace's init around it."""
    try:
        return round(float(status["grader_end"]) - float(status["grader_start"]), 6)
    except (KeyError, ValueError):
        return None


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def grader_command(grader: str, meta: dict[str, Any]) -> tuple[str, list[str]]:
    """The command for a grader, and where its verdict lands (first existing wins)."""
    if grader == "hidden":
        return "bash /tests/test.sh", ["/logs/verifier/reward.json"]
    loop = meta.get("dev_engine")
    if loop == "score_engine":
        return ("export LOOP_DEV_OUT=/logs/loop/dev; bash /opt/loop/score_engine.sh",
                ["/logs/loop/dev/reward.json", "/logs/verifier/reward.json"])
    if loop:
        return f"bash {loop}", ["/logs/verifier/reward.json", "/logs/loop/dev/reward.json"]
    raise InfraError("this package has no dev engine in /opt/loop (score_engine.sh or private/*/test.sh); use --grader hidden")


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


class _Build:
    """One replay of a Dockerfile into a prepared layer."""

    def __init__(self, backend: LocalBackend, task: Task, home: Path):
        self.b, self.task, self.home = backend, task, home
        self.upper = home / "upper"
        self.log = open(home / "build.log", "w")
        self.warnings: list[str] = []
        self.env: dict[str, str] = {"PATH": f"{host_python().parent}:{BASE_PATH}", "LANG": "C.UTF-8"}
        self.args: dict[str, str] = {}
        self.workdir = "/"
        self.shell = ["/bin/sh", "-c"]
        self.ignore = _dockerignore(task.root)

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)
        self.log.write(f"WARNING: {msg}\n")

    def run(self) -> dict[str, Any]:
        df = self.task.dockerfile
        try:
            steps = dockerfile.parse(df.read_text(), df)
        except dockerfile.DockerfileError as e:
            raise InfraError(str(e)) from None
        if sum(1 for s in steps if s.kind == "FROM") > 1:
            raise InfraError(f"{df}: multi-stage Dockerfiles are not replayed by the local backend; use --backend docker")
        deadline = time.monotonic() + self.task.toml.environment.build_timeout_sec
        self._link_python()
        try:
            for n, step in enumerate(steps):
                self.log.write(f"--- step {n} line {step.line}: {step.kind} {step.text[:200]}\n")
                self.log.flush()
                self._step(n, step, deadline)
        finally:
            self.log.close()
            shutil.rmtree(self.upper / ".pesflow-build", ignore_errors=True)
        self._expose_host_site_packages()
        return {
            "env": self.env, "workdir": self.workdir, "shell": self.shell, "warnings": self.warnings,
            "dev_engine": self._dev_engine(), "python": str(host_python()), "backend": BACKEND_VERSION,
            "task": self.task.name,
        }

    # each instruction ------------------------------------------------------
    def _step(self, n: int, step: dockerfile.Instruction, deadline: float) -> None:
        scope = {**self.args, **self.env}
        if step.kind == "FROM":
            image = dockerfile.expand(step.text.split()[0], scope)
            if "cuda" in image:
                self.env["PATH"] = f"{self.env['PATH']}:/usr/local/cuda/bin:/usr/local/nvidia/bin"
            self.log.write(f"base image {image}: the host's own software stands in\n")
        elif step.kind == "ARG":
            for k, v in dockerfile.parse_key_values(step.text, scope):
                self.args[k] = v if "=" in step.text else self.args.get(k, "")
        elif step.kind == "ENV":
            for k, v in dockerfile.parse_key_values(step.text, scope):
                self.env[k] = v
        elif step.kind == "WORKDIR":
            wd = dockerfile.expand(step.text.strip(), scope)
            self.workdir = wd if wd.startswith("/") else os.path.join(self.workdir, wd)
            _unwhiteout(self.upper, self.workdir)
            (self.upper / self.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif step.kind == "SHELL":
            self.shell = step.json_args() or self.shell
        elif step.kind in ("COPY", "ADD"):
            self._copy(step, scope)
        elif step.kind == "RUN":
            self._run(n, step, deadline)
        elif step.kind == "USER" and step.text.strip() not in ("root", "0"):
            self.warn(f"USER {step.text.strip()} ignored: the local backend grades as root")

    def _copy(self, step: dockerfile.Instruction, scope: dict[str, str]) -> None:
        if "from" in step.flags:
            raise InfraError(f"{self.task.dockerfile}:{step.line}: COPY --from is not replayed by the local backend; use --backend docker")
        args = step.json_args() or step.text.split()
        args = [dockerfile.expand(a, scope) for a in args]
        if step.heredocs:  # COPY <<EOF /path: the body is the file
            dest = self._dest(args[-1])
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(step.heredocs[0][1])
            return
        srcs, dest_s = args[:-1], args[-1]
        dest_is_dir = dest_s.endswith("/") or len(srcs) > 1
        mode = int(step.flags["chmod"], 8) if step.flags.get("chmod") else None
        for pattern in srcs:
            if re.match(r"https?://", pattern):
                self.warn(f"ADD {pattern} skipped: no remote downloads while replaying")
                continue
            matches = sorted(self.task.root.glob(pattern.lstrip("/"))) if any(c in pattern for c in "*?[") else [self.task.root / pattern.lstrip("/")]
            matches = [m for m in matches if m.exists() and not self._ignored(m)]
            if not matches:
                raise InfraError(f"{self.task.dockerfile}:{step.line}: {step.kind} source {pattern!r} not found in the package; add it or fix the Dockerfile")
            for src in matches:
                if src.is_dir():
                    self._copy_tree(src, self._dest(dest_s), mode)
                elif step.kind == "ADD" and tarfile.is_tarfile(src):
                    target = self._dest(dest_s)
                    target.mkdir(parents=True, exist_ok=True)
                    with tarfile.open(src) as tf:
                        tf.extractall(target, filter="data")
                else:
                    target = self._dest(dest_s) / src.name if dest_is_dir else self._dest(dest_s)
                    self._copy_file(src, target, mode)

    def _dest(self, d: str) -> Path:
        path = d if d.startswith("/") else os.path.join(self.workdir, d)
        _unwhiteout(self.upper, path)
        return self.upper / path.lstrip("/")

    def _ignored(self, p: Path) -> bool:
        rel = p.relative_to(self.task.root).as_posix()
        ignored = False
        for neg, pat in self.ignore:
            if fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat + "/*") or rel.startswith(pat.rstrip("/") + "/"):
                ignored = not neg
        return ignored

    def _copy_tree(self, src: Path, dest: Path, mode: int | None) -> None:
        for p in sorted(src.rglob("*")):
            if self._ignored(p):
                continue
            target = dest / p.relative_to(src)
            if p.is_symlink():
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists() or target.is_symlink():
                    target.unlink()
                target.symlink_to(os.readlink(p))
            elif p.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                self._copy_file(p, target, mode)
        dest.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _copy_file(src: Path, target: Path, mode: int | None) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            target = target / src.name
        if target.exists() or target.is_symlink():
            target.unlink()
        shutil.copyfile(src, target)
        target.chmod(mode if mode is not None else (src.stat().st_mode & 0o7777))

    def _run(self, n: int, step: dockerfile.Instruction, deadline: float) -> None:
        script = step.shell_script()
        install = is_install_step(script)
        if install and self.b.config.install_steps == "skip":
            self.warn(f"line {step.line}: package install step skipped (install_steps=skip): {step.text[:120]}")
            return
        script = _VENV.sub(r"\1 --system-site-packages", script)
        build_dir = self.upper / ".pesflow-build"
        build_dir.mkdir(exist_ok=True)
        (build_dir / f"step-{n}.sh").write_text(script)
        env = {**self.args, **self.env, "HOME": "/root"}
        env.update({k: v for k, v in os.environ.items() if any(fnmatch.fnmatch(k, p) for p in self.b.config.passthrough_env)})
        root = self.home / "root"
        mount = sandbox.mount_root_script(
            lower="/", upper=self.upper, work=self.home / "work", root=root, hide=self.b._hidden(self.task)
        )
        shell = " ".join(sandbox.q(s) for s in self.shell[:-1]) if self.shell[-1] == "-c" else None
        cmd = f". /.pesflow-build/step-{n}.sh" if shell is None else f"{shell} /.pesflow-build/step-{n}.sh"
        body = mount + f"echo {READY}\nset +e\nexec {sandbox.chroot_command(root, env, self.workdir, cmd)}\n"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InfraError(f"{self.task.dockerfile}: build took longer than build_timeout_sec")
        # Build steps keep the host's network, as `docker build` does: package installs need it.
        res = sandbox.run(body, network=True, timeout=min(remaining, self.b.config.step_timeout_sec))
        self.log.write(res.output + f"\n[exit {res.returncode}{' timeout' if res.timed_out else ''} in {res.seconds:.1f}s]\n")
        if READY not in res.output:
            raise InfraError(f"sandbox setup failed while preparing {self.task.name}: {_last_line(res.output)}")
        if res.returncode != 0 or res.timed_out:
            what = "timed out" if res.timed_out else f"exited {res.returncode}"
            if install and self.b.config.install_steps != "require":
                self.warn(f"line {step.line}: package install step {what}; the host's software stands in: {_last_line(res.output)}")
                return
            raise InfraError(
                f"{self.task.dockerfile}:{step.line}: RUN {what}: {_last_line(res.output)} (full log: {self.home / 'build.log'})"
            )

    # after the replay --------------------------------------------------------
    def _link_python(self) -> None:
        """python3 where the python:3.11 images keep it, pointing at the host's interpreter."""
        bin_dir = self.upper / "usr/local/bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        # Dockerfiles name versioned interpreters (python3.11 on the CUDA images): any 3.x the
        # host lacks is the host's own python, standing in like the rest of its software.
        versions = [f"python3.{m}" for m in range(8, 15)]
        for name in ("python3", "python", *versions):
            if not Path("/usr/local/bin", name).exists() and not Path("/usr/bin", name).exists():
                # A wrapper, not a symlink: a symlink to a venv's python loses the venv.
                (bin_dir / name).write_text(f'#!/bin/sh\nexec {host_python()} "$@"\n')
                (bin_dir / name).chmod(0o755)

    def _expose_host_site_packages(self) -> None:
        """Every venv the Dockerfile made also sees the host's site-packages (after its own)."""
        sites = host_site_packages()
        for cfg in self.upper.glob("**/pyvenv.cfg"):
            if len(cfg.relative_to(self.upper).parts) > 6:
                continue
            for sp in cfg.parent.glob("lib/python*/site-packages"):
                (sp / "pesflow-host-site.pth").write_text("\n".join(sites) + "\n")

    def _dev_engine(self) -> str | None:
        loop = self.upper / "opt/loop"
        if (loop / "score_engine.sh").is_file():
            return "score_engine"
        for rel in ("private/dev_tests/test.sh", "private/tests/test.sh"):
            if (loop / rel).is_file():
                return f"/opt/loop/{rel}"
        return None


def _dockerignore(root: Path) -> list[tuple[bool, str]]:
    f = root / ".dockerignore"
    out: list[tuple[bool, str]] = []
    if f.is_file():
        for line in f.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                neg = line.startswith("!")
                out.append((neg, line.lstrip("!").strip("/").replace("**/", "")))
    return out


def _unwhiteout(upper: Path, path: str) -> None:
    """A path that an earlier step deleted (overlay whiteout) is made writable again."""
    cur = upper
    for part in Path(path.lstrip("/")).parts:
        cur = cur / part
        try:
            st = cur.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            cur.unlink()
