"""Tests of :mod:`sample_pkg.prices`."""

from __future__ import annotations

from sample_pkg.prices import total, with_tax


def test_with_tax_rounds_half_up() -> None:
    assert with_tax(1000, 19) == 1190
    assert with_tax(5, 10) == 6


def test_total_taxes_each_price() -> None:
    assert total([1000, 5], 10) == 1106
