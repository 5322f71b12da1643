"""What a call costs: a small price table and :func:`cost_of`.

Prices are dollars per million tokens, ``(input, output)``, for the API's standard tier.
They change; pass your own table to :func:`cost_of` where it matters.
"""

from __future__ import annotations

from collections.abc import Mapping

from plait.models._base import Usage

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4-5": (1.00, 5.00),
}
"""Dollars per million ``(input, output)`` tokens by model name; a dated name
(``claude-sonnet-4-20250514``) takes the price of its longest listed prefix."""

FREE_PREFIXES = ("scripted",)
"""Spec prefixes that never cost anything."""


def price_of(
    spec: str, prices: Mapping[str, tuple[float, float]] | None = None
) -> tuple[float, float] | None:
    """The ``(input, output)`` price of a model spec or bare model name, or None if unknown.

    The full spec is looked up first, then the model name without its prefix, then the
    longest listed name the model name starts with.
    """
    table = DEFAULT_PRICES if prices is None else prices
    prefix, _, name = spec.partition(":")
    if not name:
        prefix, name = "", spec
    if prefix in FREE_PREFIXES:
        return (0.0, 0.0)
    for key in (spec, name):
        if key in table:
            return table[key]
    candidates = [key for key in table if name.startswith(key)]
    return table[max(candidates, key=len)] if candidates else None


def cost_of(
    spec: str, usage: Usage, prices: Mapping[str, tuple[float, float]] | None = None
) -> float:
    """Dollars spent by ``usage`` on the model ``spec``; 0.0 for a model with no price.

    Args:
        spec: a model spec (``"openai:gpt-4o-mini"``) or a bare model name.
        usage: the tokens spent.
        prices: a price table to use instead of :data:`DEFAULT_PRICES`.
    """
    price = price_of(spec, prices)
    if price is None:
        return 0.0
    return (usage.input_tokens * price[0] + usage.output_tokens * price[1]) / 1_000_000


__all__ = ["DEFAULT_PRICES", "cost_of", "price_of"]
