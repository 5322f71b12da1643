"""Prices with tax, in whole cents."""

from __future__ import annotations


def with_tax(cents: int, rate_percent: int) -> int:
    """``cents`` plus ``rate_percent`` percent tax, rounded half up to a cent."""
    return (cents * (100 + rate_percent) + 50) // 100


def total(prices: list[int], rate_percent: int) -> int:
    """The sum of ``prices``, each with its tax."""
    return sum(with_tax(p, rate_percent) for p in prices)
