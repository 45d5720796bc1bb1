"""A local grading's scratch: one tmpfs that caps every write the grading makes (evaluator/
sandbox.py scratch_script makes it), and whether the grading filled it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from evaluator.limits import DISK_QUOTA


def watch(scratch: Path, size_mb: int | None) -> Callable[[int], str | None] | None:
    """A watch for sandbox.run: the scratch tmpfs, seen through the namespace's init, is full."""
    if not size_mb:
        return None

    def full_now(pid1: int) -> str | None:
        try:
            v = os.statvfs(f"/proc/{pid1}/root{scratch}")
        except OSError:
            return None
        if v.f_blocks * v.f_frsize != size_mb << 20:
            return None  # not mounted yet: this is the host's disk
        return DISK_QUOTA if _full(v.f_bfree * v.f_frsize, size_mb << 20, v.f_ffree) else None

    return full_now


def _full(free: int, total: int, inodes_free: int) -> bool:
    return free < max(1 << 20, total // 100) or inodes_free == 0


def full(status: dict[str, str], size_mb: int | None) -> str | None:
    """DISK_QUOTA where the init's last look at the scratch (its status) found it full."""
    used, total, inodes = (as_int(status.get("scratch_used")), as_int(status.get("scratch_total")),
                           as_int(status.get("inodes_free")))
    if size_mb and used is not None and total and _full(total - used, total, inodes if inodes is not None else 1):
        return DISK_QUOTA
    return None


def as_int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None
