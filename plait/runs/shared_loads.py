"""Concurrent loads of one key that share one read.

Two hundred runs activating at once on a cold host each asked the store for the same
graph and the same profiles: as many reads, decodes and validations of one value,
with the cache filled only after all of them. :class:`SharedLoads` lets the first
caller's load answer every caller that asks while it runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedLoads(Generic[K, V]):
    """Loads in flight by key: a caller arriving while one runs awaits that one.

    The load runs in a task of its own, so a caller cancelled meanwhile leaves it to
    answer the others; its error reaches every caller waiting on it. Nothing is kept
    once it ends: the caller caches the value as it sees fit.
    """

    def __init__(self) -> None:
        self._loading: dict[K, asyncio.Future[V]] = {}

    async def load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The value ``load()`` gives for ``key``, or that of the load of ``key`` in flight."""
        future = self._loading.get(key)
        if future is None:
            future = asyncio.ensure_future(load())
            self._loading[key] = future
            future.add_done_callback(lambda done: self._done(key, done))
        return await asyncio.shield(future)

    def _done(self, key: K, future: asyncio.Future[V]) -> None:
        if self._loading.get(key) is future:
            del self._loading[key]
        if not future.cancelled():
            future.exception()  # read, so an error no caller waited for is not logged


__all__ = ["SharedLoads"]
