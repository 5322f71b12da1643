"""Riding out a mesh outage: capped exponential backoff with jitter between retries."""

from __future__ import annotations

import logging
import random
import time

import anyio

from plait.errors import MeshUnavailable

FIRST_DELAY_S = 0.1
MAX_DELAY_S = 5.0


class Backoff:
    """The waits of one loop that retries while the mesh is unreachable.

    Each retry of an outage waits about twice as long as the one before, from
    ``first_s`` up to ``cap_s``, with jitter so that the processes of a mesh do not all
    come back at the same instant. A failure well after the last wait ended starts a
    new outage, from ``first_s`` again.

    Args:
        log: where each retry is told, one line (no traceback).
        first_s: the first wait, in seconds.
        cap_s: the longest wait, in seconds.
    """

    def __init__(
        self, log: logging.Logger, *, first_s: float = FIRST_DELAY_S, cap_s: float = MAX_DELAY_S
    ) -> None:
        self.log = log
        self.first_s = first_s
        self.cap_s = cap_s
        self._failures = 0
        self._waited_until = -float("inf")

    def next_delay(self) -> float:
        """The wait before the next retry (and count this failure)."""
        if time.monotonic() - self._waited_until > self.cap_s:
            self._failures = 0  # the loop ran fine since the last wait: a new outage
        base = min(self.cap_s, self.first_s * 2.0 ** min(self._failures, 30))
        self._failures += 1
        return base / 2 + random.uniform(0, base / 2)

    async def wait(self, exc: MeshUnavailable) -> None:
        """Say that the mesh is unreachable, and sleep until the next retry is due."""
        delay = self.next_delay()
        self.log.warning("mesh unreachable, retrying in %.1fs: %s", delay, exc)
        await anyio.sleep(delay)
        self._waited_until = time.monotonic()
