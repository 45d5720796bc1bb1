"""What a grading carries for the trust screen: the guard's config, and where its files go.

The backends put `GUARD_FILES` into every site-packages folder of the grading's interpreters
(pesflow_guard.pth imports pesflow_guard at every interpreter start), the config read-only at
CONFIG_DIR, a writable OUT_DIR, and the event socket; nothing of the package is edited.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import shlex
import subprocess
import time
from pathlib import Path

INSIDE = Path(__file__).resolve().parent / "inside"
GUARD_FILES = ("pesflow_guard.pth", "pesflow_guard.py", "pesflow_guard_active.py", "pesflow_guard_watch.py",
               "pesflow_guard_calls.py", "pesflow_guard_objects.py", "pesflow_guard_startup.py",
               "pesflow_guard_planted.py", "pesflow_guard_seen.py", "pesflow_rules.py", "pesflow_probe.py",
               "pesflow_probe_objects.py", "pesflow_probe_inputs.py", "pesflow_probe_values.py",
               "pesflow_same_answer.py")
CONFIG_DIR = "/.pesflow-trust"  # read-only in the grading: config.json, the probe's inputs
OUT_DIR = "/.pesflow-trust-out"  # writable: the guard's per-process files and kept inputs
SOCKET = f"{CONFIG_DIR}/events.sock"
# The probe's own files, carried beside its config (read-only) and loaded from there alone: a
# file the candidate wrote during the grading (its working folder, PYTHONPATH, a user site)
# cannot stand in for them.
PROBE_FILES = ("pesflow_probe.py", "pesflow_probe_objects.py", "pesflow_probe_inputs.py", "pesflow_probe_values.py",
               "pesflow_probe_pace.py", "pesflow_profile.py", "pesflow_same_answer.py")
WARM_FILE = "pesflow_probe_warm.py"  # the warm probe: started before the grader where probes follow up
WARM_GO = "warm-go"  # in CONFIG_DIR: the host's go to the warm probe
WARM_OVER = "grader-over"  # in CONFIG_DIR: the init's word that the grader's processes are gone
NOT_MODE_VARS = ("KERNELBENCH_DEVICE", "TRITON_INTERPRET")
# Every site-packages folder of an image (where the guard goes), for a backend that asks the image itself.
FIND_SITE_DIRS = ("find / -xdev -maxdepth 7 -type d \\( -name site-packages -o -name dist-packages \\) "
                  "-not -path '/proc/*' -not -path '/sys/*' 2>/dev/null")


def probe_files() -> dict[str, Path]:
    """The probe's files, for a Prober to put into CONFIG_DIR with its config."""
    return {name: INSIDE / name for name in PROBE_FILES}


def warm_files() -> dict[str, Path]:
    """What the warm probe runs, carried into CONFIG_DIR with the grading's config."""
    return {name: INSIDE / name for name in (*PROBE_FILES, WARM_FILE)}


def warm_command() -> str:
    """The warm probe's line (inside the sandbox, as the grader's interpreter): without site at
    first (it runs site itself, the guard held back until go), its code from CONFIG_DIR."""
    boot = f"import sys; sys.path.insert(0, {CONFIG_DIR!r}); import pesflow_probe_warm as w; sys.exit(w.main())"
    return f"exec python3 -I -S -c {shlex.quote(boot)}"


def probe_command(exe: str, *, same_sandbox: bool = False, module: str = "pesflow_probe") -> str:
    """The shell line that starts the probe with `exe` (the harness's interpreter): isolated
    (-I: no working folder, PYTHONPATH or user site on its path; site's .pth files, the guard's
    among them, still load), its code from CONFIG_DIR. In the grading's own sandbox an
    interpreter on a writable path (one the grading could have written) gives way to the first
    of python3, /usr/bin/python3 that is not."""
    # `module`: another of ours (pesflow_mismatch)
    boot = f"import sys; sys.path.insert(0, {CONFIG_DIR!r}); import {module}; {module}.run()"
    if not same_sandbox:
        return f"{shlex.quote(exe)} -I -c {shlex.quote(boot)}"
    # root's write test fails only on a read-only mount: the link (a venv's python) and what it
    # points to must both be where the grading could not have replaced them
    return (f"ok=; for e in {shlex.quote(exe)} python3 /usr/bin/python3; do p=$(command -v \"$e\") || continue; "
            "r=$(readlink -f \"$p\") && [ ! -w \"$r\" ] && [ ! -w \"${p%/*}\" ] && ok=1 && break; done; "
            "[ -n \"$ok\" ] || { echo 'pesflow: no interpreter here the grading could not have written' >&2; "
            "exit 97; }; "
            f"exec \"$p\" -I -c {shlex.quote(boot)}")


def guard_hash() -> str:
    h = hashlib.sha256()
    for name in GUARD_FILES:
        h.update((INSIDE / name).read_bytes())
    return h.hexdigest()[:16]


def screen_hash() -> str:
    """The trust screen's code (every module of evaluator/trust/, the guard's included): a
    grading kept from an earlier screen is graded again (a package check's resume)."""
    h = hashlib.sha256()
    root = INSIDE.parent
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def guard_config(source_root: str, scope_texts: dict[str, str | None], baseline: dict[str, str | None],
                 env: dict[str, str], *, record: bool = True, socket: bool = True) -> dict:
    """The guard's config for one grading: the candidate's files by path and content, the frozen
    baseline's by content, and the grader's own variables (what a candidate must not read)."""
    root = source_root.rstrip("/")
    return {
        "candidate_paths": {rel: f"{root}/{rel}" for rel, text in scope_texts.items() if text is not None},
        "candidate_hashes": {sha256(t): rel for rel, t in scope_texts.items() if t is not None},
        "baseline_hashes": {sha256(t): rel for rel, t in baseline.items()
                            if t is not None and t != scope_texts.get(rel)},
        "mode_vars": sorted(k for k in env if k not in NOT_MODE_VARS),
        "source_root": source_root,
        "out_dir": OUT_DIR,
        # kept inputs per process: under the 64 MiB a file the backends copy out whole
        "max_record_bytes": 16 << 20, "max_records_bytes": 48 << 20,
        "socket": SOCKET if socket else None,
        "record": record,
        # code whose file changed after this (the grading's own writes) is not the image's
        "started": time.time(),
    }


_SECRET: list[str] = []


def draw_secret() -> str:
    """The guard's secret for drawing which calls it keeps (inside/pesflow_guard_calls.py): random,
    kept in this user's pesflow folder so that every grading here draws the same calls (a
    traced-event count the guard's work is in stays the same from run to run, workers included);
    a candidate never sees it (the config is a file it may not open)."""
    if not _SECRET:
        path = Path(os.environ.get("PESFLOW_DRAW_SECRET_FILE") or Path.home() / ".cache" / "pesflow" / "trust-draws")
        try:
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{path.name}.{os.getpid()}")
                tmp.write_text(os.urandom(16).hex())
                os.replace(tmp, path)
            _SECRET.append(path.read_text().strip() or os.urandom(16).hex())
        except OSError:  # no folder of its own: this process's secret
            _SECRET.append(os.urandom(16).hex())
    return _SECRET[0]


def write_config(folder: Path, trust: dict) -> None:
    """The guard's config where a grading reads it: as JSON (the probe, people) and as marshal
    (what the guard reads at every interpreter start: json and re are slow to import there;
    version 4 of the format reads the same on every Python 3 a package may pin)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in config_files(trust).items():
        (folder / name).write_bytes(data)


def config_files(trust: dict) -> dict[str, bytes]:
    """config.json and config.marshal, as write_config writes them into CONFIG_DIR."""
    return {"config.json": json.dumps(trust).encode(),
            "config.marshal": marshal.dumps(json.loads(json.dumps(trust)), 4)}


def guard_tar_files(site_dirs: list[str], trust: dict,
                    trust_files: dict[str, Path]) -> dict[str, tuple[bytes, int, int, int]]:
    """What a backend that can only copy files into a grading puts there (archive.files_tar's
    form): the guard's files in every site-packages folder, and its config and inputs in CONFIG_DIR."""
    out = {f"{d.rstrip('/')}/{name}": ((INSIDE / name).read_bytes(), 0o644, 0, 0) for d in site_dirs
           for name in GUARD_FILES}
    out.update({f"{CONFIG_DIR}/{name}": (data, 0o444, 0, 0) for name, data in config_files(trust).items()})
    out.update({f"{CONFIG_DIR}/{name}": (Path(host).read_bytes(), 0o444, 0, 0) for name, host in trust_files.items()})
    return out


def site_dirs(stand_in_paths: list[str], image_layer: Path | None, max_depth: int = 7) -> list[str]:
    """Every site-packages folder a grading's interpreters may use: the stand-in python's, and
    those the package's image layer holds (a venv the Dockerfile made)."""
    found = [p for p in stand_in_paths if p.rstrip("/").endswith(("site-packages", "dist-packages"))]
    if image_layer is not None and image_layer.is_dir():
        base = len(image_layer.parts)
        for top, dirs, _ in os.walk(image_layer):
            depth = len(Path(top).parts) - base
            keep = []
            for d in dirs:
                if d in ("site-packages", "dist-packages"):
                    found.append("/" + str(Path(top, d).relative_to(image_layer)))
                elif (depth < max_depth and d not in ("proc", "sys", "dev", "tmp", "node_modules", ".git",
                                                      "__pycache__")):
                    keep.append(d)
            dirs[:] = keep
    return sorted(set(found))


def make_layer(dest: Path, dirs: list[str], python: str | None = None) -> Path:
    """A tree holding the guard's files at each of `dirs`, laid over the root as a lower layer;
    compiled by `python` (the grading's interpreter) beside them, since a read-only folder gets
    no __pycache__ and every interpreter of a grading would compile the guard again."""
    done = dest / ".done"
    if done.is_file():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    sources = []
    for d in dirs:
        target = dest / d.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        for name in GUARD_FILES:
            (target / name).write_bytes((INSIDE / name).read_bytes())
            if name.endswith(".py"):
                sources.append(str(target / name))
    if python and sources:
        # unchecked: the layer is keyed by the guard's hash, so its sources never change under it
        code = ("import py_compile, sys\nfor f in sys.argv[1:]:\n    py_compile.compile(f, doraise=True, "
                "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)")
        subprocess.run([python, "-c", code, *sources], capture_output=True, timeout=120, check=False)
    done.write_text("\n".join(dirs))
    return dest
