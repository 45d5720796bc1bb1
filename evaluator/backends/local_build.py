"""The local backend's image replay: a package's Dockerfile re-played into its image layer.

COPY/ADD (honouring .dockerignore), ENV/ARG, WORKDIR and SHELL are written into the layer
from here; RUN steps run chrooted into the package's root as it stands so far (the layer
over the allowlisted host folders: evaluator/backends/local_root.py), with the network, as
`docker build` would. Steps that install packages run when the network allows and are
skipped with a warning when they fail: the host's software stands in. Venvs the Dockerfile
makes see the stand-in python's site-packages (after their own).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import stat
import tarfile
import time
from pathlib import Path
from typing import Any

from evaluator import dockerfile, sandbox
from evaluator.backends import archive
from evaluator.backends.base import InfraError
from evaluator.backends.local_root import Layout, RootPlan, make_skeleton
from evaluator.backends.local_root import script as root_script
from evaluator.backends.standin import VERSIONS_PROBE, StandIn, differences, dockerfile_pins
from evaluator.config import LocalConfig
from evaluator.task import DEV_ENGINES, Task, dev_engine_of

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
READY = "@@pesflow:ready"
_INSTALL = re.compile(
    r"\b(apt-get|apt|apk|yum|dnf|microdnf|conda|mamba|micromamba|npm)\s+(-\S+\s+)*(update|install|upgrade|add)\b"
    r"|\bpip[0-9.]*\s+(-\S+\s+)*install\b|-m\s+pip\s+install\b|\buv\s+pip\s+install\b|\b(curl|wget)\s"
)
_VENV = re.compile(r"(-m\s+venv)(?![^\n;&|]*--system-site-packages)")


def is_install_step(script_text: str) -> bool:
    return bool(_INSTALL.search(script_text))


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


class Build:
    """One replay of a Dockerfile into a prepared layer."""

    def __init__(self, task: Task, home: Path, config: LocalConfig, stand_in: StandIn, layout: Layout, identity: Path,
                 version: str, overlay_options: str = ""):
        self.task, self.home, self.config, self.stand_in, self.version = task, home, config, stand_in, version
        self.upper = home / "upper"
        self.plan = RootPlan(layout=layout, image=self.upper, skeleton=home / "skel", identity=identity,
                             root=home / "root", overlay_options=overlay_options)
        make_skeleton(self.plan.skeleton, layout)
        self.log = open(home / "build.log", "w")
        self.warnings: list[str] = []
        self.env: dict[str, str] = {"PATH": f"{Path(stand_in.python).parent}:{BASE_PATH}", "LANG": "C.UTF-8"}
        self.args: dict[str, str] = {}
        self.workdir = "/"
        self.shell = ["/bin/sh", "-c"]
        self.ignore = _dockerignore(task.root)
        self.dockerfile_dir = task.dockerfile.parent

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)
        self.log.write(f"WARNING: {msg}\n")

    def _parse(self, df: Path) -> list[dockerfile.Instruction]:
        try:
            steps = dockerfile.parse(df.read_text(), df)
        except dockerfile.DockerfileError as e:
            raise InfraError(str(e)) from None
        if sum(1 for s in steps if s.kind == "FROM") > 1:
            raise InfraError(f"{df}: multi-stage Dockerfiles are not replayed by the local "
                             "backend; use --backend docker")
        return steps

    def stages(self) -> list[Path]:
        """The Dockerfiles to replay, in order. A loop overlay (`FROM ${BASE_IMAGE}`, the image the
        package's own single-shot Dockerfile builds) comes after that base, replayed first."""
        df = self.task.dockerfile
        first = next((s for s in self._parse(df) if s.kind == "FROM"), None)
        base_rel = self.task.toml.environment.dockerfile_single_shot or "environment/Dockerfile"
        base = self.task.root / base_rel
        if first is not None and "${" in first.text and base.is_file() and base.resolve() != df.resolve():
            return [base, df]
        return [df]

    def run(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.task.toml.environment.build_timeout_sec
        self._link_python()
        all_steps: list[dockerfile.Instruction] = []
        try:
            for df in self.stages():
                steps = self._parse(df)
                # a COPY source not in the package root is looked for beside its Dockerfile
                self.dockerfile_dir = df.parent
                for n, step in enumerate(steps, start=len(all_steps)):
                    self.log.write(f"--- {df.name} step {n} line {step.line}: {step.kind} {step.text[:200]}\n")
                    self.log.flush()
                    if step.kind == "FROM" and all_steps:
                        self.log.write("the overlay's base is the image replayed above\n")
                        continue
                    self._step(n, step, deadline)
                all_steps += steps
        finally:
            self.log.close()
            shutil.rmtree(self.upper / ".pesflow-build", ignore_errors=True)
        self._expose_host_site_packages()
        present = self._versions()
        pins = dockerfile_pins(all_steps, {})
        environment = {"kind": "stand-in", "python": self.stand_in.python, "pinned": pins, "present": present,
                       "differences": differences(pins, present)}
        return {
            "env": self.env, "workdir": self.workdir, "shell": self.shell, "warnings": self.warnings,
            "environment": environment,
            "dev_engine": self._dev_engine(), "python": self.stand_in.python, "backend": self.version,
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
            self._dest(self.workdir).mkdir(parents=True, exist_ok=True)
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
            raise InfraError(f"{self.task.dockerfile}:{step.line}: COPY --from is not replayed by the "
                             "local backend; use --backend docker")
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
            matches = []
            for ctx in (self.task.root, self.dockerfile_dir):
                found = (sorted(ctx.glob(pattern.lstrip("/"))) if any(c in pattern for c in "*?[")
                         else [ctx / pattern.lstrip("/")])
                matches = [m for m in found if m.exists() and not self._ignored(m)]
                if matches:
                    break
            if not matches:
                raise InfraError(f"{self.task.dockerfile}:{step.line}: {step.kind} source {pattern!r} not found in the "
                                 "package; add it or fix the Dockerfile")
            for src in matches:
                if src.is_dir():
                    self._copy_tree(src, self._dest(dest_s), mode)
                elif step.kind == "ADD" and tarfile.is_tarfile(src):
                    target = self._dest(dest_s)
                    target.mkdir(parents=True, exist_ok=True)
                    with tarfile.open(src) as tf:
                        archive.extract_tree(tf, target)
                else:
                    target = self._dest(dest_s) / src.name if dest_is_dir else self._dest(dest_s)
                    self._copy_file(src, target, mode)

    def _dest(self, d: str) -> Path:
        """Where a path of the image is written in its layer (a host area's part apart)."""
        path = d if d.startswith("/") else os.path.join(self.workdir, d)
        _unwhiteout(self.plan.layer_of(path), path)
        return self.plan.image_at(path)

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
        if install and self.config.install_steps == "skip":
            self.warn(f"line {step.line}: package install step skipped (install_steps=skip): {step.text[:120]}")
            return
        script = _VENV.sub(r"\1 --system-site-packages", script)
        build_dir = self.upper / ".pesflow-build"
        build_dir.mkdir(exist_ok=True)
        (build_dir / f"step-{n}.sh").write_text(script)
        env = {**self.args, **self.env, "HOME": "/root"}
        env.update({k: v for k, v in os.environ.items()
                    if any(fnmatch.fnmatch(k, p) for p in self.config.passthrough_env)})
        root = self.plan.root
        mount = root_script(self.plan.build_lines(self.home / "work"))
        shell = " ".join(sandbox.q(s) for s in self.shell[:-1]) if self.shell[-1] == "-c" else None
        cmd = f". /.pesflow-build/step-{n}.sh" if shell is None else f"{shell} /.pesflow-build/step-{n}.sh"
        body = mount + f"echo {READY}\nset +e\nexec {sandbox.chroot_command(root, env, self.workdir, cmd)}\n"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InfraError(f"{self.task.dockerfile}: build took longer than build_timeout_sec")
        # Build steps keep the host's network, as `docker build` does: package installs need it.
        res = sandbox.run(body, network=True, timeout=min(remaining, self.config.step_timeout_sec))
        self.log.write(res.output
                       + f"\n[exit {res.returncode}{' timeout' if res.timed_out else ''} in {res.seconds:.1f}s]\n")
        self._expose_host_site_packages()  # a venv this step made sees the stand-in from the next step on
        if READY not in res.output:
            raise InfraError(f"sandbox setup failed while preparing {self.task.name}: {last_line(res.output)}")
        if res.returncode != 0 or res.timed_out:
            what = "timed out" if res.timed_out else f"exited {res.returncode}"
            if install and self.config.install_steps != "require":
                self.warn(f"line {step.line}: package install step {what}; the host's software "
                          f"stands in: {last_line(res.output)}")
                return
            skipped = [w for w in self.warnings if "package install step" in w]
            why = (f"; {len(skipped)} package install step(s) before it did not run, so the "
                   "stand-in python was all it had"
                   if skipped else "")
            raise InfraError(f"{self.task.dockerfile}:{step.line}: RUN {what}: {last_line(res.output)}{why} "
                             f"(full log: {self.home / 'build.log'})")

    # after the replay --------------------------------------------------------
    def _versions(self) -> dict[str, str | None]:
        """What a grading's python has (the image's venv, seeing the stand-in), asked in the root."""
        env = {**self.env, "HOME": "/root", "PYTHONDONTWRITEBYTECODE": "1"}
        cmd = f"python3 -c {sandbox.q(VERSIONS_PROBE)}"
        body = root_script(self.plan.build_lines(self.home / "work")) + \
            f"echo {READY}\nexec {sandbox.chroot_command(self.plan.root, env, self.workdir, cmd)}\n"
        res = sandbox.run(body, network=False, timeout=120)
        for line in res.output.splitlines():
            if line.startswith("@@versions:"):
                try:
                    return json.loads(line[len("@@versions:"):])
                except ValueError:
                    break
        self.warn(f"could not read the grading python's versions: {last_line(res.output)}")
        return {}

    def _link_python(self) -> None:
        """python3 where the python:3.11 images keep it, pointing at the host's interpreter."""
        bin_dir = self.plan.image_at("/usr/local/bin")
        bin_dir.mkdir(parents=True, exist_ok=True)
        # Dockerfiles name versioned interpreters (python3.11 on the CUDA images): any 3.x the
        # host lacks is the host's own python, standing in like the rest of its software.
        versions = [f"python3.{m}" for m in range(8, 15)]
        for name in ("python3", "python", *versions):
            if not Path("/usr/local/bin", name).exists() and not Path("/usr/bin", name).exists():
                # A wrapper, not a symlink: a symlink to a venv's python loses the venv.
                (bin_dir / name).write_text(f'#!/bin/sh\nexec {self.stand_in.python} "$@"\n')
                (bin_dir / name).chmod(0o755)

    def _expose_host_site_packages(self) -> None:
        """Every venv the Dockerfile made also sees the stand-in's site-packages (after its own)."""
        sites = list(self.stand_in.site_packages)
        for cfg in [*self.upper.glob("**/pyvenv.cfg"), *self.plan.image_areas.glob("**/pyvenv.cfg")]:
            if len(cfg.parts) - len(self.home.parts) > 8:
                continue
            for sp in cfg.parent.glob("lib/python*/site-packages"):
                (sp / "pesflow-host-site.pth").write_text("\n".join(sites) + "\n")

    def _dev_engine(self) -> str | None:
        return dev_engine_of({e for e in DEV_ENGINES if self.plan.image_at(e).is_file()})


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
