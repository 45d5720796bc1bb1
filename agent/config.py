"""pesflow's configuration: configs/default.yaml, then --config FILE, then --set key=value."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent.population.database import PopulationConfig
from evaluator.config import BenchmarkConfig, EvaluatorConfig

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


class ConfigError(Exception):
    """One line naming the bad key and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LLMConfig(_Strict):
    default: str | None = None  # "openai:MODEL" | "anthropic:MODEL"; None: no LLM configured
    planner: str | None = None  # per-role overrides of `default`
    executor: str | None = None
    summarizer: str | None = None
    base_url: str | None = None  # the server of llm.default's provider (e.g. an OpenAI-compatible vLLM)
    openai_base_url: str | None = None  # per provider, when roles mix providers; else the SDK's env var
    anthropic_base_url: str | None = None
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int = Field(8192, ge=16)
    timeout_sec: float = Field(300, gt=0)
    max_attempts: int = Field(4, ge=1)
    backoff_base_sec: float = Field(1.0, ge=0)
    backoff_max_sec: float = Field(30.0, ge=0)
    max_usd: float | None = Field(10.0, ge=0)
    prices: str | None = None
    # role -> models a bandit chooses among (agent/llm/bandit.py)
    models: dict[str, list[str]] = Field(default_factory=dict)
    bandit_explore: float = Field(1.0, ge=0)

    @field_validator("models")
    @classmethod
    def _models_ok(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for role, specs in v.items():
            if role not in ("planner", "executor"):
                raise ValueError(f"llm.models.{role}: only planner and executor choose among "
                                 "models (their children are graded)")
            if len(specs) < 2 or len(set(specs)) != len(specs):
                raise ValueError(f"llm.models.{role}: list two or more different models, or leave it out for one model")
            for spec in specs:
                if ":" not in spec or spec.split(":", 1)[0] not in ("openai", "anthropic"):
                    raise ValueError(f"llm.models.{role}: {spec!r} is not provider:MODEL (openai:... or anthropic:...)")
        return v


class LoopConfig(_Strict):
    rounds: int = Field(16, ge=1, le=1000)
    children: int = Field(2, ge=1, le=32)
    candidates: int | None = Field(None, ge=1)  # the budget in candidates; sets rounds (the last one gets the rest)
    seed: int = 0
    grading_workers: int = Field(1, ge=1)
    pipeline_depth: int = Field(2, ge=1, le=16)  # rounds in flight at once; 1: one round at a time
    repair_attempts: int = Field(1, ge=0)
    patience: int | None = Field(4, ge=1)  # stop after this many rounds without a new best
    # stop once the best reaches this speedup (its dev figure where it has none)
    target: float | None = Field(None, gt=0)
    # engineer, GPU: stop once the best's dominant kernel is at this share of a ceiling
    roofline_stop: float | None = Field(0.9, gt=0, le=1)
    fix_turns: int = Field(1, ge=0, le=8)  # more executor turns for a child that fails (fix_on) (agent/search/fixes.py)
    fix_on: list[Literal["failed", "slower"]] = Field(default_factory=lambda: ["failed"])  # what earns a fix turn
    history_rows: int = Field(24, ge=0)  # the planner's table of attempts: at most this many, newest first
    resample_duplicates: int = Field(1, ge=0, le=4)  # asks again when a child is a program the search already has
    recent_failures: int = Field(4, ge=0)
    memory_items: int = Field(12, ge=1)
    lesson_chars: int = Field(400, ge=40)
    plan_chars: int = Field(4000, ge=200)
    inspiration_chars: int = Field(6000, ge=200)
    context_share: float = Field(0.25, gt=0, le=4)
    final_regrade_top: int = Field(3, ge=1)
    score_final_with_hidden: bool = True
    use_planner: bool = True  # False: a fixed plan, no planner call (ablations, single-shot, best-of-N)
    use_summarizer: bool = True  # False: lessons from the verdicts alone, no summarizer call
    edit_format: Literal["any", "whole_file"] = "any"  # what executors are asked for

    @model_validator(mode="after")
    def _rounds_from_candidates(self) -> "LoopConfig":
        if self.candidates is not None:
            self.rounds = -(-self.candidates // self.children)
        return self

    def children_in(self, k: int) -> int:
        """Children of round k: `children`, the last round only what is left of `candidates`."""
        if self.candidates is None:
            return self.children
        return max(1, min(self.children, self.candidates - self.children * (k - 1)))


class SearchConfig(_Strict):
    # what the model is shown of each grading: names a protocol of agent/search/protocol.py, whose
    # default this is (README "What the model sees")
    feedback: Literal["benchmark", "engineer"] = "engineer"


class RunConfig(_Strict):
    out: str = "traces"
    quiet: bool = False


class Config(_Strict):
    tasks_roots: list[str] = Field(default_factory=list)
    benchmark: BenchmarkConfig = Field(default_factory=BenchmarkConfig)
    evaluator: EvaluatorConfig = Field(default_factory=EvaluatorConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    population: PopulationConfig = Field(default_factory=PopulationConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    run: RunConfig = Field(default_factory=RunConfig)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` laid onto `base`, mappings merged key by key (the one config merge)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_yaml(path: Path, what: str = "config", mapping: str = "of keys to values") -> dict[str, Any]:
    """A YAML mapping from a file, or one line naming what is wrong with it (the one reader of
    pesflow's config files)."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise ConfigError(f"{what} {path}: cannot be read ({e.strerror}); check the path") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{what} {path}: not valid YAML ({str(e).splitlines()[0]}); fix the file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path}: must be a mapping {mapping}")
    return data


def parse_set(item: str) -> dict[str, Any]:
    """`a.b.c=value` -> {"a": {"b": {"c": value}}}, value read as a YAML scalar."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set evaluator.grader=hidden")
    value: Any = yaml.safe_load(raw) if raw.strip() else ""
    for part in reversed(key.strip().split(".")):
        value = {part: value}
    return value


def load_config(path: str | Path | None = None, sets: list[str] = ()) -> Config:  # type: ignore[assignment]
    data = read_yaml(DEFAULT_CONFIG) if DEFAULT_CONFIG.is_file() else {}
    if path:
        data = merge(data, read_yaml(Path(path)))
    for item in sets:
        data = merge(data, parse_set(item))
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(x) for x in err["loc"])
        got = f" (got {err['input']!r})" if err["type"] != "missing" else ""
        hint = ("remove it or check its spelling in configs/default.yaml" if err["type"] == "extra_forbidden"
                else "see configs/default.yaml")
        raise ConfigError(f"config key {key}: {err['msg']}{got}; {hint}") from None
