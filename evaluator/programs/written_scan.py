"""The written-layer scan of a local grading: what the grading wrote that the trust guard could
not see, read off its writable layer once the grader is over (evaluator/trust/written.py holds
the rules' host side and reads what this writes).

Run by the namespace's init (evaluator/supervise.py, its `after_grader` line, made by
evaluator/trust/written.py `scan_command`) on the host side of the sandbox, never in its chroot,
after every process of the grading is dead, as `PYTHON -I -S written_scan.py ARGS` with the
stand-in python; stdlib only. It never follows a link. It finds the startup files in each walked
folder (a whiteout, the mark of a removed file, counts: the guard's own .pth deleted is the guard
switched off), and the Python files of each writable path's upper layer that one of its lower
layers (the image) also holds, less the candidate's own: a module of the image rewritten,
touched or removed during the grading; and the version-control files (git's configuration,
attributes, hooks) written or removed in a repository or folder the image held.

Arguments, positional:
  OUT   the JSON file written: {"found": [[sandbox path, removed, text or null], ...],
        "image": [[sandbox path, removed], ...], "vcs": [[sandbox path, removed], ...]}
  RULE  the file that defines `startup_file(path)` and `vcs_control(path)`
        (trust/inside/pesflow_guard_startup.py), run here with exec: the guard's own rules, not a copy
  SPEC  JSON: {"walk": [[host folder, its sandbox path], ...], "image": [[upper layer, its
        sandbox path, [lower layers]], ...], "skip": [the candidate's paths, as ends of sandbox
        paths], "max_found": names kept per list, "max_text": a found file's text read up to
        this many bytes}
"""

import json
import os
import stat
import sys


def removed(p):
    """A whiteout: a 0/0 character device, an overlay's mark of a removed file."""
    try:
        return stat.S_ISCHR(os.lstat(p).st_mode)
    except OSError:
        return False


def text(p, max_text):
    """A regular file's UTF-8 text of at most `max_text` bytes, else None."""
    try:
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_text:
            return None
        with open(p, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def startup_files(spec, startup_file):
    found = []
    for folder, where in spec["walk"]:
        for top, dirs, names in os.walk(folder, followlinks=False):
            for n in dirs + names:
                path = where.rstrip("/") + "/" + os.path.relpath(os.path.join(top, n), folder)
                if startup_file(path) and len(found) < spec["max_found"]:
                    found.append([path, removed(os.path.join(top, n)), text(os.path.join(top, n), spec["max_text"])])
    return found


def image_files(spec, vcs_control):
    """(the image's modules changed, the version-control files changed in a repository or folder
    the image held), less the candidate's own."""
    image, vcs = [], []
    skip = tuple("/" + r for r in spec["skip"])
    for upper, where, lowers in spec["image"]:
        for top, dirs, names in os.walk(upper, followlinks=False):
            for n in names:
                rel = os.path.relpath(os.path.join(top, n), upper)
                path = where.rstrip("/") + "/" + rel
                if path.endswith(skip):
                    continue
                if n.endswith(".py") and len(image) < spec["max_found"] and \
                        any(os.path.lexists(os.path.join(low, rel)) for low in lowers):
                    image.append([path, removed(os.path.join(top, n))])
                anchor = vcs_control(path)
                if anchor is not None and len(vcs) < spec["max_found"]:
                    inside = anchor.rstrip("/") == where.rstrip("/") or anchor.startswith(where.rstrip("/") + "/")
                    held = os.path.relpath(anchor, where) if inside else None
                    if held is not None and any(os.path.isdir(os.path.join(low, held)) for low in lowers):
                        vcs.append([path, removed(os.path.join(top, n))])
    return image, vcs


def main(argv):
    out, rule, spec = argv[1], argv[2], json.loads(argv[3])
    with open(rule) as f:
        code = compile(f.read(), rule, "exec")
    ns = {}
    exec(code, ns)  # the guard's own rule, run as the guard runs it
    image, vcs = image_files(spec, ns["vcs_control"])
    got = {"found": startup_files(spec, ns["startup_file"]), "image": image, "vcs": vcs}
    with open(out, "w") as f:
        json.dump(got, f)


if __name__ == "__main__":
    main(sys.argv)
