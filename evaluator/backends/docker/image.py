"""The docker backend's images: a task's image, built once per package content.

Prepare (once per package content): the image is built from environment/Dockerfile with
the package root as context (evaluator/backends/build_context.py: .dockerignore applied,
tests/ and solution/ never sent, BuildKit heredocs rewritten, since neither podman 4.3 nor
the API's classic builder has them). It is tagged `pesflow-cache/<task>:<content key>`
(and with the task's docker_image), which is how it is found again next time. Base images
are never pulled unless evaluator.docker.pull says so: a missing one is an infra error naming
the fix. A failing build is an InfraError (infra_error), its full log kept in the cache.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import time
from pathlib import Path

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.utils import parse_repository_tag

from evaluator import dockerfile
from evaluator.backends.base import InfraError
from evaluator.backends.build_context import base_images, build_context
from evaluator.backends.docker.engine import _last_line, _short
from evaluator.config import DockerConfig
from evaluator.task import NOT_IN_IMAGE, Task, package_hash

BACKEND_VERSION = "docker-1"  # bump to rebuild images when the way they are built changes


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "task"


class Images:
    """Finds a task's image in the engine by its content key, or builds it (logs under cache/<key>/)."""

    def __init__(self, config: DockerConfig, cache: Path):
        self.config = config
        self.cache = cache

    def key(self, task: Task) -> str:
        h = hashlib.sha256()
        h.update(package_hash(task.root, exclude_top=NOT_IN_IMAGE).encode())
        h.update(BACKEND_VERSION.encode())
        return h.hexdigest()[:20]

    def tag(self, task: Task) -> str:
        """The image a package's content is built into (and found by, next time)."""
        return f"pesflow-cache/{_slug(task.name)}:{self.key(task)}"

    @staticmethod
    def exists(api: docker.APIClient, name: str) -> bool:
        try:
            api.inspect_image(name)
            return True
        except (ImageNotFound, NotFound):
            return False
        except APIError as e:
            raise InfraError(f"the engine failed to look up image {name}: {_short(e)}") from None

    def build(self, api: docker.APIClient, task: Task, key: str, tag: str, warnings: list[str]) -> None:
        df = task.dockerfile
        try:
            ctx = build_context(task)
        except dockerfile.DockerfileError as e:
            raise InfraError(str(e)) from None
        for image in base_images(ctx.rewritten.text, df):
            if self.exists(api, image):
                continue
            if not self.config.pull:
                raise InfraError(f"{df}: base image {image} is not in the engine and pesflow does not pull "
                                 f"(evaluator.docker.pull=false); build it locally (tools/podman_setup.sh makes "
                                 f"python:3.11-slim-bookworm) or pull it, or set evaluator.docker.pull=true")
            try:
                repo, tg = parse_repository_tag(image)
                api.pull(repo, tag=tg or "latest")
            except APIError as e:
                raise InfraError(f"{df}: pulling base image {image} failed: {_short(e)}") from None
        if ctx.rewritten.steps:
            warnings.append(f"{ctx.rewritten.steps} BuildKit heredoc step(s) rewritten as "
                            "COPY + RUN of a generated file")
        home = self.cache / key
        home.mkdir(parents=True, exist_ok=True)
        log_path = home / "build.log"
        limit = task.toml.environment.build_timeout_sec
        deadline = time.monotonic() + limit
        buildargs = {k: os.environ[k] for k in self.config.build_args_from_env if k in os.environ}
        last_step, error = "", None
        with open(log_path, "w") as log:
            log.write(f"# pesflow docker build of {task.name} -> {tag}\n# rewritten "
                      f"Dockerfile:\n{ctx.rewritten.text}\n")
            try:
                stream = api.build(fileobj=io.BytesIO(ctx.tar), custom_context=True, dockerfile=ctx.dockerfile, tag=tag,
                                   rm=True, forcerm=True, pull=False, decode=True,
                                   network_mode=self.config.build_network, buildargs=buildargs,
                                   labels={"pesflow.task": task.name, "pesflow.key": key}, timeout=max(limit, 30))
                for chunk in stream:
                    text = chunk.get("stream") or chunk.get("status") or ""
                    if text:
                        log.write(text if text.endswith("\n") else text + "\n")
                        for line in text.splitlines():
                            if re.match(r"\s*(STEP|Step) \d+", line):
                                last_step = line.strip()
                    if chunk.get("error") or chunk.get("errorDetail"):
                        error = chunk.get("error") or (chunk.get("errorDetail") or {}).get("message")
                        log.write(f"ERROR: {error}\n")
                    if time.monotonic() > deadline:
                        raise InfraError(f"{df}: building the image took longer than "
                                         f"build_timeout_sec={limit:g}; see {log_path}")
            except (APIError, DockerException, OSError) as e:
                error = _short(e)
                log.write(f"ERROR: {error}\n")
        if error or not self.exists(api, tag):
            where = f" at {last_step[:200]}" if last_step else ""
            raise InfraError(f"{df}: image build failed{where}: {_last_line(str(error or 'no image was produced'))} "
                             f"(full log: {log_path})")
        if task.toml.environment.docker_image:
            try:
                repo, tg = parse_repository_tag(task.toml.environment.docker_image)
                api.tag(tag, repo, tg or "latest", force=True)
            except APIError as e:
                warnings.append(f"could not tag the image as {task.toml.environment.docker_image}: {_short(e)}")
