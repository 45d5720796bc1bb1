"""The host python that stands in for a task image's python on the local backend.

It is found by asking the interpreter itself (any python: the one pesflow runs on, a venv's
under /tmp or /home, a conda prefix under /opt): its prefixes and every folder on its
sys.path are what the sandbox's root must show, at their own paths. When a grading fails
for want of a module that the package's own files import and the stand-in cannot import,
that is the stand-in's fault (infra_error), never the candidate's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from evaluator import dockerfile


class StandInError(Exception):
    """The stand-in python cannot be used: the machine's problem, named with its fix."""


@dataclass(frozen=True)
class StandIn:
    python: str  # as invoked: a venv's python keeps its venv
    version: str  # "3.11.7"
    paths: tuple[str, ...]  # host folders it needs (prefixes, sys.path), outermost only
    site_packages: tuple[str, ...]  # what a venv made in the image should also see


_PROBE = (
    "import json, os, site, sys\n"
    "pre = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "
    "os.path.dirname(os.path.realpath(sys.executable))]\n"
    "sites = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])\n"
    "print(json.dumps({'version': '%d.%d.%d' % sys.version_info[:3], 'paths': pre + sites + [p for p in "
    "sys.path if p], 'sites': sites}))\n"
)


@lru_cache(maxsize=8)
def discover(python: str, refuse: tuple[str, ...] = ()) -> StandIn:
    """Ask `python` where it lives. A folder that holds one of `refuse` (pesflow's tree, the task
    roots, the cache) is left out: binding it would show what it holds."""
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONHOME"}).stdout
        found = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        raise StandInError(f"the stand-in python {python} does not run ({type(e).__name__}); "
                           "set evaluator.local.python to a working interpreter") from None

    def keep(p: str) -> bool:
        return os.path.isdir(p) and p != "/" and not any(within(r, p) for r in refuse)

    paths = [os.path.abspath(p) for p in found["paths"]]
    sites = [os.path.abspath(p) for p in found["sites"]]
    return StandIn(python=python, version=found["version"], paths=tuple(outermost([p for p in paths if keep(p)])),
                   site_packages=tuple(p for p in dict.fromkeys(sites) if keep(p)))


def within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def outermost(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in sorted(set(paths), key=lambda p: (len(p), p)):
        if not any(within(p, o) for o in out):
            out.append(p)
    return out


_MISSING = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?([A-Za-z_][\w.]*)'?")


def missing_modules(text: str) -> list[str]:
    """Top-level module names a Python traceback in `text` says could not be found."""
    return list(dict.fromkeys(m.group(1).split(".")[0] for m in _MISSING.finditer(text)))


def package_imports(root: Path, name: str, limit_bytes: int = 64 << 20) -> bool:
    """Does a file of the package (its repository, its graders) import `name`? Then the package
    expects it to exist, and a stand-in without it is what failed."""
    pat = re.compile(rf"^\s*(?:import\s+{re.escape(name)}\b|from\s+{re.escape(name)}(?:\.|\s+import\b))", re.M)
    seen = 0
    for p in root.rglob("*"):
        if p.suffix not in (".py", ".sh", ".txt", ".toml", ".cfg") or not p.is_file() or p.is_symlink():
            continue
        try:
            size = p.stat().st_size
            if size > 2 << 20:
                continue
            seen += size
            if seen > limit_bytes:
                return False
            if (pat.search(p.read_text(errors="replace"))
                or (p.name.startswith("requirements") and name in p.read_text(errors="replace"))):
                return True
        except OSError:
            continue
    return False


@lru_cache(maxsize=256)
def importable(python: str, name: str) -> bool:
    try:
        return subprocess.run([python, "-c",
                               f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is None)"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def stand_in_fault(text: str, python: str, package_root: Path) -> str | None:
    """A one-line infra error when a grading failed for a module the stand-in lacks, else None:
    the module is one the package's own files import (not one only the candidate names), and
    the stand-in python cannot import it here either."""
    for name in missing_modules(text):
        if package_imports(package_root, name) and not importable(python, name):
            return (f"the stand-in python ({python}) has no module {name!r}, which the "
                    f"package imports; install it there ({python} -m pip install {name}), set evaluator.local.python "
                    "to one that has it, or use --backend docker")
    return None


# ---------------------------------------------------------------- what the image pins vs what stands in
PINNED = ("torch", "triton", "vllm", "flash-attn", "numpy")
_PIN = re.compile(r"(?<![\w.-])(torch|triton|vllm|flash[-_]attn|numpy)==([0-9][\w.+-]*)")
VERSIONS_PROBE = (
    "import json, sys\n"
    "from importlib import metadata\n"
    "out = {'python': '%d.%d.%d' % sys.version_info[:3]}\n"
    "for name in ('torch', 'triton', 'vllm', 'flash-attn', 'numpy'):\n"
    "    try:\n        out[name] = metadata.version(name)\n"
    "    except Exception:\n        out[name] = None\n"
    "try:\n    import torch\n    out['cuda'] = torch.version.cuda\n"
    "except Exception:\n    out['cuda'] = None\n"
    "print('@@versions:' + json.dumps(out))\n"
)


def dockerfile_pins(steps: list[dockerfile.Instruction], args: dict[str, str]) -> dict[str, str]:
    """What a Dockerfile pins: the base image's python and CUDA, and `name==version` installs."""
    pins: dict[str, str] = {}
    scope = dict(args)
    for step in steps:
        if step.kind == "ARG":
            for k, v in dockerfile.parse_key_values(step.text, scope):
                scope.setdefault(k, v)
        elif step.kind == "FROM":
            image = dockerfile.expand(step.text.split()[0], scope)
            m = re.search(r"python:(\d+\.\d+)", image)
            if m:
                pins["python"] = m.group(1)
            m = re.search(r"cuda:(\d+\.\d+)", image)
            if m:
                pins["cuda"] = m.group(1)
                if "ubuntu22.04" in image:
                    pins.setdefault("python", "3.10")  # the CUDA images' system python
        elif step.kind == "RUN":
            for name, version in _PIN.findall(dockerfile.expand(step.shell_script(), scope)):
                pins[name.replace("_", "-")] = version
    return pins


def differences(pins: dict[str, str], present: dict[str, str | None]) -> list[str]:
    """Each pinned component the grading root has at another version, in one line."""
    out = []
    for name, want in pins.items():
        have = present.get(name)
        base = (have or "").split("+")[0]
        if have is None or not (base == want or base.startswith(want + ".")):
            out.append(f"{name}: the Dockerfile pins {want}, the stand-in has {have or 'none'}")
    return out
