"""Grading folders: a folder is removed by a later sweep exactly when no grading holds it,
however its pesflow ended (killed while setting up, grading or removing it; or alive with a
removal that failed), and never while its grading runs, in this process or another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from evaluator.backends import local_folders
from evaluator.backends.local_folders import grading_folder, sweep_folders
from tests.conftest import REPO


def _runs(cache):
    return cache / "key0" / "runs"


def test_a_held_folder_is_left_alone_and_gone_with_its_lock_after_the_grading(tmp_path):
    with grading_folder(_runs(tmp_path)) as folder:
        (folder / "seed").mkdir()
        (folder / "seed" / "kernel.py").write_text("x = 1\n")
        assert sweep_folders(tmp_path) == (0, 0)  # same process, another open file: still held
        assert (folder / "seed" / "kernel.py").is_file()
    assert list(_runs(tmp_path).iterdir()) == []


def test_a_folder_whose_lock_file_went_first_is_a_remnant(tmp_path):
    # A pesflow killed midway through removing its folder, or between making it and locking it.
    runs = _runs(tmp_path)
    (runs / "abc123" / "root").mkdir(parents=True)
    assert sweep_folders(tmp_path) == (1, 0)
    assert list(runs.iterdir()) == []


def test_an_unheld_lock_naming_a_live_pid_does_not_keep_its_folder(tmp_path):
    # The pid a killed pesflow wrote may belong to another process by now: only the lock counts.
    runs = _runs(tmp_path)
    (runs / "abc123").mkdir(parents=True)
    (runs / "abc123.lock").write_text(f"{os.getpid()}\n")
    assert sweep_folders(tmp_path) == (1, 0)
    assert list(runs.iterdir()) == []


def test_a_killed_holder_lets_go_and_a_living_one_does_not(tmp_path):
    holder = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from evaluator.backends.local_folders import grading_folder
        with grading_folder(Path({str(_runs(tmp_path))!r})) as f:
            (f / "out").mkdir()
            print(f, flush=True)
            time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", holder], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        folder = proc.stdout.readline().strip()
        assert folder and os.path.isdir(folder)
        assert sweep_folders(tmp_path) == (0, 0) and os.path.isdir(folder)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert os.path.isdir(folder)  # a killed process tidies nothing up
        assert sweep_folders(tmp_path) == (1, 0)
        assert list(_runs(tmp_path).iterdir()) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_removal_that_failed_in_a_live_process_is_finished_by_the_next_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(local_folders.shutil, "rmtree", lambda *a, **k: None)  # e.g. a file busy at the time
    with grading_folder(_runs(tmp_path)) as folder:
        (folder / "out").mkdir()
    assert folder.is_dir()
    monkeypatch.undo()
    assert sweep_folders(tmp_path) == (1, 0)
    assert list(_runs(tmp_path).iterdir()) == []
