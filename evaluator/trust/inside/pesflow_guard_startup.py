"""What a startup file is: a file (or folder) an interpreter runs before, or instead of,
pesflow's code when it starts. One definition for the guard (a write it sees a candidate make,
pesflow_guard_active.py) and for the host (what a grading's writable layer holds once the grader
is over, evaluator/trust/written.py: a shell or any other non-Python writer the guard cannot see).
And what a version-control file is (vcs_control), for the host's read of the same layer.
Standard library only; Python 3.8+."""

# What git reads to decide what a checkout or an apply writes: a repository's configuration
# (filters, a hooks path, aliases), its attributes and excludes, its hooks, the object stores it
# borrows; a work tree's own attributes and submodule map. A grader's git never writes them while
# it grades: `git checkout` and `git apply` write the index, refs, logs and objects.
_VCS_IN_GIT = ("config", "commondir", "info/attributes", "info/exclude", "info/grafts", "objects/info/alternates",
               "objects/info/http-alternates")
_VCS_IN_TREE = (".gitattributes", ".gitmodules")


def vcs_control(path):
    """For a version-control file (above), the folder that must have been in the image for its
    change to count (the repository's .git, or the work-tree folder holding it: a repository or
    folder the grading made anew is its own), else None."""
    if isinstance(path, bytes):
        path = path.decode(errors="replace")
    parts = [p for p in str(path).split("/") if p]
    if not parts:
        return None
    if parts[-1] in _VCS_IN_TREE:
        return "/" + "/".join(parts[:-1])
    if ".git" in parts[:-1]:
        i = len(parts) - 1 - parts[::-1].index(".git")
        rest = "/".join(parts[i + 1:])
        if rest in _VCS_IN_GIT or rest.startswith("hooks/"):
            return "/" + "/".join(parts[:i + 1])
    return None


def startup_file(path):
    """A .pth in a site folder (elsewhere it is a checkpoint's usual suffix), a site or user
    customization as a module or a package, or a module named as pesflow's own."""
    if isinstance(path, bytes):
        path = path.decode(errors="replace")
    if not isinstance(path, str):
        return False
    parts = [p for p in path.split("/") if p]
    if not parts:
        return False
    if parts[-1].endswith(".pth"):
        return len(parts) > 1 and parts[-2] in ("site-packages", "dist-packages")
    return any(p.split(".")[0] in ("sitecustomize", "usercustomize") or p.startswith("pesflow_") for p in parts)
