from __future__ import annotations

import pytest

from zero.agent import Price, PriceTable, Usage, format_cost


def test_known_models_and_their_dated_snapshots_are_priced() -> None:
    table = PriceTable.builtin()
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000, cached_tokens=400_000)
    assert table.priced("gpt-4.1-mini", usage).cost_usd == pytest.approx(0.6 * 0.40 + 0.4 * 0.10 + 1.60)
    assert table.priced("gpt-4.1-mini-2025-04-14", usage).cost_usd == table.priced("gpt-4.1-mini", usage).cost_usd
    assert table.price("claude-sonnet-4-6") == Price(
        input=3.0, output=15.0, cached_input=0.30, max_output=8192, context=200000
    )
    assert table.price("openai/gpt-4o") == table.price("gpt-4o")


def test_unknown_models_have_unknown_cost_never_zero() -> None:
    table = PriceTable.builtin()
    assert table.price("gpt-4.1-turbo-custom") is None  # a longer name is not a snapshot
    assert table.priced("llama3.1:8b", Usage(prompt_tokens=100, completion_tokens=100)).cost_usd is None
    # a sum with an unknown part keeps the known part as a lower bound, and says so
    partial = Usage(prompt_tokens=1, completion_tokens=1, cost_usd=None) + Usage(
        prompt_tokens=1, completion_tokens=1, cost_usd=0.5
    )
    assert partial.cost_usd == 0.5 and partial.unpriced and format_cost(partial) == "≥ $0.5000"
    assert partial.to_json()["unpriced"] is True and Usage.from_json(partial.to_json()) == partial
    nothing_known = Usage(cost_usd=None) + Usage()  # e.g. a failed run of an unpriced model: unknown, not $0
    assert nothing_known.cost_usd is None and format_cost(nothing_known) == "unknown"
    assert format_cost(Usage(cost_usd=0.0)) == "$0.0000"
    assert format_cost(Usage(cost_usd=0.0, unpriced=True)) == "unknown"  # (as every view says it: not "≥ $0.0000")


def test_config_prices_override_and_extend_the_table() -> None:
    table = PriceTable.builtin().with_overrides(
        {"llama3.1:8b": Price(input=0.0, output=0.0), "gpt-4.1": Price(input=1.0, output=1.0)}
    )
    assert table.priced("llama3.1:8b", Usage(prompt_tokens=100, completion_tokens=100)).cost_usd == 0.0
    assert table.priced("gpt-4.1", Usage(prompt_tokens=1_000_000, completion_tokens=0)).cost_usd == pytest.approx(1.0)
