"""The docker backend: a task graded inside its own image, through the Docker Engine API.

Any engine that serves that API will do: Docker itself, or podman's `podman system service`
(tools/podman_setup.sh). Only the SDK is used, never a docker binary.

The package, each module importing only those listed above it:
  engine.py     small engine calls the others share (an exec with our own environment, a file
                read out of a container, an exec's exit code, an engine error made short);
  image.py      building the task's image once per package content, and finding it again;
  scripts.py    the shell our own execs run in a container (the reset, the volume listing, the
                counters) and readers of its output;
  container.py  the reference and warm containers and the reset between two gradings;
  grading.py    DockerBackend, composing the two: prepare, the baseline, grade, close.
"""

from evaluator.backends.docker.container import (
    CACHE_FILE_BYTES, ENGINE_FILES, KEEPALIVE, MAX_RESET_PATHS, MAX_RESTORE_BYTES, REVIEWER, SYSTEM_PREFIXES, TESTS,
    Containers, gpu_host_config, host_cgroup_file, is_system_path,
)
from evaluator.backends.docker.engine import OWN_ENV
from evaluator.backends.docker.grading import PODMAN_SOCKET, DockerBackend
from evaluator.task import DEV_ENGINES
from evaluator.backends.docker.image import BACKEND_VERSION, Images
from evaluator.backends.docker.scripts import COUNTERS_SCRIPT, RESET_SCRIPT, STAT_SCRIPT, VOLUME_SCRIPT

__all__ = [
    "BACKEND_VERSION", "CACHE_FILE_BYTES", "COUNTERS_SCRIPT", "DEV_ENGINES", "ENGINE_FILES", "KEEPALIVE",
    "MAX_RESET_PATHS", "MAX_RESTORE_BYTES", "OWN_ENV", "PODMAN_SOCKET", "RESET_SCRIPT", "REVIEWER", "STAT_SCRIPT",
    "SYSTEM_PREFIXES", "TESTS", "VOLUME_SCRIPT", "Containers", "DockerBackend", "Images", "gpu_host_config",
    "host_cgroup_file", "is_system_path",
]
