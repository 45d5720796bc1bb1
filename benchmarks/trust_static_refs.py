"""The static trust screen on every public reference: it must find nothing on them.

For each package of a Φ-Bench checkout, its oracle reference(s) (the shapes
evaluator.modes.artifacts knows: solution/oracle.patch, oracle.patch, tests/oracle.patch,
solution/kernel_oracle.py, solution/<scope file name>) become the scope files they produce,
beside the same files of environment/repo as the baseline; `screen` reads them. One row per
package, then the total. A finding here is a false positive: the pattern is too broad.

    python3 benchmarks/trust_static_refs.py [--tasks-root /work/faibench/tasks] [--negatives]

--negatives also screens the packages' negative references (informational: a negative is
wrong, not necessarily a cheat, so findings there are not counted as errors).
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.candidate import CandidateError, apply_diff, diff_paths  # noqa: E402
from evaluator.modes import artifacts  # noqa: E402
from evaluator.task import Task, load_task  # noqa: E402
from evaluator.trust.static import screen  # noqa: E402

BENCHES = ("kfc", "e2e", "lh")


def repo_text(task: Task, rel: str) -> str | None:
    p = task.root / "environment" / "repo" / rel
    try:
        return p.read_text() if p.is_file() else None
    except UnicodeDecodeError:
        return None


def image_text(task: Task, dest: str) -> str | None:
    """The image's copy of an absolute path, found through the Dockerfile's `COPY environment/...`."""
    try:
        lines = task.dockerfile.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "COPY" and parts[1].startswith("environment/"):
            src, dst = parts[1], parts[2]
            if dst == dest or (dst.endswith("/") and dest.startswith(dst)):
                p = task.root / (src if dst == dest else src.rstrip("/") + "/" + dest[len(dst):])
                if p.is_file():
                    return p.read_text(errors="replace")
    return None


def solve_sh_refs(task: Task) -> list[tuple[Path, str]]:
    """An e2e package's oracle as its solution/solve.sh lands it: `oracle) land 'SRC=>NAME' ...`,
    NAME under [verifier].submission_root. (reference file, absolute destination) pairs."""
    sh = task.root / "solution" / "solve.sh"
    text = sh.read_text(errors="replace") if sh.is_file() else ""
    default = re.search(r'^SUB="\$\{SUBMISSION_DIR:-([^}"]+)\}"', text, re.M)  # its own default, if the toml names none
    sub = task.toml.verifier.submission_root or (default.group(1) if default else None)
    if not sub:
        return []
    m = re.search(r"^\s*oracle\)\s*land\s+((?:\\\n|[^;\n])*)", text, re.M)
    try:
        specs = shlex.split(m.group(1).replace("\\\n", " ")) if m else []
    except ValueError:  # not the convention after all
        return []
    out = []
    for spec in specs:
        src, _, name = spec.partition("=>")
        if name and (task.root / src).is_file():
            out.append((task.root / src, f"{sub.rstrip('/')}/{name}"))
    return out


def rel_of(task: Task, dest: str) -> str:
    root = task.source_root.rstrip("/") + "/"
    return dest[len(root):] if dest.startswith(root) else dest.removeprefix("/app/")


def references(task: Task, kind: str) -> list[tuple[str, dict, dict, str]]:
    """(label, scope files, baselines, note) for each `kind` reference the package ships, in any
    shape: the reviewer files evaluator.modes knows; else solve.sh's landed files (e2e); else a
    single-scope package's tests/<kind>*.py, the file its hidden grader installs itself."""
    out = []
    for ref in artifacts(task, kind):
        try:
            new, base, how = scope_files(task, ref)
            out.append((str(ref.relative_to(task.root)), new, base, how))
        except CandidateError as e:
            out.append((str(ref.relative_to(task.root)), {}, {}, f"does not apply ({e})"))
    if out:
        return out
    landed = solve_sh_refs(task) if kind == "oracle" else []
    if landed:
        new = {rel_of(task, d): src.read_text(errors="replace") for src, d in landed}
        base = {rel_of(task, d): image_text(task, d) for _, d in landed}
        return [(" + ".join(str(s.relative_to(task.root)) for s, _ in landed), new, base, ", landed by solve.sh")]
    held = sorted((task.root / "tests").glob(f"{kind}*.py")) if len(task.scope) == 1 else []
    if len(held) == 1:
        rel = task.scope[0]
        return [(str(held[0].relative_to(task.root)), {rel: held[0].read_text()}, {rel: repo_text(task, rel)},
                 ", the hidden grader's own")]
    return []


def plain_apply(diff: str, base: dict[str, str | None]) -> dict[str, str | None]:
    """git apply without --recount: apply_diff's --recount reads a headerless multi-file patch's
    next `--- a/` line as one more removed line, so such a patch fails there and not in the image."""
    with tempfile.TemporaryDirectory(prefix="trust-refs-") as tmp:
        root = Path(tmp)
        for rel, text in base.items():
            if text is not None:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
        r = subprocess.run(["git", "apply", "-p1", "--whitespace=nowarn", "-"], cwd=root, input=diff,
                           capture_output=True, text=True)
        if r.returncode:
            raise CandidateError("patch_does_not_apply", r.stderr.strip()[:200])
        return {rel: (root / rel).read_text() if (root / rel).is_file() else None for rel in base}


def scope_files(task: Task, ref: Path) -> tuple[dict[str, str | None], dict[str, str | None], str]:
    """(the reference's scope files, their baseline texts, how they were made)."""
    if ref.suffix == ".patch":
        diff = ref.read_text(errors="replace")
        touched, _ = diff_paths(diff, task.source_root)
        base = {rel: repo_text(task, rel) for rel in sorted(touched)}
        try:
            new, how = apply_diff(diff, base), ""
        except CandidateError:
            new, how = plain_apply(diff, base), ", applied without --recount"
        return {k: v for k, v in new.items() if v != base.get(k)}, base, how
    rel = task.scope[0]  # a whole-file reference stands in for the single scope file
    return {rel: ref.read_text()}, {rel: repo_text(task, rel)}, ""


def packages(root: Path) -> list[str]:
    names = []
    for bench in BENCHES:
        d = root / bench
        names += [f"{bench}/{p.name}" for p in sorted(d.iterdir()) if p.is_dir()] if d.is_dir() else []
    return names


def run(root: Path, kinds: tuple[str, ...]) -> int:
    t0 = time.monotonic()
    total = refs = files = patterns = carried = errors = 0
    for name in packages(root):
        try:
            task = load_task(name, [root])
        except Exception as e:  # a package pesflow cannot load is a row, not a crash
            print(f"{name:58s} not loaded: {type(e).__name__}: {str(e)[:80]}")
            continue
        rows = []
        for kind in kinds:
            for label, new, base, how in references(task, kind):
                if how.startswith("does not apply"):
                    rows.append(f"{label}: {how}")
                    errors += 1
                    continue
                findings, checks = screen(new, base)
                note = f" [skipped: {', '.join(checks['skipped'])}]" if checks["skipped"] else ""
                if kind == "oracle":  # the negatives are shown, not counted: a wrong answer may well cheat
                    refs, total, files = refs + 1, total + len(findings), files + checks["files"]
                    patterns, carried = patterns + checks["patterns"], carried + checks["patterns"] - len(findings)
                label = f"{label} ({checks['files']} py file(s), {checks['in_baseline']} baseline pattern(s){how})"
                body = "; ".join(f.reason() for f in findings) if findings else "clean"
                rows.append(f"{label}: {body}{note}")
        if not rows:
            rows = ["no reference file in any shape (the package ships none)"]
        for i, row in enumerate(rows):
            print(f"{name if i == 0 else '':58s} {row}")
    print(f"\ntotal: {total} finding(s) on {refs} oracle reference(s) of {len(packages(root))} packages; "
          f"{files} Python file(s) read in them, {patterns} pattern(s) seen there ({carried} already in the baseline), "
          f"{errors} reference(s) that did not apply at all; {time.monotonic() - t0:.1f} s")
    return 1 if total else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks-root", default="/work/faibench/tasks")
    ap.add_argument("--negatives", action="store_true", help="also screen the negative references (not counted)")
    a = ap.parse_args()
    return run(Path(a.tasks_root), ("oracle", "negative") if a.negatives else ("oracle",))


if __name__ == "__main__":
    raise SystemExit(main())
