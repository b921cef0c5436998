"""Cost of model calls from a price table (package data, overridable from config)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources

from zero.agent.messages import Usage

__all__ = ["DEFAULT_OUTPUT_CAP", "Price", "PriceTable", "smallest_cap"]

DEFAULT_OUTPUT_CAP = 4096
"""The output cap a call of a model Zero knows nothing about (a local one, say)."""
DEFAULT_CONTEXT = 32_768
"""The context window taken for a model Zero knows nothing about."""

# A dated or `-latest` snapshot of a known model costs what the model costs.
_SNAPSHOT = re.compile(r"^-(\d{4}-?\d{2}-?\d{2}|latest)$")


def smallest_cap(*caps: int | None) -> int | None:
    """Of the output caps that are set (flag, config, manifest, team file), the smallest wins."""
    return min((c for c in caps if c is not None), default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cached_input: float | None = None
    max_output: int | None = None  # the model's default output cap a call, in tokens
    context: int | None = None  # its context window, in tokens

    def cost(self, usage: Usage) -> float:
        cached = usage.cached_tokens if self.cached_input is not None else 0
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        fresh = usage.prompt_tokens - cached
        return (fresh * self.input + cached * cached_rate + usage.completion_tokens * self.output) / 1e6


class PriceTable:
    """Looks up the price of a model by exact name, then by its undated base name."""

    def __init__(self, prices: Mapping[str, Price]):
        self._prices = dict(prices)

    @classmethod
    def builtin(cls) -> PriceTable:
        data = tomllib.loads(resources.files("zero.agent").joinpath("prices.toml").read_text("utf-8"))
        return cls({name: Price(**fields) for name, fields in data["models"].items()})

    def with_overrides(self, overrides: Mapping[str, Price]) -> PriceTable:
        return PriceTable({**self._prices, **overrides})

    def price(self, model: str) -> Price | None:
        name = model.rsplit("/", 1)[-1]  # "openai/gpt-4.1" as some gateways spell it
        if name in self._prices:
            return self._prices[name]
        for known in sorted(self._prices, key=len, reverse=True):
            if name.startswith(known) and _SNAPSHOT.match(name[len(known) :]):
                return self._prices[known]
        return None

    def output_cap(self, model: str) -> int:
        """The default output cap a call of ``model``: its ``max_output``, else ``DEFAULT_OUTPUT_CAP``."""
        price = self.price(model)
        return price.max_output if price is not None and price.max_output else DEFAULT_OUTPUT_CAP

    def context_window(self, model: str) -> int:
        """The context window of ``model``, in tokens: its ``context``, else ``DEFAULT_CONTEXT``."""
        price = self.price(model)
        return price.context if price is not None and price.context else DEFAULT_CONTEXT

    def priced(self, model: str, usage: Usage) -> Usage:
        """``usage`` with its cost filled in, or ``None`` (unknown) when the model has no price."""
        price = self.price(model)
        return replace(usage, cost_usd=None if price is None else price.cost(usage))
