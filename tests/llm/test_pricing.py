"""Prices per model: the cost of a call, matching model names, overriding, unknown models."""

from __future__ import annotations

import math

import pytest

from sp4rk.llm.pricing import (
    DEFAULT_PRICES,
    ModelPrice,
    PriceTable,
    default_price_table,
)
from sp4rk.llm.types import TokenUsage


def test_cost_prices_plain_cached_written_and_output_tokens_separately() -> None:
    price = ModelPrice(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0)
    usage = TokenUsage(10_000, 2_000, cached_input_tokens=6_000, cache_write_tokens=1_000)
    expected = (3_000 * 3.0 + 6_000 * 0.3 + 1_000 * 3.75 + 2_000 * 15.0) / 1_000_000
    assert price.cost(usage) == pytest.approx(expected)


def test_cache_prices_default_to_the_input_price() -> None:
    price = ModelPrice(input=2.0, output=8.0)
    usage = TokenUsage(1_000_000, 0, cached_input_tokens=400_000, cache_write_tokens=100_000)
    assert price.cost(usage) == pytest.approx(2.0)


def test_cache_counts_beyond_the_input_are_clamped() -> None:
    price = ModelPrice(input=1.0, cached_input=0.1, output=1.0)
    usage = TokenUsage(100, 0, cached_input_tokens=500, cache_write_tokens=50)
    assert price.cost(usage) == pytest.approx(100 * 0.1 / 1_000_000)


def test_estimate_assumes_no_cache_discount() -> None:
    price = ModelPrice(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0)
    assert price.estimate(1_000, 100) == pytest.approx((1_000 * 3.75 + 100 * 15.0) / 1e6)


@pytest.mark.parametrize(
    ("reported", "listed"),
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        ("openai:gpt-5", "gpt-5"),
        ("openai-responses:gpt-5-codex", "gpt-5-codex"),
        ("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
    ],
)
def test_reported_model_names_find_their_listed_price(reported: str, listed: str) -> None:
    assert default_price_table().lookup(reported) is DEFAULT_PRICES[listed]


@pytest.mark.parametrize(
    "model",
    ["", "gpt-4o-audio-preview", "openrouter:gpt-4o", "llama3:8b", "my-model", "gpt-4o-mini-x"],
)
def test_unknown_models_have_an_unknown_cost_never_zero(model: str) -> None:
    table = default_price_table()
    assert table.lookup(model) is None
    assert table.cost(model, TokenUsage(1000, 1000)) is None
    assert model not in table


def test_the_models_the_docs_name_have_prices() -> None:
    table = default_price_table()
    for model in ("gpt-4o-mini", "gpt-4o", "gpt-5", "claude-sonnet-4-5", "claude-haiku-4-5"):
        assert model in table, model


def test_known_list_prices() -> None:
    table = default_price_table()
    usage = TokenUsage(1_000_000, 1_000_000)
    assert table.cost("gpt-4o-mini", usage) == pytest.approx(0.15 + 0.60)
    assert table.cost("claude-sonnet-4-5", usage) == pytest.approx(3.0 + 15.0)
    cached = TokenUsage(1_000_000, 0, cached_input_tokens=1_000_000)
    assert table.cost("claude-sonnet-4-5", cached) == pytest.approx(0.30)


def test_tables_are_extended_and_overridden_without_touching_the_defaults() -> None:
    table = default_price_table()
    table.set("My-Finetune", ModelPrice(input=1.0, output=2.0))
    assert table.cost("my-finetune", TokenUsage(1_000_000, 0)) == pytest.approx(1.0)
    cheaper = table.with_prices({"gpt-4o": ModelPrice(input=1.0, output=1.0)})
    assert cheaper.cost("gpt-4o", TokenUsage(1_000_000, 0)) == pytest.approx(1.0)
    assert table.cost("gpt-4o", TokenUsage(1_000_000, 0)) == pytest.approx(2.5)
    assert default_price_table().lookup("my-finetune") is None
    assert "my-finetune" in cheaper and len(cheaper) == len(table)
    with pytest.raises(TypeError):
        DEFAULT_PRICES["x"] = ModelPrice(input=1, output=1)  # type: ignore[index]


def test_an_empty_table_knows_nothing() -> None:
    assert PriceTable().lookup("gpt-4o") is None
    assert list(PriceTable({"a": ModelPrice(input=0, output=0)})) == ["a"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"input": -1.0, "output": 1.0}, ValueError),
        ({"input": math.inf, "output": 1.0}, ValueError),
        ({"input": True, "output": 1.0}, TypeError),
        ({"input": "1", "output": 1.0}, TypeError),
        ({"input": 1.0, "output": 1.0, "cached_input": -0.1}, ValueError),
    ],
)
def test_bad_prices_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        ModelPrice(**kwargs)  # type: ignore[arg-type]


def test_bad_table_entries_are_refused() -> None:
    table = PriceTable()
    with pytest.raises(ValueError, match="model name"):
        table.set(" ", ModelPrice(input=1, output=1))
    with pytest.raises(TypeError, match="ModelPrice"):
        table.set("m", {"input": 1, "output": 1})  # type: ignore[arg-type]
