"""Nsight Compute inside a GPU grading's sandbox: the host's install (found on its PATH, a CUDA
toolkit's launcher followed to the install it starts) is bound read-only where the profile
probe looks (evaluator/hardware.py NCU_MOUNT, pesflow_profile.HOST_NCU), and a real local
grading's process can run it. A fake ncu stands in for the real one: no GPU here."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from evaluator import hardware
from evaluator.evaluation import CandidateSource, Evaluator
from evaluator.config import EvaluatorConfig, LocalConfig
from evaluator.trust import instrument
from tests.conftest import needs_root

sys.path.insert(0, str(instrument.INSIDE))
import pesflow_profile  # noqa: E402 - the probe's own module, as the sandbox loads it


def _exe(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


def test_the_probe_looks_where_the_sandbox_binds():
    assert pesflow_profile.HOST_NCU == hardware.NCU_MOUNT + "/ncu"


def test_a_standalone_install_is_bound_whole(tmp_path):
    ncu = _exe(tmp_path / "nsight-compute" / "2025.1.0" / "ncu", "#!/bin/sh\necho fake\n")
    (tmp_path / "bin").mkdir()
    os.symlink(ncu, tmp_path / "bin" / "ncu")  # a link on the PATH: its target's folder is the install
    assert hardware.ncu_install(str(tmp_path / "bin")) == ncu.parent
    assert (ncu.parent, hardware.NCU_MOUNT) in hardware.gpu_binds(str(tmp_path / "bin"))


def test_a_toolkit_s_launcher_is_followed_to_its_install(tmp_path):
    _exe(tmp_path / "cuda" / "bin" / "ncu", "#!/bin/sh\nexec \"$(dirname \"$0\")/../nsight-compute-2024.1.0/ncu\" \"$@\"\n")
    inst = _exe(tmp_path / "cuda" / "nsight-compute-2024.1.0" / "ncu", "#!/bin/sh\necho real\n").parent
    assert hardware.ncu_install(str(tmp_path / "cuda" / "bin")) == inst


def test_no_ncu_on_the_host_binds_nothing_for_it(tmp_path):
    assert hardware.ncu_install(str(tmp_path)) is None
    assert all(dest != hardware.NCU_MOUNT for _, dest in hardware.gpu_binds(str(tmp_path)))
    found = pesflow_profile.find_ncu(str(tmp_path))  # not on the PATH: only where an installer puts it, if anywhere
    assert found is None or found.endswith("/ncu") and not found.startswith(str(tmp_path))


@needs_root
def test_a_gpu_grading_s_process_can_run_the_host_s_ncu_and_not_change_it(tmp_path, monkeypatch, toy_package, cache_dir):
    """A GPU package (the toy with gpus = 1, checked with --device cpu) graded for real: its
    candidate's process runs the fake ncu at HOST_NCU and finds its folder read-only."""
    assert all(dest != hardware.NCU_MOUNT for _, dest in hardware.gpu_binds())  # asked before ncu joined the PATH, as an earlier grading would
    _exe(tmp_path / "nsight" / "ncu", "#!/bin/sh\necho fake-ncu-ran \"$@\"\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'nsight'}{os.pathsep}{os.environ['PATH']}")
    toml = toy_package / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 0", "gpus = 1"))
    code = ("import subprocess\n"
            f"out = subprocess.run([{pesflow_profile.HOST_NCU!r}, '--version'], capture_output=True, text=True).stdout.strip()\n"
            "try:\n"
            f"    open({hardware.NCU_MOUNT + '/x'!r}, 'w')\n    w = 'written'\n"
            "except OSError as e:\n    w = e.strerror\n"
            "PROBE = {'ncu': out, 'write': w}\n")
    fast = "def sum_squares(n):\n    n -= 1\n    return n * (n + 1) * (2 * n + 1) // 6 if n > 0 else 0\n"
    ev = Evaluator(EvaluatorConfig(local=LocalConfig(cache_dir=str(cache_dir))), tasks_roots=[str(toy_package.parents[2])],
                   log_root=tmp_path / "evaluations")
    try:
        v = ev.evaluate("kfc/toy-sum", candidate=CandidateSource(files={"toy/kernel.py": fast + "\n" + code}),
                        grader="hidden", device="cpu")
    finally:
        ev.close()
    assert v.raw["probe"] == {"ncu": "fake-ncu-ran --version", "write": "Read-only file system"}, v.message
