"""Small calls to the container engine that the docker backend's other modules share: a script
run as one exec (as root by default, with our own environment, never the image's), one file
read out of a container, an exec's exit code, and an engine's error made short enough for a
message. Only the SDK is used, never a docker binary.
"""

from __future__ import annotations

import tarfile
import time

import docker
from docker.errors import NotFound

from evaluator.backends import archive

# never the image's PATH (a venv a candidate can write)
OWN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def _short(e: BaseException) -> str:
    text = getattr(e, "explanation", None) or str(e)
    return " ".join(str(text).split())[:300]


def _last_line(text: str) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def _exec(api: docker.APIClient, cid: str, script: str, *, args: list[str] = (), user: str = "0",
               env: dict[str, str] | None = None) -> tuple[int, str]:  # type: ignore[assignment]
    ex = api.exec_create(cid, ["/bin/sh", "-c", script, "pesflow", *args], user=user,
                         environment={**OWN_ENV, **(env or {})})
    out = api.exec_start(ex["Id"]).decode(errors="replace")
    return _exit_code(api, ex["Id"]), out


def _read_file(api: docker.APIClient, cid: str, path: str) -> tuple[bytes, tarfile.TarInfo] | None:
    try:
        stream, _ = api.get_archive(cid, path)
    except NotFound:
        return None
    return archive.read_member(archive.as_file(stream))


def _exit_code(api: docker.APIClient, exec_id: str) -> int:
    for _ in range(50):  # the engine may report the exec as running for a moment after its stream ends
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return int(info["ExitCode"])
        time.sleep(0.02)
    return -1


def unenforced_limits(info: dict) -> list[str]:
    """The limits an engine takes and does not hold, from its `info`: a rootless engine (podman's
    `Rootless`, Docker's `name=rootless`) on cgroups v1 holds none of them (podman: "Resource
    limits are not supported and ignored on cgroups V1 rootless systems"); an engine may also say
    it has no memory or pids controller."""
    rootless = bool(info.get("Rootless")) or any("name=rootless" in str(o) for o in info.get("SecurityOptions") or [])
    if rootless and str(info.get("CgroupVersion") or "") == "1":
        return ["memory", "processes", "cpus"]
    return [name for name, key in (("memory", "MemoryLimit"), ("processes", "PidsLimit")) if info.get(key) is False]
