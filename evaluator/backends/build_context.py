"""The build context of a task's image, for engines that build it themselves (docker, Modal).

The context is the package root, `.dockerignore` applied, with tests/ and solution/ always
left out (the hidden grader and the reviewer's answers never enter an image).

Φ-Bench's Dockerfiles use BuildKit heredocs (`RUN python - <<'PY'`, `COPY <<EOF /path`).
Neither podman 4.3 nor the classic builder behind the Docker Engine's /build API (what the
SDK drives) understands them, nor can we count on Modal's builder to. So every heredoc
step is rewritten before building: its script (or file) goes into a generated file of the
context, and the step becomes a COPY of that file and a RUN of it, with BuildKit's meaning:
- `RUN cmd <<X ...`: the command line and its heredoc bodies form one shell script, sourced
  by the Dockerfile's SHELL (so quoting, variable expansion and SHELL options are as before);
- `RUN <<X` alone: the body is the script; a body starting with `#!` runs under that
  interpreter;
- `COPY <<X dest`: the body is a file named X.
Heredocs are found by evaluator.dockerfile's parser, the one the local backend replays with.
"""

from __future__ import annotations

import io
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from docker.utils.build import exclude_paths

from evaluator import dockerfile
from evaluator.task import NOT_IN_IMAGE, Task

GEN_DIR = ".pesflow-gen"  # generated files, in the build context
IMAGE_DIR = "/.pesflow-heredoc"  # where the generated scripts land in the image
DOCKERFILE = f"{GEN_DIR}/Dockerfile"
_SYNTAX = re.compile(r"#\s*syntax\s*=", re.I)
# the heredoc markers evaluator.dockerfile recognises, in the same order it collects bodies
_MARKER = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


@dataclass
class Rewritten:
    text: str  # the Dockerfile without heredocs
    files: dict[str, str] = field(default_factory=dict)  # context path -> contents, generated
    steps: int = 0  # how many steps were rewritten


def _flags(step: dockerfile.Instruction) -> str:
    return "".join(f"--{k}={v} " if v else f"--{k} " for k, v in step.flags.items())


def _run_lines(n: int, step: dockerfile.Instruction, files: dict[str, str]) -> list[str]:
    name = f"run-{n}.sh"
    script = step.shell_script()
    files[f"{GEN_DIR}/{name}"] = script
    lines = [f"COPY {GEN_DIR}/{name} {IMAGE_DIR}/{name}"]
    alone = not _MARKER.sub("", step.text).strip()
    if alone and script.startswith("#!"):
        # BuildKit runs such a body as an executable file; running its interpreter on it
        # needs no exec bit (which a non-root USER could not set on a root-owned file).
        interpreter = script.splitlines()[0][2:].strip()
        lines.append(f"RUN {_flags(step)}{interpreter} {IMAGE_DIR}/{name}")
    else:
        lines.append(f"RUN {_flags(step)}. {IMAGE_DIR}/{name}")
    return lines


def _copy_line(n: int, step: dockerfile.Instruction, files: dict[str, str]) -> list[str]:
    bodies = iter(step.heredocs)

    def sub(m: re.Match[str]) -> str:
        term, body = next(bodies)
        path = f"{GEN_DIR}/copy-{n}/{term}"
        files[path] = body
        return path

    return [f"{step.kind} {_flags(step)}{_MARKER.sub(sub, step.text)}"]


def rewrite(text: str, source: str | Path = "Dockerfile") -> Rewritten:
    """The same build without BuildKit heredocs; a Dockerfile without any comes back as is."""
    steps = dockerfile.parse(text, source)
    if not any(s.heredocs for s in steps):
        return Rewritten(text=text)
    lines = text.splitlines()
    # Parser directives and comments before the first step stay, except `# syntax=`: the
    # rewritten file needs no BuildKit frontend.
    out = [ln for ln in lines[: steps[0].line - 1] if not _SYNTAX.match(ln.strip())]
    files: dict[str, str] = {}
    rewritten = 0
    for n, step in enumerate(steps):
        end = steps[n + 1].line - 1 if n + 1 < len(steps) else len(lines)
        if not step.heredocs:
            out.extend(lines[step.line - 1 : end])  # verbatim, continuations and comments included
            continue
        rewritten += 1
        if step.kind == "RUN":
            out.extend(_run_lines(n, step, files))
        elif step.kind in ("COPY", "ADD"):
            out.extend(_copy_line(n, step, files))
        else:
            raise dockerfile.DockerfileError(f"{source}:{step.line}: a heredoc in {step.kind} is not "
                                             "supported; use RUN or COPY")
    return Rewritten(text="\n".join(out) + "\n", files=files, steps=rewritten)


def base_images(text: str, source: str | Path = "Dockerfile") -> list[str]:
    """The images the build starts FROM (ARG defaults expanded; earlier stages and scratch left out)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    out: list[str] = []
    for step in dockerfile.parse(text, source):
        if step.kind == "ARG" and not out:  # only ARGs before the first FROM reach FROM lines
            for k, v in dockerfile.parse_key_values(step.text, args):
                args[k] = v
        elif step.kind == "FROM":
            words = [w for w in step.text.split() if not w.startswith("--")]
            image = dockerfile.expand(words[0], args) if words else ""
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            if image and image.lower() not in stages and image != "scratch" and image not in out:
                out.append(image)
    return out


def context_files(root: Path) -> list[str]:
    """Paths of the package that go into the context: .dockerignore applied, tests/ and
    solution/ left out whatever it says."""
    patterns: list[str] = list(NOT_IN_IMAGE)
    ignore = root / ".dockerignore"
    if ignore.is_file():
        patterns += [ln.strip() for ln in ignore.read_text().splitlines()
                     if ln.strip() and not ln.strip().startswith("#")]
    # .dockerignore itself stays out: it has been applied here, and an engine that applies it
    # again (buildah does) would drop the generated files when it ignores everything by default.
    return sorted(p for p in exclude_paths(str(root), patterns) if p != ".dockerignore")


@dataclass
class Context:
    tar: bytes  # the whole context, ready to send
    dockerfile: str  # its path inside the context
    rewritten: Rewritten


def build_context(task: Task) -> Context:
    """The task's build context as a tar, with its Dockerfile rewritten at .pesflow-gen/Dockerfile."""
    df = task.dockerfile
    try:
        rewritten = rewrite(df.read_text(), df)
    except OSError as e:
        raise dockerfile.DockerfileError(f"{df}: cannot be read ({e.strerror})") from None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for rel in context_files(task.root):
            info = tf.gettarinfo(str(task.root / rel), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isfile():
                with open(task.root / rel, "rb") as f:
                    tf.addfile(info, f)
            elif info.isdir() or info.issym():
                tf.addfile(info)
        for name, text in {**rewritten.files, DOCKERFILE: rewritten.text}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tf.addfile(info, io.BytesIO(data))
    return Context(tar=buf.getvalue(), dockerfile=DOCKERFILE, rewritten=rewritten)
