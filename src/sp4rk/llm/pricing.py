"""What a model call costs: list prices in USD per million tokens, per model.

::

    from sp4rk.llm.pricing import ModelPrice, default_price_table

    prices = default_price_table()                      # a fresh copy of the built-in prices
    prices.cost("gpt-4o-mini", response.usage)          # USD, or None for an unknown model
    prices.set("my-finetune", ModelPrice(input=0.30, output=1.20))
    prices = prices.with_prices({"gpt-4o": ModelPrice(input=2.0, output=8.0)})  # override

The built-in table (:data:`DEFAULT_PRICES`) holds the OpenAI and Anthropic models the
providers name, at the public list prices of :data:`PRICES_AS_OF`, standard tier (no batch or
priority discounts, no long-context surcharges). Prices change: override what your contract
says. A model the table does not know has an **unknown** cost (``None``), never zero.

Model names are matched as providers report them: case-insensitively, without a router
prefix (``openai:``, ``anthropic:``, ``openai-chat:``, ``openai-responses:``), and with a
dated snapshot suffix falling back to its base name (``gpt-4o-2024-08-06`` is priced as
``gpt-4o``, ``claude-sonnet-4-5-20250929`` as ``claude-sonnet-4-5``). Nothing else is guessed:
``gpt-4o-audio-preview`` is unknown unless you add it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sp4rk.llm.types import TokenUsage

__all__ = [
    "DEFAULT_PRICES",
    "PRICES_AS_OF",
    "ModelPrice",
    "PriceTable",
    "default_price_table",
]

#: The month the built-in prices were taken from the providers' price pages.
PRICES_AS_OF = "2025-11"

_PER_TOKEN = 1e-6
#: Router prefixes that name the provider, not the model (the same model costs the same).
_ROUTER_PREFIXES = ("openai", "openai-chat", "openai-responses", "anthropic")
#: A dated snapshot or alias suffix: ``-2024-08-06``, ``-20250929``, ``-latest``.
#: Distinct model names whose lookup a table remembers.
_MAX_REMEMBERED = 256
_SNAPSHOT = re.compile(r"^(?P<base>.+?)-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """One model's prices in USD per million tokens.

    ``cached_input`` is the price of input tokens read from the provider's prompt cache and
    ``cache_write`` that of input tokens written to it (Anthropic); either defaults to the
    ``input`` price when ``None``.
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input", "cache_write"):
            value = getattr(self, name)
            if value is None and name in ("cached_input", "cache_write"):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"ModelPrice.{name} must be a number (USD per million tokens)")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"ModelPrice.{name} must be a finite number >= 0, got {value}")

    def cost(self, usage: TokenUsage) -> float:
        """The cost in USD of a call that used ``usage``.

        Cached and cache-written tokens are the part of ``usage.input_tokens`` the provider
        reported as such; the rest is priced as plain input.
        """
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        written = min(usage.cache_write_tokens, usage.input_tokens - cached)
        plain = usage.input_tokens - cached - written
        return _PER_TOKEN * (
            plain * self.input
            + cached * (self.input if self.cached_input is None else self.cached_input)
            + written * (self.input if self.cache_write is None else self.cache_write)
            + usage.output_tokens * self.output
        )

    def estimate(self, input_tokens: int, output_tokens: int) -> float:
        """The most a call of this size may cost (no cache discount is assumed)."""
        return _PER_TOKEN * (
            input_tokens * max(self.input, self.cache_write or 0.0) + output_tokens * self.output
        )


def _anthropic(input: float, output: float) -> ModelPrice:
    """Anthropic's scheme: cache reads at a tenth of input, 5-minute cache writes at 1.25x."""
    return ModelPrice(input=input, output=output, cached_input=input / 10, cache_write=input * 1.25)


DEFAULT_PRICES: Mapping[str, ModelPrice] = MappingProxyType(
    {
        # OpenAI (cached input as listed on the price page)
        "gpt-5.1": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
        "gpt-5.1-codex": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
        "gpt-5": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
        "gpt-5-codex": ModelPrice(input=1.25, cached_input=0.125, output=10.0),
        "gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.0),
        "gpt-5-nano": ModelPrice(input=0.05, cached_input=0.005, output=0.40),
        "gpt-4.1": ModelPrice(input=2.0, cached_input=0.50, output=8.0),
        "gpt-4.1-mini": ModelPrice(input=0.40, cached_input=0.10, output=1.60),
        "gpt-4.1-nano": ModelPrice(input=0.10, cached_input=0.025, output=0.40),
        "gpt-4o": ModelPrice(input=2.50, cached_input=1.25, output=10.0),
        "gpt-4o-mini": ModelPrice(input=0.15, cached_input=0.075, output=0.60),
        "o1": ModelPrice(input=15.0, cached_input=7.50, output=60.0),
        "o3": ModelPrice(input=2.0, cached_input=0.50, output=8.0),
        "o3-mini": ModelPrice(input=1.10, cached_input=0.55, output=4.40),
        "o4-mini": ModelPrice(input=1.10, cached_input=0.275, output=4.40),
        # Anthropic
        "claude-opus-4-5": _anthropic(5.0, 25.0),
        "claude-opus-4-1": _anthropic(15.0, 75.0),
        "claude-opus-4": _anthropic(15.0, 75.0),
        "claude-sonnet-4-5": _anthropic(3.0, 15.0),
        "claude-sonnet-4": _anthropic(3.0, 15.0),
        "claude-3-7-sonnet": _anthropic(3.0, 15.0),
        "claude-3-5-sonnet": _anthropic(3.0, 15.0),
        "claude-haiku-4-5": _anthropic(1.0, 5.0),
        "claude-3-5-haiku": _anthropic(0.80, 4.0),
        "claude-3-opus": _anthropic(15.0, 75.0),
        "claude-3-haiku": ModelPrice(input=0.25, cached_input=0.03, cache_write=0.30, output=1.25),
    }
)
"""The built-in list prices (read-only); :func:`default_price_table` gives an editable copy."""


class PriceTable:
    """Prices per model; look a model up as a provider reports it (see the module docs).

    Args:
        prices: ``{model: ModelPrice}``; ``None`` starts empty (use
            :func:`default_price_table` for the built-in prices).
    """

    __slots__ = ("_found", "_prices")

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None) -> None:
        self._prices: dict[str, ModelPrice] = {}
        self._found: dict[str, ModelPrice | None] = {}
        """Names looked up so far (every model call prices its response): bounded."""
        for model, price in (prices or {}).items():
            self.set(model, price)

    def set(self, model: str, price: ModelPrice) -> None:
        """Add or replace the price of ``model`` (matched case-insensitively)."""
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"a price needs a model name, got {model!r}")
        if not isinstance(price, ModelPrice):
            raise TypeError(
                f"the price of {model!r} must be a ModelPrice(input=..., output=...), got "
                f"{type(price).__name__}"
            )
        self._prices[model.strip().lower()] = price
        self._found.clear()

    def with_prices(self, prices: Mapping[str, ModelPrice]) -> PriceTable:
        """A copy of this table with ``prices`` added or replacing existing ones."""
        table = PriceTable(self._prices)
        for model, price in prices.items():
            table.set(model, price)
        return table

    def lookup(self, model: str) -> ModelPrice | None:
        """The price of ``model``, or ``None`` when the table does not know it."""
        try:
            return self._found[model]
        except KeyError:
            pass
        price = self._resolve(model)
        if len(self._found) < _MAX_REMEMBERED:
            self._found[model] = price
        return price

    def _resolve(self, model: str) -> ModelPrice | None:
        name = model.strip().lower()
        prefix, sep, rest = name.partition(":")
        if sep and prefix in _ROUTER_PREFIXES:
            name = rest
        price = self._prices.get(name)
        if price is None and (snapshot := _SNAPSHOT.match(name)) is not None:
            price = self._prices.get(snapshot["base"])
        return price

    def cost(self, model: str, usage: TokenUsage) -> float | None:
        """The cost in USD of a call to ``model`` that used ``usage``; ``None`` if unknown."""
        price = self.lookup(model)
        return None if price is None else price.cost(usage)

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.lookup(model) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._prices))

    def __len__(self) -> int:
        return len(self._prices)

    def __repr__(self) -> str:
        return f"PriceTable({len(self._prices)} models)"


def default_price_table() -> PriceTable:
    """A fresh, editable table of the built-in prices (:data:`DEFAULT_PRICES`)."""
    table = PriceTable()
    table._prices.update(_checked_defaults())  # every run makes one: checked once, copied
    return table


@functools.cache
def _checked_defaults() -> dict[str, ModelPrice]:
    return dict(PriceTable(DEFAULT_PRICES)._prices)
