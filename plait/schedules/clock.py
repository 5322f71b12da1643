"""The time a schedule reads: injected, so tests can run a week in seconds."""

from __future__ import annotations

import math
import time
from typing import Protocol


class Clock(Protocol):
    """Where a schedule's "now" comes from, and how long a wait for a time is."""

    def now(self) -> float:
        """The current time, epoch seconds."""
        ...

    def delay_ms(self, at: float) -> int:
        """Real milliseconds from now until this clock reads ``at`` (0 if it has)."""
        ...


class WallClock:
    """The wall clock: what every worker uses."""

    def now(self) -> float:
        """``time.time()``."""
        return time.time()

    def delay_ms(self, at: float) -> int:
        """Milliseconds until ``at``, rounded up (a mailbox message is never early)."""
        return max(0, math.ceil((at - time.time()) * 1000))


WALL_CLOCK = WallClock()
"""The one wall clock."""

__all__ = ["WALL_CLOCK", "Clock", "WallClock"]
