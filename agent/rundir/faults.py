"""A write the machine refused (disk full, read-only or unwritable file system): one line naming
the path and the way on, never a traceback.

Everything a run writes goes through the store and its journal (agent/rundir/store.py), whose
writes are whole or absent (atomic files, whole checkpoint folders, fsynced journal lines, a torn
line cut back), so a fault leaves the run directory as it was before the write: resumable once
the machine is fixed. The command (agent/cli.py) prints `str(fault)` and exits 3.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator

# errno -> what to fix. Any other OSError is a bug or a fault we cannot name: it stays a traceback.
MACHINE = {
    errno.ENOSPC: "free space on its file system",
    errno.EDQUOT: "raise the disk quota or free space",
    errno.EROFS: "the file system is read-only; remount it read-write or choose another folder",
    errno.EACCES: "make it writable for this user",
    errno.EPERM: "make it writable for this user",
}


class MachineFault(Exception):
    """A write the machine refused. `run_dir`: the run directory it belonged to, if any."""

    def __init__(self, path: Path | str, err: OSError, run_dir: Path | None = None):
        self.path, self.err, self.run_dir = Path(path), err, run_dir
        what = os.strerror(err.errno) if err.errno else str(err)
        fix = MACHINE.get(err.errno or 0, "fix the machine")
        if run_dir is not None:
            way = f"{fix}, then: pesflow resume {run_dir} (everything recorded before it is kept)"
        else:
            way = f"{fix}, then run the command again"
        super().__init__(f"cannot write {path}: {what}; {way}")


def is_machine(err: BaseException) -> bool:
    """A refused write: space and read-only file systems always; a permission error only with the
    file it was refused on (without one, EPERM is a mount or a namespace refused: not a write)."""
    if not isinstance(err, OSError) or err.errno not in MACHINE:
        return False
    return err.errno not in (errno.EPERM, errno.EACCES) or isinstance(err.filename, str)


@contextlib.contextmanager
def writing(path: Path | str, run_dir: Path | None = None) -> Iterator[None]:
    """Turn the machine's refusal of a write to `path` into a MachineFault naming it."""
    try:
        yield
    except MachineFault:
        raise
    except OSError as e:
        if e.errno not in MACHINE:  # here the write is known: a permission error on it is the folder's
            raise
        named = e.filename if isinstance(e.filename, str) and not Path(e.filename).name.startswith(".") else None
        raise MachineFault(named or path, e, run_dir) from None  # a hidden name is our temporary file: name its target
