"""Typed settings of the evaluator (documented, with defaults, in configs/default.yaml)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt knob is an error, not a silent default


class LocalConfig(_Strict):
    cache_dir: str = "~/.cache/pesflow"
    install_steps: Literal["auto", "skip", "require"] = "auto"
    step_timeout_sec: float = Field(900, gt=0)
    python: str | None = None  # the stand-in interpreter; None: the one pesflow runs on
    hide_paths: list[str] = Field(default_factory=lambda: ["/root/.ssh", "/root/.aws", "/root/.docker", "/root/.netrc"])
    passthrough_env: list[str] = Field(
        default_factory=lambda: ["PIP_*", "UV_*", "*_PROXY", "*_proxy", "SSL_CERT_*", "REQUESTS_CA_BUNDLE",
                                 "CURL_CA_BUNDLE"]
    )
    max_log_bytes: int = Field(2 << 20, gt=4096)
    # Limits of one grading (evaluator/limits.py); 0 turns one off.
    memory_mb: int | None = Field(None, ge=0)  # None: the task's [environment].memory_mb
    max_pids: int = Field(4096, ge=0)
    disk_mb: int = Field(4096, ge=0)
    max_output_mb: int = Field(64, ge=1)
    stray_processes: Literal["fail", "kill"] = "fail"
    # cgroups handed to an ordinary user (a v2 folder it owns, or v1 folders per controller) for
    # the rootless sandbox's memory and process limits; empty: its own cgroup where it owns it
    cgroup_parents: list[str] = Field(default_factory=list)


class DockerConfig(_Strict):
    base_url: str | None = None  # None: DOCKER_HOST, else the engine's default socket
    cache_dir: str = "~/.cache/pesflow"
    pull: bool = False  # False: a base image missing from the engine is an infra error naming the fix
    build_network: str = "host"
    api_timeout_sec: float = Field(300, gt=0)
    pids_limit: int = Field(4096, ge=64)
    gpus_via: Literal["device_requests", "cdi"] = "device_requests"
    warm_containers: bool = True  # False: a new container for every candidate (cold)
    stray_processes: Literal["fail", "kill"] = "fail"
    build_args_from_env: list[str] = Field(default_factory=lambda: ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                                                                    "http_proxy", "https_proxy", "no_proxy"])
    max_log_bytes: int = Field(2 << 20, gt=4096)


class ModalConfig(_Strict):
    app_name: str = "pesflow-grading"
    image: Literal["dockerfile", "registry"] = "dockerfile"
    gpu: str = "H100"
    exact_gpu: bool = True  # "H100!": Modal may otherwise serve a request on a faster type (a timing elsewhere)
    cpu: float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, gt=0)
    startup_timeout_sec: float = Field(600, gt=0)
    queue_timeout_sec: float = Field(600, gt=0)  # a sandbox not scheduled by then (quota, capacity): one line, exit 3
    cache_dir: str = "~/.cache/pesflow"
    stray_processes: Literal["fail", "kill"] = "fail"  # as the local and docker backends (evaluator/grading_policy.py)
    max_log_bytes: int = Field(2 << 20, gt=4096)


class RayConfig(_Strict):
    # auto: RAY_ADDRESS or the cluster `ray start` left here, else a local one pesflow starts and stops
    address: str = "auto"
    node_backend: Literal["local", "docker"] = "local"  # what grades on each node
    connect_timeout_sec: float = Field(30, gt=0)  # an address that does not answer by then: one line, exit 3
    resource_wait_sec: float = Field(60, gt=0)  # no node with the package's GPUs/CPUs by then: one line, exit 3
    # a grading's task may take this beyond its timeout (queue, first prepare on a node)
    grace_sec: float = Field(1800, gt=0)
    node_retries: int = Field(2, ge=0)  # gradings lost with their node, graded again elsewhere (never charged)
    node_cache_dir: str = "~/.cache/pesflow/ray"  # on each node: its packages and its backend's cache, by node id
    ship_code: bool = True  # pesflow's evaluator package travels with the job (the nodes grade with the driver's code)
    cpus: float | None = Field(None, gt=0)  # per grading; None: the task's [environment].cpus
    memory_mb: int | None = Field(None, ge=0)  # per grading; None: the task's memory_mb; 0: none asked


class BenchmarkConfig(_Strict):
    url: str = "https://github.com/one2piece2hello/LLM-Infra-Bench-faibench.git"
    ref: str = "5fe5762d823ee4831181109342bf6482a8acc552"  # the commit pesflow's results were measured on
    dir: str = "~/.cache/pesflow/benchmark"
    # the first command that needs a catalog name fetches the benchmark into `dir` (evaluator/benchmark.py first_use)
    fetch_on_first_use: bool = True
    fetch_timeout_sec: float = Field(20, gt=0)  # how long that fetch waits for the repository to answer at all
    fetch_retry_hours: float = Field(6, ge=0)  # a failed one is not tried again for this long (0: every command)


class TrustConfig(_Strict):
    enabled: bool = True  # the screens (evaluator/trust/): off only to measure what they cost
    static: bool = True
    runtime: bool = True  # the guard in every Python process of a grading
    probes: bool = True  # the candidate's entry points called again after the grader
    plausibility_ratio: float = Field(3.0, gt=1)  # a speedup past this times the reference's runs every probe
    # a speedup where the reward reaches its cap (the anchor squared) runs every probe too
    review_at_reward_cap: bool = True
    # a speedup over this many times pesflow's own timing of the same calls needs review (0: off)
    reproduce_ratio: float = Field(3.0, ge=0)
    reproduce_suspect_ratio: float = Field(10.0, gt=1)  # ... over this many times: not reproduced, not a result
    reproduce_sec: float = Field(3.0, gt=0)  # seconds the probe may spend timing candidate and baseline for it
    probe_budget_sec: float = Field(5.0, gt=0)  # the quick probes of every correct grading
    full_probe_budget_sec: float = Field(60.0, gt=0)  # every probe, when the speedup is implausible
    # local backend: the probe's imports done beside the grader (torch) or while its grading is read
    # (pesflow_probe_warm.py)
    warm_probe: bool = True
    # (the score always comes from a grading with nothing of the screen in it; the guard and the
    # probes watch a second one: evaluator/trust/watch.py)
    watch_tolerance: float = Field(2.0, gt=1)  # scored figure over watched past this: a person looks
    # a search's correct grading at or under its best so far: its watched grading deferred until it
    # is picked (always), or made when graded (never)
    defer_below_best: Literal["always", "never"] = "always"


class EvaluatorConfig(_Strict):
    # a name in the registry (evaluator/backends/registry.py): local, docker, modal, ray; checked there
    backend: str = "local"
    grader: Literal["dev", "hidden"] = "dev"
    timeout_sec: float | None = Field(None, gt=0)
    calibrate_repeats: int = Field(3, ge=3)
    workers: int | None = Field(None, ge=1)
    gpu_devices: list[int] | None = None
    infra_retries: int = Field(1, ge=0)
    writable_paths: list[str] = Field(default_factory=list)  # beyond the format's (evaluator.task.GRADING_WRITES)
    local: LocalConfig = Field(default_factory=LocalConfig)
    docker: DockerConfig = Field(default_factory=DockerConfig)
    modal: ModalConfig = Field(default_factory=ModalConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    trust: TrustConfig = Field(default_factory=TrustConfig)
    # a profiled dev grading's calls at most (evaluator/profile.py), the baseline's half that
    profile_sec: float = Field(3.0, gt=0)
    # the most a profile costs against its grading's grader time, ncu included
    profile_share: float = Field(0.15, gt=0, le=1)
    # a dev grading failed by a correctness gate: seconds its candidate's and the baseline's calls may take
    # when pesflow compares their answers (evaluator/mismatch.py); 0: no comparison
    mismatch_sec: float = Field(5.0, ge=0)
