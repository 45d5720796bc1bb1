"""The folders the local backend's gradings run in (<cache>/<key>/runs/<id>): who holds each,
and removing the ones nobody holds.

A grading holds its folder through an flock on `<id>.lock` beside it, taken before the folder
exists and let go only after the folder is gone. So a folder whose lock nobody holds, or that has
no lock file at all, is a remnant: its pesflow was killed while it set the folder up, graded in it
or was removing it (even midway, once the removal had taken some files), or its removal failed.
A lock and not a pid: a pid is reused by unrelated processes on a busy machine, and a live
process's own failed removal must count as a remnant too. flock locks belong to one open file,
so a sweep in the same process never takes a folder from a grading still running there.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_SUFFIX = ".lock"


def _lock_path(folder: Path) -> Path:
    return folder.with_name(folder.name + LOCK_SUFFIX)


@contextmanager
def grading_folder(runs: Path) -> Iterator[Path]:
    """A new, empty folder under `runs`, held while the block runs and removed after it."""
    runs.mkdir(parents=True, exist_ok=True)
    folder = runs / uuid.uuid4().hex[:12]
    lock = _lock_path(folder)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()}\n".encode())  # for a person looking: who held it
        folder.mkdir()
        try:
            yield folder
        finally:
            remove_tree(folder)
            if not folder.exists():  # else the lock file stays: a later sweep sees an unheld folder
                lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """rmtree that also takes folders left mode 000: overlay's workdir/work, made by a mapped
    root in a user namespace, is the user's own on disk but unreadable to it outside."""
    def fix(func, p, _exc) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)


def sweep_folders(cache: Path) -> tuple[int, int]:
    """Remove every grading folder under `cache` that no grading holds, killing what still runs
    rooted in it first. Returns (folders removed, processes killed)."""
    folders = procs = 0
    for folder in cache.glob("*/runs/*"):
        if folder.name.endswith(LOCK_SUFFIX) or not folder.is_dir():
            continue
        lock = _lock_path(folder)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None  # no lock file: a remnant (or a grading that has just removed both)
        except OSError:
            continue
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a grading holds it
            if not folder.is_dir():
                continue  # its grading removed it while we looked
            procs += kill_rooted_in(folder)
            remove_tree(folder)
            if not folder.exists():
                lock.unlink(missing_ok=True)
                folders += 1
        finally:
            if fd is not None:
                os.close(fd)
    return folders, procs


def kill_rooted_in(folder: Path) -> int:
    """Kill processes whose root is inside `folder` (a sandbox left running by a killed pesflow)."""
    n = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/root").startswith(str(folder)):
                os.kill(int(entry.name), signal.SIGKILL)
                n += 1
        except OSError:
            continue
    return n
