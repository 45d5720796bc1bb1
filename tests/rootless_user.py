"""An ordinary user to run pesflow as, made by root (CI runs as root on a fresh machine).

As a new user would have it: an account with a home, a venv of the system python in that
home, pesflow's tree installed there (a copy: the checkout may sit where the user cannot
read, e.g. under /root), and the few packages pesflow's evaluator imports copied into the
venv from the interpreter running the tests (it may live under /root too). `run_as` runs a
command as that user with a clean environment, as `su - user` would give it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
USER = "pesflow-rootless"
SYSTEM_PYTHON = "/usr/bin/python3"
# What `evaluator` imports beyond the standard library (pydantic and its parts), and numpy for tasks.
PACKAGES = ("pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection", "yaml", "numpy",
            "rich", "markdown_it", "mdurl", "pygments")  # the CLI's own
TREE = ("agent", "evaluator", "configs", "tests/rootless_driver.py",
        "tests/fixtures/tasks", "tasks/kfc/wre-router-power-of-two-choices-loop16")


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path

    @property
    def python(self) -> str:
        return str(self.home / "venv/bin/python3")

    @property
    def tree(self) -> Path:
        return self.home / "pesflow"

    @property
    def cache(self) -> Path:
        return self.home / ".cache/pesflow"


def usable() -> str | None:
    """Why the as-user tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "making an ordinary user needs root"
    for tool in ("useradd", "setpriv", "unshare"):
        if shutil.which(tool) is None:
            return f"no {tool}"
    if not Path(SYSTEM_PYTHON).exists():
        return f"no system python at {SYSTEM_PYTHON}"
    # the packages are copied from this interpreter: their compiled parts need the same minor version
    have = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True).stdout
    if have.strip() != str(tuple(sys.version_info[:2])):
        return f"{SYSTEM_PYTHON} is {have.strip()}, the tests' python {tuple(sys.version_info[:2])}"
    # a chroot, a container or a sysctl may refuse ordinary users a user namespace; CI, a machine
    # of its own, sets PESFLOW_REQUIRE_ROOTLESS=1 so that a refusal there fails instead of skipping
    tried = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "--user",
                            "--map-root-user", "true"], capture_output=True, text=True)
    if tried.returncode and os.environ.get("PESFLOW_REQUIRE_ROOTLESS") != "1":
        return "this machine refuses an ordinary user a user namespace: " + (tried.stderr.strip().splitlines() or ["?"])[-1]
    return None


def make(name: str = USER) -> User:
    """The user, its venv and its copy of pesflow (the copy refreshed on every call: the tree
    under test is this checkout's)."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, capture_output=True)
        pw = pwd.getpwnam(name)
    user = User(name, pw.pw_uid, pw.pw_gid, Path(pw.pw_dir))
    venv = user.home / "venv"
    if not (venv / "bin/python3").exists():
        run_as(user, [SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(run_as(user, [user.python, "-c", "import site; print(site.getsitepackages()[0])"], check=True).stdout.strip())
    for name_ in PACKAGES:
        _copy_package(name_, site)
    if user.tree.exists():
        shutil.rmtree(user.tree)
    for rel in TREE:
        src, dest = REPO / rel, user.tree / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest)
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(user.home)], check=True)
    return user


def _copy_package(name: str, site: Path) -> None:
    mod = __import__(name)
    src = Path(mod.__file__)
    if src.name == "__init__.py":
        src = src.parent
    dest = site / src.name
    if dest.exists():
        return
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "tests"))
        for extra in src.parent.glob(f"{name}.libs"):  # numpy's bundled libraries
            shutil.copytree(extra, site / extra.name, symlinks=True, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dest)


def env_of(user: User) -> dict[str, str]:
    return {"HOME": str(user.home), "USER": user.name, "LOGNAME": user.name, "LANG": "C.UTF-8",
            "PATH": f"{user.home}/venv/bin:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(user.tree)}


def as_user_argv(user: User, argv: list[str]) -> list[str]:
    return ["setpriv", "--reuid", str(user.uid), "--regid", str(user.gid), "--init-groups", "--reset-env", "--",
            "env", "-i", *(f"{k}={v}" for k, v in env_of(user).items()), *argv]


def run_as(user: User, argv: list[str], check: bool = False, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(as_user_argv(user, argv), cwd=str(user.home), capture_output=True, text=True, check=check,
                          timeout=timeout, **kw)


def drive(user: User, spec: dict, timeout: float = 600) -> dict:
    """Run tests/rootless_driver.py as the user on `spec`; its JSON answer."""
    r = run_as(user, [user.python, str(user.tree / "tests/rootless_driver.py"), json.dumps(spec)], timeout=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("@@result ")]
    if not lines:
        raise AssertionError(f"the driver gave no result (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return json.loads(lines[-1][len("@@result "):])


if __name__ == "__main__":
    print(make(sys.argv[1] if len(sys.argv) > 1 else USER))
