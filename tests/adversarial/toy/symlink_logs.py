# Attack: plant symlinks where pesflow copies the logs from (and over the verdict file), so
# that the copy reads host files or the whole tree for it. Then fails loudly.
# Stopped by: the logs are copied by the namespace's init after every other process is dead,
# regular files only, opened with O_NOFOLLOW, never through a link -> nothing of the links'
# targets leaves the sandbox; the candidate ends "import_failed", reward 0.
import os

os.makedirs("/logs/verifier", exist_ok=True)
for name, target in (("passwd", "/etc/passwd"), ("root", "/"), ("proc-environ", "/proc/1/environ")):
    try:
        os.symlink(target, f"/logs/verifier/{name}")
    except OSError:
        pass
os.makedirs("/logs/loop", exist_ok=True)
try:
    os.symlink("/etc", "/logs/loop/dev")  # a directory link where a dev engine's verdict would be
except OSError:
    pass
raise RuntimeError("links planted")
