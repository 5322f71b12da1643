"""Topic delivery on Redis: one consumer's subscription, polling and blocking in turn.

See :class:`RedisSubscription`; the poll script is :data:`plait.mesh._redis_scripts.POLL`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from contextlib import suppress
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError, ResponseError

from plait.errors import MeshError
from plait.mesh._base import TRIM_INTERVAL_S, Delivery, StartFrom, Subscription
from plait.mesh._redis_io import Bounded

BATCH = 16
"""Entries one poll takes at most; they wait in the subscription, their visibility
timeout running, so the batch stays small."""

BLOCK_MS = 100  # longest blocking read: bounds how late a scheduled event can be


class SubscriberLink(Protocol):
    """What a subscription needs of its mesh (:class:`plait.mesh.redis.RedisMesh`)."""

    timeout: float
    _sched: str
    _schedp: str
    _poll_script: AsyncScript
    _subs: set[RedisSubscription]

    def _stream(self, topic: str) -> str:
        """The stream key of ``topic``."""
        ...

    def _new_client(self) -> aioredis.Redis:
        """A client with a pool of its own."""
        ...

    def _bounded(self, seconds: float | None = None) -> Bounded:
        """One operation, within ``seconds`` (the timeout by default)."""
        ...

    async def _run(
        self,
        script: AsyncScript,
        keys: list[str],
        args: list[Any],
        client: aioredis.Redis | None = None,
    ) -> Any:
        """Call ``script`` as one bounded operation."""
        ...

    def _delivery(
        self,
        topic: str,
        entry_id: bytes,
        attempt: int,
        fields: dict[bytes, bytes],
        group: str,
        consumer: str,
    ) -> Delivery:
        """The delivery of a stream entry."""
        ...

    async def _create_groups(self, streams: list[str], group: str, start: StartFrom) -> None:
        """Create the group on every stream that lacks it."""
        ...

    def _start_group_creation(
        self, streams: list[str], group: str, start: StartFrom
    ) -> asyncio.Task[None] | None:
        """Create the groups now, in a task (None: no loop runs yet)."""
        ...

    async def trim(self, topic: str) -> int:
        """Drop what every group of ``topic`` is done with."""
        ...


class RedisSubscription(Subscription):
    """One consumer's reads: the poll script, and between polls a blocking XREADGROUP.

    A poll promotes due scheduled events, reclaims entries idle past the visibility
    timeout and reads new ones. Once a poll finds less than a batch, the subscription
    waits in XREADGROUP BLOCK until the next poll is due (within BLOCK_MS, sooner if a
    scheduled event falls due). That read waits on the group, not on the stream: an
    entry a commit took for a consumer of the group (:meth:`Transaction.take`, a run
    owner's hand-off of its own next wake) is not new to the group any more, so it
    wakes no reader, and what does wake the read is delivered by the read itself.
    """

    def __init__(
        self,
        mesh: SubscriberLink,
        names: list[str],
        group: str,
        consumer: str,
        start: StartFrom,
        visibility_ms: int,
    ) -> None:
        self._mesh = mesh
        self._names = names
        self._streams = [mesh._stream(name) for name in names]
        self._topics = {mesh._stream(name).encode(): name for name in names}
        self._group = group
        self._consumer = consumer
        self._start = start
        self._visibility_ms = visibility_ms
        self._cursors: list[bytes | str] = ["0-0"] * len(names)
        self._turn = 0
        self._buffer: deque[Delivery] = deque()
        self._poll_at = 0.0  # monotonic time the next poll is due
        self._reading: asyncio.Task[list[Delivery]] | None = None
        self._trimmed_at = time.monotonic()
        self._client: aioredis.Redis | None = None
        self._io = asyncio.Lock()
        self._closing = asyncio.Event()
        self._creating = mesh._start_group_creation(self._streams, group, start)
        self._ready = False

    async def __anext__(self) -> Delivery:
        while not self._closing.is_set():
            async with self._io:
                if self._closing.is_set():
                    break
                delivery = await self._step()
                if delivery is not None:
                    return delivery
        raise StopAsyncIteration

    async def _step(self) -> Delivery | None:
        mesh = self._mesh
        if not self._ready:
            creating, self._creating = self._creating, None
            if creating is not None:
                await asyncio.wait({creating})
            if creating is None or creating.cancelled() or creating.exception() is not None:
                await mesh._create_groups(self._streams, self._group, self._start)
            self._ready = True
        if self._client is None:
            self._client = mesh._new_client()  # its own connection: cancelling a read is safe
        if self._buffer:
            return self._buffer.popleft()
        if time.monotonic() - self._trimmed_at >= TRIM_INTERVAL_S:
            # Now and then, drop what every group of our streams is done with.
            self._trimmed_at = time.monotonic()
            for name in self._names:
                await mesh.trim(name)
        wait_ms = math.ceil((self._poll_at - time.monotonic()) * 1000)
        if self._reading is not None or wait_ms > 0:
            await self._block(wait_ms)
            return self._buffer.popleft() if self._buffer else None
        keys = [mesh._sched, mesh._schedp, *self._streams]
        args = [
            self._group,
            self._consumer,
            self._visibility_ms,
            self._turn,
            BATCH,
            *self._cursors,
        ]
        try:
            reply = await mesh._run(mesh._poll_script, keys, args, self._client)
        except MeshError as exc:
            cause = exc.__cause__
            if isinstance(cause, ResponseError) and str(cause).startswith("NOGROUP"):
                self._ready = False  # the server lost the group (restart, flush): make it again
                return None
            raise
        wait_us, hits, cursors, drained = reply
        self._turn += 1
        self._cursors = list(cursors)
        if drained:
            # Nothing more for now: read new entries as they come until the next poll
            # is due, for the reclaims and the scheduled events only a poll makes.
            wait_ms = BLOCK_MS if wait_us < 0 else min(BLOCK_MS, math.ceil(wait_us / 1000))
            self._poll_at = time.monotonic() + wait_ms / 1000
        self._buffer.extend(
            mesh._delivery(
                self._names[int(i) - 1],
                entry_id,
                int(attempt),
                fields(flat),
                self._group,
                self._consumer,
            )
            for i, entry_id, attempt, flat in hits
        )
        return self._buffer.popleft() if self._buffer else None

    async def _block(self, block_ms: int) -> None:
        """Wait up to ``block_ms`` for the group's new entries (or close()), buffering them."""
        read = self._reading
        if read is None:
            read = self._reading = asyncio.ensure_future(self._read(block_ms))
        # A caller cancelled here leaves the read running, and the next call takes its
        # entries: cancelled, it would have left them pending until their visibility
        # timeout ran out.
        await asyncio.wait({read})
        self._reading = None
        if not read.cancelled():  # cancelled by close()
            self._buffer.extend(read.result())

    async def _read(self, block_ms: int) -> list[Delivery]:
        mesh, client = self._mesh, self._client
        assert client is not None
        streams: dict[Any, Any] = dict.fromkeys(self._streams, ">")
        async with mesh._bounded(block_ms / 1000 + mesh.timeout):
            try:
                reply: Any = await client.xreadgroup(
                    self._group, self._consumer, streams, count=BATCH, block=block_ms
                )
            except ResponseError as exc:
                if not str(exc).startswith(("NOGROUP", "UNBLOCKED")):
                    raise
                self._ready = False  # the stream or group went while we waited: make it again
                return []
        return [
            mesh._delivery(self._topics[stream], entry_id, 1, fields, self._group, self._consumer)
            for stream, entries in (reply.items() if isinstance(reply, dict) else reply or ())
            for entry_id, fields in entries
        ]

    async def close(self) -> None:
        self._closing.set()
        self._mesh._subs.discard(self)
        read = self._reading
        if read is not None:
            # What it read stays pending for the group, as the buffer's entries do.
            read.cancel()
            if read.done() and not read.cancelled():
                read.exception()  # retrieved: a read nobody waits for any more
        async with self._io:
            client, self._client = self._client, None
            if client is not None:
                with suppress(RedisError, OSError):
                    await client.aclose()


def fields(flat: list[bytes]) -> dict[bytes, bytes]:
    """A stream entry's fields from the flat list a script returns."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


__all__ = ["BATCH", "BLOCK_MS", "RedisSubscription", "SubscriberLink", "fields"]
