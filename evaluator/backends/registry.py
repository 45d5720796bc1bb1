"""The grading backends, found by name in one registry.

A backend is what evaluator/backends/base.py's `Backend` protocol says (prepare, baseline_text,
grade with an optional worker slot, close, and optionally cancel_all), plus `Capabilities`
telling the scheduler in front of it (evaluator/parallel.py) whose GPUs its gradings use,
whether it wants the worker slot, and whether cancel_all stops work elsewhere. The scheduler
reads those declarations (base.capabilities_of), never the backend's signatures.

Each entry names a factory that imports its module only when chosen, so an optional SDK
(docker, modal, ray) is needed only by those who use it. A backend whose class does not
carry `capabilities` itself (local, docker) has them declared with its entry. Every backend
made by `create` is tracked (base.track) until closed, so that a signal to pesflow can cancel
what they have in flight (base.cancel_all_live): a Ray cluster's tasks, not only this
machine's sandboxes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from evaluator.backends.base import Capabilities, declare, track

if TYPE_CHECKING:
    from evaluator.backends.base import Backend
    from evaluator.config import EvaluatorConfig

Factory = Callable[["EvaluatorConfig", list[Path]], "Backend"]


@dataclass(frozen=True)
class Entry:
    name: str
    factory: Factory
    capabilities: Capabilities  # used when the backend's class declares none
    summary: str


_REGISTRY: dict[str, Entry] = {}


def register(name: str, *, capabilities: Capabilities = Capabilities(),
             summary: str = "") -> Callable[[Factory], Factory]:
    """Add a backend under `name` (a later registration of the same name replaces it)."""
    def wrap(factory: Factory) -> Factory:
        _REGISTRY[name] = Entry(name, factory, capabilities, summary)
        declare(name, capabilities)
        return factory
    return wrap


def names() -> list[str]:
    return list(_REGISTRY)


def entry(name: str) -> Entry:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(_REGISTRY)}") from None


def create(config: "EvaluatorConfig", extra_hidden: list[Path] = ()) -> "Backend":  # type: ignore[assignment]
    """The configured backend (config.backend), not yet wrapped in worker slots."""
    backend = entry(config.backend).factory(config, list(extra_hidden))
    track(backend)
    return backend


# ---------------------------------------------------------------- the built-in backends
@register("local", summary="this machine's own software in namespaces (no container engine)")
def _local(config: "EvaluatorConfig", hidden: list[Path]) -> "Backend":
    from evaluator.backends.local import LocalBackend  # deferred like the optional ones: only who chooses it imports it

    return LocalBackend(config.local, extra_hidden=hidden, writable=config.writable_paths)


# one warm container per worker slot: grade() is given the slot
@register("docker", capabilities=Capabilities(slots=True), summary="the Docker Engine API (or podman's)")
def _docker(config: "EvaluatorConfig", hidden: list[Path]) -> "Backend":
    from evaluator.backends.docker import DockerBackend  # the docker SDK is optional (.[docker])

    return DockerBackend(config.docker, writable=config.writable_paths)


@register("modal", capabilities=Capabilities(gpus="remote"), summary="a Modal Sandbox per grading, on a cloud GPU")
def _modal(config: "EvaluatorConfig", hidden: list[Path]) -> "Backend":
    from evaluator.backends.modal_backend import ModalBackend  # the modal SDK is optional (.[modal])

    return ModalBackend(config.modal)


# each grading a Ray task on a node with what it needs; the node grades with its own backend
@register("ray", capabilities=Capabilities(gpus="remote", cancel=True),
          summary="a Ray task per grading on a cluster's nodes")
def _ray(config: "EvaluatorConfig", hidden: list[Path]) -> "Backend":
    from evaluator.backends.ray_backend import RayBackend  # the ray SDK is optional (.[ray])

    return RayBackend(config)
