"""The docker backend's build context and Dockerfile rewrite, and the logs it takes out of a
container: no engine needed."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile

from evaluator.backends import archive
from evaluator.backends.build_context import DOCKERFILE, GEN_DIR, base_images, build_context, rewrite
from evaluator.task import load_task

HEREDOCS = """# syntax=docker/dockerfile:1
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE} AS build
ENV WHO=world
RUN cat <<'A' > /out && cat <<-B >> /out && echo "$WHO" >> /out
literal $WHO
A
\texpanded $WHO
\tB
RUN <<EOF
#!/usr/bin/env python3
print("from a shebang body")
EOF
COPY --chmod=644 <<one <<two /files/
first
one
second
two
FROM build
RUN echo done
"""


def test_heredoc_steps_become_copy_and_run_of_generated_files(tmp_path):
    r = rewrite(HEREDOCS)
    assert r.steps == 3 and "syntax=" not in r.text
    assert "<<" not in r.text  # nothing a builder without BuildKit would choke on
    lines = r.text.splitlines()
    assert "COPY .pesflow-gen/run-3.sh /.pesflow-heredoc/run-3.sh" in lines
    assert "RUN . /.pesflow-heredoc/run-3.sh" in lines  # sourced by the Dockerfile's SHELL
    assert "RUN /usr/bin/env python3 /.pesflow-heredoc/run-4.sh" in lines  # a #! body runs under its interpreter
    assert "COPY --chmod=644 .pesflow-gen/copy-5/one .pesflow-gen/copy-5/two /files/" in lines
    assert r.files[f"{GEN_DIR}/copy-5/one"] == "first\n" and r.files[f"{GEN_DIR}/copy-5/two"] == "second\n"
    assert lines[-2:] == ["FROM build", "RUN echo done"]  # the rest verbatim
    # The generated script means what BuildKit would have run: quoted heredoc literal,
    # unquoted one expanded, <<- tabs stripped.
    (tmp_path / "run.sh").write_text(r.files[f"{GEN_DIR}/run-3.sh"].replace("/out", str(tmp_path / "out")))
    subprocess.run(["sh", "-c", f". {tmp_path / 'run.sh'}"], env={"WHO": "world", "PATH": os.environ["PATH"]}, check=True)
    assert (tmp_path / "out").read_text() == "literal $WHO\nexpanded world\nworld\n"


def test_a_dockerfile_without_heredocs_is_left_as_it_is():
    text = "FROM python:3.11-slim-bookworm\nRUN echo hi \\\n && echo there\n"
    assert rewrite(text).text == text and rewrite(text).files == {}


def test_base_images_expand_args_and_skip_stages_and_scratch():
    assert base_images(HEREDOCS) == ["python:3.11-slim-bookworm"]
    assert base_images("FROM scratch\nFROM --platform=linux/amd64 nvidia/cuda:12.4 AS b\nFROM b\n") == ["nvidia/cuda:12.4"]


def test_context_never_carries_the_hidden_grader_or_answers(toy_package):
    task = load_task(str(toy_package))
    (toy_package / "notes.tmp").write_text("ignored")
    (toy_package / ".dockerignore").write_text("*.tmp\n")  # tests/ and solution/ no longer listed
    ctx = build_context(task)
    names = set(tarfile.open(fileobj=io.BytesIO(ctx.tar)).getnames())
    assert not any(n.split("/")[0] in ("tests", "solution") for n in names)
    assert "notes.tmp" not in names and ".dockerignore" not in names
    assert {DOCKERFILE, f"{GEN_DIR}/run-10.sh", "environment/repo/toy/kernel.py"} <= names
    with tarfile.open(fileobj=io.BytesIO(ctx.tar)) as tf:
        assert "<<" not in tf.extractfile(DOCKERFILE).read().decode()


def test_logs_coming_out_are_regular_files_only_and_bounded(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in (("logs/verifier/reward.json", b'{"reward": 1}'), ("logs/big.txt", b"x" * 10000),
                           ("logs/../../escape.txt", b"no")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("logs/verifier/link.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tf.addfile(link)
        dev = tarfile.TarInfo("logs/dev")
        dev.type = tarfile.CHRTYPE
        tf.addfile(dev)
    buf.seek(0)
    n = archive.extract_regular(buf, tmp_path / "out", limit=4096, strip=1)
    got = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file() or p.is_symlink())
    assert n == 2 and got == ["big.txt", "verifier/reward.json"]
    assert (tmp_path / "out/big.txt").stat().st_size == 4096 and not (tmp_path / "escape.txt").exists()
