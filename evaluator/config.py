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
    hide_paths: list[str] = Field(default_factory=lambda: ["/root/.ssh", "/root/.aws", "/root/.docker", "/root/.netrc", "/home"])
    passthrough_env: list[str] = Field(
        default_factory=lambda: ["PIP_*", "UV_*", "*_PROXY", "*_proxy", "SSL_CERT_*", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"]
    )
    max_log_bytes: int = Field(2 << 20, gt=4096)


class EvaluatorConfig(_Strict):
    backend: Literal["local"] = "local"
    grader: Literal["dev", "hidden"] = "dev"
    timeout_sec: float | None = Field(None, gt=0)
    calibrate_repeats: int = Field(3, ge=3)
    local: LocalConfig = Field(default_factory=LocalConfig)
