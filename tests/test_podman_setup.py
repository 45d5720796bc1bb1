"""tools/podman_setup.sh as CI calls it: `$(tools/podman_setup.sh | tail -n 1)` must return once
the script is done, even when it had to start the service. (A subshell left holding the script's
stdout once kept CI waiting for 90 minutes.) The test serves a second socket of its own, so the
engine the other tests use is left alone."""
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("podman") is None,
                                reason="needs root and podman (tools/podman_setup.sh installs it)")


def _ping(sock: Path) -> bool:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    try:
        s.connect(str(sock))
        s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
        return b" 200 " in s.recv(64)
    except OSError:
        return False
    finally:
        s.close()


def _service_pids(sock: Path) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"podman system service .*{sock}"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_setup_started_from_a_pipe_returns_and_leaves_the_service_serving(tmp_path):
    sock = tmp_path / "engine.sock"
    env = {**os.environ, "PESFLOW_PODMAN_SOCKET": str(sock)}
    try:
        # The pipe closes only when every process holding its write end has exited or let go.
        out = subprocess.run(["bash", "-c", "tools/podman_setup.sh | tail -n 1"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"DOCKER_HOST=unix://{sock}"
        assert "serving the Docker API on" in out.stderr  # this run started the service itself
        assert _ping(sock), "the service did not outlive the script"
        # A second run finds it serving and starts nothing.
        again = subprocess.run(["bash", "-c", "tools/podman_setup.sh | tail -n 1"], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert again.returncode == 0 and "serving the Docker API" not in again.stderr
        assert len(_service_pids(sock)) == 1
    finally:
        for pid in _service_pids(sock):
            os.kill(pid, signal.SIGTERM)
