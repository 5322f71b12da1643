"""Bounded gather: at most N at once, results in order, failures kept or failing fast."""

from __future__ import annotations

import anyio
import pytest

from plait import gather
from plait.errors import ConfigError
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio


class Meter:
    """Counts the calls running at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def call(self, value: int) -> int:
        self.running += 1
        self.most = max(self.most, self.running)
        for _ in range(5):
            await anyio.sleep(0)  # a checkpoint: every started call overlaps the others
        self.running -= 1
        return value * 10


async def test_at_most_limit_at_once_and_results_in_order() -> None:
    bounded, free = Meter(), Meter()
    assert await gather(*(bounded.call(n) for n in range(6)), limit=2) == [0, 10, 20, 30, 40, 50]
    assert bounded.most == 2
    assert await gather(*(free.call(n) for n in range(6))) == [0, 10, 20, 30, 40, 50]
    assert free.most == 6


async def boom(why: str) -> int:
    await anyio.sleep(0)
    raise ValueError(why)


async def test_a_failure_is_its_result_and_the_others_finish() -> None:
    meter = Meter()
    ok, failed, other = await gather(meter.call(1), boom("types"), meter.call(3))
    assert (ok, other) == (10, 30)
    assert isinstance(failed, ValueError) and str(failed) == "types"


async def test_fail_fast_cancels_the_siblings() -> None:
    never = anyio.Event()
    cancelled: list[str] = []

    async def waits(name: str) -> None:
        try:
            await never.wait()
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            raise

    with anyio.fail_after(scaled(5)), pytest.raises(ValueError, match="tests"):
        await gather(
            waits("a"), boom("tests"), waits("b"), waits("queued"), limit=3, fail_fast=True
        )
    assert sorted(cancelled) == ["a", "b"]  # "queued" never started, and is closed unrun


async def test_a_limit_below_one_is_refused() -> None:
    meter = Meter()
    with pytest.raises(ConfigError, match="at least 1"):
        await gather(meter.call(1), limit=0)
    assert meter.most == 0
