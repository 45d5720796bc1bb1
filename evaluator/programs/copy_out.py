"""The copy-out of a local grading: the grading's logs and result files copied from its scratch
to the host before the namespace, and a tmpfs scratch with it, is gone.

Run by the namespace's init (evaluator/supervise.py `supervised_command`) on the host side of
the sandbox, never in its chroot, after every other process of the grading is dead (nothing can
swap a file for a link meanwhile), as `PYTHON -I -S copy_out.py ARGS` with the stand-in python;
stdlib only. It copies regular files only, never through a symlink, each cut at a byte limit,
within a total, notes result files forged after the grader returned, and how full the scratch got.

Arguments, positional:
  STATUS    the init's status file: `grader_end=` read from it; `scratch_used=`, `scratch_total=`,
            `inodes_free=` (with SCRATCH), `copied_files=` and `forged=` appended to it
  SCRATCH   the scratch's mount point, or '' for no scratch figures
  PER_FILE  bytes copied of each file at most
  BUDGET    bytes copied in all at most
  RESULTS   the grader's result files (host paths), one a line, or ''
  PAIRS...  SRC DEST pairs (a folder is walked, without following links), or one `@FILE` that holds
            them one path a line (a follow-up's, written by the host)
"""

import os
import stat
import sys

MAX_FILES = 5000


def forged_results(status, results):
    """The result files whose inode changed after the grader returned (ctime: no candidate can set
    it back): forged by something that outlived the grader."""
    end = None
    with open(status, errors="replace") as f:
        for line in f:
            if line.startswith("grader_end="):
                end = float(line.split("=", 1)[1] or 0)
    forged = []
    for r in [r for r in results.split("\n") if r] if end else []:
        try:
            if os.lstat(r).st_ctime > end + 0.02:
                forged.append(r)
        except (OSError, ValueError):
            pass
    return forged


class Copier:
    """Copies regular files, each cut at `per_file` bytes, until `budget` bytes or MAX_FILES files."""

    def __init__(self, per_file, budget):
        self.per_file, self.budget, self.files = per_file, budget, 0

    def one(self, src, dest):
        if self.budget <= 0 or self.files >= MAX_FILES:
            return
        try:
            fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            data = f.read(min(self.per_file, self.budget))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as out:
            out.write(data)
        self.budget -= len(data)
        self.files += 1

    def pair(self, src, dest):
        try:
            st = os.lstat(src)
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode):
            for top, dirs, names in os.walk(src, followlinks=False):
                dirs.sort()
                for n in sorted(names):
                    self.one(os.path.join(top, n), os.path.join(dest, os.path.relpath(os.path.join(top, n), src)))
        else:
            self.one(src, dest)


def main(argv):
    status, scratch, per_file, budget, results = argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5]
    args = argv[6:]
    if args[:1] and args[0].startswith("@"):
        with open(args[0][1:]) as f:
            args = [a for a in f.read().split("\n") if a]
    forged = forged_results(status, results)
    copier = Copier(per_file, budget)
    for src, dest in zip(args[0::2], args[1::2]):
        copier.pair(src, dest)
    with open(status, "a") as f:
        if scratch:
            v = os.statvfs(scratch)
            f.write("scratch_used=%d\nscratch_total=%d\ninodes_free=%d\n"
                    % ((v.f_blocks - v.f_bfree) * v.f_frsize, v.f_blocks * v.f_frsize, v.f_ffree))
        f.write("copied_files=%d\n" % copier.files)
        if forged:
            f.write("forged=%s\n" % " ".join(forged))


if __name__ == "__main__":
    main(sys.argv)
