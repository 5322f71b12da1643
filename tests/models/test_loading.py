"""Spec strings, usage arithmetic and prices."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.errors import ConfigError
from plait.models import DEFAULT_PRICES, Usage, cost_of, load_model, price_of


@pytest.mark.parametrize("spec", ["gemini:pro", "gpt-4o", "openai:", ""])
def test_bad_spec_lists_the_supported_prefixes(spec: str) -> None:
    with pytest.raises(ConfigError, match="scripted, openai, anthropic"):
        load_model(spec)


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bad option for OpenAIModel"):
        load_model("openai:gpt-4o", api_key="sk-x", colour="blue")


def test_scripted_model_takes_no_options(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("[]\n")
    with pytest.raises(ConfigError, match="takes no options"):
        load_model(f"scripted:{path}", timeout=3)


def test_usage_adds_up() -> None:
    total = Usage(input_tokens=3, output_tokens=4) + Usage(input_tokens=10, output_tokens=1)
    assert total == Usage(input_tokens=13, output_tokens=5)
    assert total.total == 18


def test_cost_uses_dollars_per_million_tokens() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=2_000_000)
    assert cost_of("openai:gpt-4o", usage) == pytest.approx(2.50 + 2 * 10.00)
    assert cost_of("gpt-4o", usage) == cost_of("openai:gpt-4o", usage)


def test_dated_names_take_their_longest_listed_prefix() -> None:
    assert price_of("openai:gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]
    assert price_of("openai:gpt-4o-2024-08-06") == DEFAULT_PRICES["gpt-4o"]
    assert price_of("anthropic:claude-sonnet-4-20250514") == DEFAULT_PRICES["claude-sonnet-4"]
    assert price_of("anthropic:claude-3-5-haiku-latest") == DEFAULT_PRICES["claude-3-5-haiku"]


def test_scripted_and_unknown_models_cost_nothing() -> None:
    usage = Usage(input_tokens=5_000, output_tokens=5_000)
    assert cost_of("scripted:tests/script.yaml", usage) == 0.0
    assert cost_of("openai:my-local-llama", usage) == 0.0
    assert price_of("openai:my-local-llama") is None


def test_a_custom_price_table_replaces_the_default() -> None:
    usage = Usage(input_tokens=500_000, output_tokens=0)
    prices = {"openai:my-local-llama": (1.0, 2.0)}
    assert cost_of("openai:my-local-llama", usage, prices) == pytest.approx(0.5)
    assert cost_of("openai:gpt-4o", usage, prices) == 0.0
