"""Extracting our own tars (packages, build contexts, a cell's run directory) keeps everything
inside the destination on every Python, those without tarfile's filters (before 3.11.4) too."""

from __future__ import annotations

import io
import tarfile

import pytest

from evaluator.backends import archive


def tar_of(*members: tuple[str, str | None, str | None]) -> tarfile.TarFile:
    """(name, file text or None, symlink target or None) entries."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, text, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tf.addfile(info)
            else:
                data = (text or "").encode()
                info.size, info.mode = len(data), 0o4755
                tf.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return tarfile.open(fileobj=buf)


def test_a_tree_of_files_and_inner_links_comes_out_whole_without_setuid(tmp_path):
    tf = tar_of(("pkg/a.py", "x = 1\n", None), ("pkg/link.py", None, "a.py"))
    archive.extract_tree(tf, tmp_path)
    assert (tmp_path / "pkg/a.py").read_text() == "x = 1\n" and (tmp_path / "pkg/link.py").read_text() == "x = 1\n"
    # the fallback's own rule, whatever this Python has
    members = archive.checked_members(tar_of(("pkg/a.py", "x", None)), tmp_path / "other")
    assert members[0].mode & 0o7000 == 0


@pytest.mark.parametrize("member", [("../out.py", "x", None), ("/etc/evil", "x", None), ("pkg/up", None, "../../etc/passwd"),
                                    ("pkg/abs", None, "/etc/passwd")])
def test_paths_and_links_out_of_the_folder_are_refused(tmp_path, member):
    with pytest.raises(tarfile.TarError):
        archive.checked_members(tar_of(member), tmp_path / "dest")
    try:  # tarfile's own data filter raises its FilterError (a TarError), or makes an absolute name relative
        archive.extract_tree(tar_of(member), tmp_path / "dest")
    except tarfile.TarError:
        pass
    else:
        assert member[0].startswith("/") and (tmp_path / "dest" / member[0].lstrip("/")).is_file()
    assert not (tmp_path / "out.py").exists()
