"""The journal always ends on a whole line (issue 19): a torn tail is cut on reopening and said in
one line, and a write the disk refuses is cut back at once, so the chain audits clean after either.
Real files; the full disk is a real tmpfs (root)."""

from __future__ import annotations

import json
import subprocess

import pytest

from agent.rundir.faults import MachineFault
from agent.rundir.journal import Journal, read, torn_tail, verify
from tests.conftest import needs_root


def test_torn_tail_counts_the_bytes_that_are_not_whole_lines():
    whole = b'{"a": 1}\n{"b": 2}\n'
    assert torn_tail(whole) == 0 and torn_tail(b"") == 0
    assert torn_tail(whole + b'{"c": ') == len(b'{"c": ')  # cut mid-line
    assert torn_tail(whole + b'{"c": 3\n') == len(b'{"c": 3\n')  # ended, but not JSON: torn too
    assert torn_tail(b'{"c') == 3


def test_reopening_cuts_a_torn_tail_says_so_and_chains_on(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    for m in "ab":
        j.append("warning", message=m)
    path.write_bytes(path.read_bytes() + b'{"seq": 2, "ts": "2026-12-01T00:00:00", "kind": "checkp')
    again = Journal(path)
    assert "torn last line" in again.torn_warning() and "checkp" in again.torn_warning()
    assert "\n" not in again.torn_warning()  # one line
    again.append("warning", message="c")
    assert verify(path) == [] and [e["data"]["message"] for e in read(path)] == ["a", "b", "c"]
    assert Journal(path).torn_warning() is None  # a whole file is left as it is


@needs_root
def test_a_write_the_full_disk_refuses_is_cut_back_and_named(tmp_path):
    fs = tmp_path / "fs"
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(fs)], check=True)
    try:
        j = Journal(fs / "journal.jsonl", run_dir=fs)
        j.append("warning", message="kept")
        (fs / "filler").write_bytes(b"x" * (64 * 1024 - (fs / "journal.jsonl").stat().st_size - 4096))  # nearly full
        with pytest.raises(MachineFault) as e:
            for _ in range(100):
                j.append("warning", message="y" * 2000)
        assert "No space left on device" in str(e.value) and f"pesflow resume {fs}" in str(e.value)
        data = (fs / "journal.jsonl").read_bytes()
        assert data.endswith(b"\n") and torn_tail(data) == 0 and verify(fs / "journal.jsonl") == []
        assert json.loads(data.splitlines()[0])["data"]["message"] == "kept"
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)
