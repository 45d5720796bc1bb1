"""Repository-level gates of the native-histogram merge grader (no candidate code runs).

head_moved        HEAD is not the single baseline commit.
out_of_scope_edit any changed, added, deleted or untracked path outside the
                  scope (byte-code caches are ignored).
Failures are appended, one name per line, to the file given by --out.
"""

import argparse
import subprocess
import sys


def _git(repo, *args):
    return subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, check=False
    )


def _ignored(path):
    return "__pycache__/" in path or path.startswith("__pycache__") or path.endswith(".pyc")


def changed_paths(repo):
    res = _git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if res.returncode != 0:
        raise RuntimeError("git status failed: " + res.stderr.decode(errors="replace"))
    entries = res.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    paths = []
    i = 0
    while i < len(entries):
        item = entries[i]
        i += 1
        if not item:
            continue
        code, path = item[:2], item[3:]
        paths.append(path)
        if "R" in code or "C" in code:
            # renames and copies carry their source path as the next entry
            if i < len(entries) and entries[i]:
                paths.append(entries[i])
            i += 1
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--scope", action="append", default=[])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    fails = []
    count = _git(a.repo, "rev-list", "--count", "HEAD")
    if count.returncode != 0 or count.stdout.decode().strip() != "1":
        fails.append("head_moved")
    try:
        scope = set(a.scope)
        for p in sorted(set(changed_paths(a.repo))):
            if p in scope or _ignored(p):
                continue
            fails.append("out_of_scope_edit:" + p)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        fails.append("out_of_scope_edit:<git status failed>")
    with open(a.out, "a", encoding="utf-8") as fh:
        for f in fails:
            fh.write(f + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
