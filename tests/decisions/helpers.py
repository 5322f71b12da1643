"""Helpers shared by the decision tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import anyio

from plait.mesh import Delivery, Subscription


def ticking_clock(start: float = 1_800_000_000.0) -> Callable[[], float]:
    """A wall clock that moves one second per reading, so orders are certain."""
    counter = itertools.count()
    return lambda: start + next(counter)


async def read_events(sub: Subscription, seconds: float = 0.5) -> list[Delivery]:
    """Every event that arrives within ``seconds`` of quiet, acked."""
    got: list[Delivery] = []
    while True:
        with anyio.move_on_after(seconds):
            delivery = await sub.__anext__()
            await delivery.ack()
            got.append(delivery)
            continue
        return got
