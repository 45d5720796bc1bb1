"""What a startup file is: a file (or folder) an interpreter runs before, or instead of,
pesflow's code when it starts. One definition for the guard (a write it sees a candidate make,
pesflow_guard_active.py) and for the host (what a grading's writable layer holds once the grader
is over, evaluator/trust/written.py: a shell or any other non-Python writer the guard cannot see).
Standard library only; Python 3.8+."""


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
