"""Tar streams in and out of a container (docker's archive API, a Modal exec of tar).

In: a candidate's files as a tar rooted at `/`. Out: what a grader left under a folder,
written to the host as regular files only. Everything that comes out was written by a
candidate's code, so nothing is trusted: links, devices and paths that climb out are
skipped, each file is cut at a limit, and the whole is bounded in files and bytes.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO, Iterable

MAX_FILES = 2000
MAX_TOTAL = 256 << 20


def files_tar(files: dict[str, tuple[bytes, int, int, int]]) -> bytes:
    """A tar of absolute path -> (data, mode, uid, gid), parents not included."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for path, (data, mode, uid, gid) in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class _ChunkReader(io.RawIOBase):
    """A file object over an iterator of byte chunks (the SDK's streamed archive)."""

    def __init__(self, chunks: Iterable[bytes]):
        self.chunks = iter(chunks)
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # noqa: ANN001
        while not self.pending:
            try:
                self.pending = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def as_file(chunks: Iterable[bytes] | bytes) -> IO[bytes]:
    if isinstance(chunks, (bytes, bytearray)):
        return io.BytesIO(chunks)
    return io.BufferedReader(_ChunkReader(chunks), buffer_size=1 << 16)


def _safe_rel(name: str, strip: int) -> PurePosixPath | None:
    parts = [p for p in PurePosixPath(name).parts if p not in ("", ".")]
    if any(p == ".." for p in parts) or name.startswith("/"):
        return None
    parts = parts[strip:]
    return PurePosixPath(*parts) if parts else None


def extract_regular(stream: IO[bytes], dest: Path, *, limit: int, strip: int = 0) -> int:
    """Write the regular files of a tar stream under `dest` (the first `strip` path parts
    dropped), each cut at `limit` bytes; returns how many were written."""
    n = total = 0
    try:
        tf = tarfile.open(fileobj=stream, mode="r|")
    except tarfile.TarError:  # an empty or broken stream (a container that died): nothing to write
        return 0
    with tf:
        try:
            for member in tf:
                n, total = _write_member(tf, member, dest, limit, strip, n, total)
        except tarfile.TarError:  # cut short: what came before stays
            pass
    return n


def _write_member(tf: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, limit: int, strip: int, n: int,
                  total: int) -> tuple[int, int]:
    """One entry of the stream written out if it is a safe regular file; the new (count, bytes)."""
    rel = _safe_rel(member.name, strip)
    if not member.isreg() or rel is None or n >= MAX_FILES or total >= MAX_TOTAL:
        return n, total  # links, devices, fifos and climbing paths are never materialised on the host
    src = tf.extractfile(member)
    out = dest / rel
    if src is None or any(p.is_symlink() for p in (out, *out.parents) if p == out or dest in p.parents):
        return n, total
    out.parent.mkdir(parents=True, exist_ok=True)
    data = src.read(min(limit, MAX_TOTAL - total))
    out.write_bytes(data)
    return n + 1, total + len(data)


def read_member(stream: IO[bytes]) -> tuple[bytes, tarfile.TarInfo] | None:
    """The first entry of a one-file archive (docker's archive of a file path), if a regular file."""
    try:
        tf = tarfile.open(fileobj=stream, mode="r|")
    except tarfile.TarError:
        return None
    with tf:
        for member in tf:
            if not member.isreg():
                return None
            src = tf.extractfile(member)
            return (src.read() if src else b""), member
    return None


def extract_tree(tf: tarfile.TarFile, dest: Path) -> None:
    """A whole tar of our own making (a package, a build context, a cell's run directory) under
    `dest`, by tarfile's 'data' rule: nothing outside `dest`, no links out of it, no devices.
    Pythons before 3.11.4 (Debian 12's 3.11.2) have no extraction filters: the rule is checked
    here instead, member by member, before anything is written."""
    if hasattr(tarfile, "data_filter"):
        tf.extractall(dest, filter="data")
        return
    tf.extractall(dest, members=checked_members(tf, dest))


def checked_members(tf: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    """The members if every one stays inside `dest` (else TarError naming the first that does not)."""
    root = os.path.realpath(dest)

    def inside(path: str) -> bool:
        real = os.path.realpath(path)
        return real == root or real.startswith(root + os.sep)

    out = []
    for m in tf.getmembers():
        target = os.path.join(root, m.name)
        bad = m.name.startswith("/") or not inside(target) or m.isdev() or m.isfifo()
        if m.issym():
            bad = bad or m.linkname.startswith("/") or not inside(os.path.join(os.path.dirname(target), m.linkname))
        elif m.islnk():
            bad = bad or not inside(os.path.join(root, m.linkname))
        if bad:
            raise tarfile.TarError(f"{m.name}: refused (outside {dest}, a link out of it, or a device)")
        m.mode &= 0o755 if m.isdir() else 0o644 | (m.mode & 0o111)  # no setuid/setgid/sticky, as the data rule
        out.append(m)
    return out
