"""USD per call from a price table (configs/prices.yaml): model name -> $/Mtok in and out, and
for input read from or written to the provider's prompt cache."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.llm.types import Usage

DEFAULT_PRICES = Path(__file__).resolve().parents[2] / "configs" / "prices.yaml"


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    # Input read from the provider's prompt cache, and written to it; unset: the input rate.
    cached_input_per_mtok: float | None = Field(None, ge=0)
    cache_write_per_mtok: float | None = Field(None, ge=0)


class PriceTable(BaseModel):
    """Exact names first; otherwise the most specific (longest) matching glob, so that
    "gpt-4o-mini*" beats "gpt-4o*" whatever the order in the file."""

    entries: dict[str, Price] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "PriceTable":
        p = Path(path).expanduser() if path is not None else DEFAULT_PRICES
        if not p.is_file():
            raise ValueError(f"price table {p}: no such file; pass an existing YAML file or none for {DEFAULT_PRICES}")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"price table {p}: not valid YAML ({type(e).__name__}); fix the file") from None
        if not isinstance(data, dict):
            raise ValueError(f"price table {p}: expected a mapping of model name -> "
                             "{input_per_mtok, output_per_mtok}")
        entries: dict[str, Price] = {}
        for name, value in data.items():
            try:
                entries[str(name).lower()] = Price.model_validate(value)
            except ValidationError:
                raise ValueError(
                    f"price table {p}: entry {name!r} must be {{input_per_mtok: USD, "
                    "output_per_mtok: USD} (numbers >= 0), and may add cached_input_per_mtok and cache_write_per_mtok"
                ) from None
        return cls(entries=entries)

    def lookup(self, model: str) -> Price | None:
        name = model.lower()
        if name in self.entries:
            return self.entries[name]
        globs = [g for g in self.entries if any(c in g for c in "*?[") and fnmatchcase(name, g)]
        return self.entries[max(globs, key=len)] if globs else None

    def cost(self, model: str, usage: Usage) -> tuple[float, bool]:
        """(USD, priced); an unknown model costs 0 and says so rather than guessing."""
        price = self.lookup(model)
        if price is None:
            return 0.0, False
        return usd_of(price, usage), True


def usd_of(price: Price, usage: Usage) -> float:
    """Cache reads and writes at their rates, the rest of the input at the input rate."""
    read, write = usage.cache_read_tokens, usage.cache_write_tokens
    plain = max(usage.input_tokens - read - write, 0)
    rate_read = price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    rate_write = price.input_per_mtok if price.cache_write_per_mtok is None else price.cache_write_per_mtok
    return (plain * price.input_per_mtok + read * rate_read + write * rate_write
            + usage.output_tokens * price.output_per_mtok) / 1e6
