"""Live channels of the PostgreSQL mesh: bounded tables, watchers woken by NOTIFY.

Tables (schema version 2, see :mod:`plait.mesh._pg_schema`):

- ``live_heads``     per channel: ``first``, ``last`` (the window) and ``bytes`` kept
- ``live_items``     ``(channel, off)`` and the encoded item
- ``live_watchers``  per channel: how many watchers have it open

An append is one call of the ``live_append`` function (one round trip, one
transaction, committed without waiting for the WAL flush: a live channel may lose what
it held when its backend does): it numbers the items, drops the oldest past the byte
budget and sends ``NOTIFY plait_live_<schema>, '<last> <channel>'``. A watcher opening
or closing changes the channel's count and sends ``NOTIFY plait_livectl_<schema>,
'<count> <channel>'``, so writers know whether to append without asking. The mesh's
one listening connection (the one its subscriptions are woken by) listens to both, and
reads the counts each time it connects.

A process that dies with a watch open leaves its count up: writers then append to a
channel nobody reads (bounded, so it costs its last bytes); ``drop`` forgets the items.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from plait.errors import MeshError
from plait.mesh._codec import check_key, decode, encode
from plait.mesh._live import READ_LIMIT, LiveChannels, LiveItem, LiveSlice, LiveWatch

T = TypeVar("T")

_APPEND = "SELECT live_append(%s, %s, %s, %s)"
_READ = (
    "SELECT h.first, h.last, i.off, i.data FROM live_heads h LEFT JOIN LATERAL "
    "(SELECT off, data FROM live_items WHERE channel = h.channel AND off > %s "
    "ORDER BY off LIMIT %s) i ON true WHERE h.channel = %s ORDER BY i.off"
)
_COUNT = (
    "WITH c AS (INSERT INTO live_watchers (channel, n) VALUES (%(ch)s, greatest(%(d)s, 0)) "
    "ON CONFLICT (channel) DO UPDATE SET n = greatest(live_watchers.n + %(d)s, 0) "
    "RETURNING n) SELECT pg_notify(%(ctl)s, n || ' ' || %(ch)s), n FROM c"
)
_DROP = (
    "WITH items AS (DELETE FROM live_items WHERE channel = %s) "
    "DELETE FROM live_heads WHERE channel = %s"
)


class PgLink(Protocol):
    """What the live channels use of their :class:`~plait.mesh.postgres.PostgresMesh`."""

    schema: str

    async def _read(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...

    async def _move(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...

    async def _await_listener(self) -> None: ...


class PgLive(LiveChannels):
    """The live channels of one :class:`~plait.mesh.postgres.PostgresMesh`."""

    def __init__(self, mesh: PgLink) -> None:
        self.mesh = mesh
        self.notify_channel = f"plait_live_{mesh.schema}"
        """The NOTIFY channel of appends."""
        self.control_channel = f"plait_livectl_{mesh.schema}"
        """The NOTIFY channel of watcher counts."""
        self._counts: dict[str, int] = {}
        self._watches: dict[str, set[LiveWatch]] = {}
        self._starting: asyncio.Task[None] | None = None

    # what the mesh's listener tells ------------------------------------------------------

    def connected(self, counts: list[tuple[str, int]]) -> None:
        """The listener (re)connected and read the watcher ``counts``: wake every watch
        (what was appended while it was away is read again)."""
        before = self._counts
        self._counts = {channel: int(n) for channel, n in counts}
        for channel, n in self._counts.items():
            if n > 0 and before.get(channel, 0) <= 0:
                self._now_watched(channel)
        self.wake_all()

    def notified(self, channel_name: str, payload: str) -> bool:
        """Handle a notification if it is a live one (False: it is not)."""
        if channel_name == self.notify_channel:
            _, _, channel = payload.partition(" ")
            for watch in self._watches.get(channel, ()):
                watch.notify()
            return True
        if channel_name == self.control_channel:
            count, _, channel = payload.partition(" ")
            before = self._counts.get(channel, 0)
            self._counts[channel] = int(count)
            if before <= 0 < int(count):
                self._now_watched(channel)
            return True
        return False

    def wake_all(self) -> None:
        """Wake every watch of this process (the listener was lost, or is back)."""
        for watches in self._watches.values():
            for watch in watches:
                watch.notify()

    # the contract -------------------------------------------------------------------------

    def watched(self, channel: str) -> bool:
        if self._starting is None:
            # The listener (started on first use) reads the counts and follows them.
            self._starting = asyncio.get_running_loop().create_task(self.mesh._await_listener())
            self._starting.add_done_callback(lambda t: t.cancelled() or t.exception())
        return bool(self._watches.get(channel)) or self._counts.get(channel, 0) > 0

    async def append(self, channel: str, items: Sequence[Any], *, keep_bytes: int) -> int:
        check_key(channel, "channel")
        encoded = [encode(channel, item) for item in items]
        args = (channel, encoded, keep_bytes, self.notify_channel)
        last: int = await self.mesh._move(_one, _APPEND, args)
        return last

    async def read(self, channel: str, after: int = 0, *, limit: int = READ_LIMIT) -> LiveSlice:
        check_key(channel, "channel")
        rows = await self.mesh._read(_rows, _READ, (after, max(limit, 0), channel))
        if not rows:
            return LiveSlice([], 1, 0)
        first, last = int(rows[0][0]), int(rows[0][1])
        items = [LiveItem(int(off), decode(data, channel)) for _, _, off, data in rows if off]
        return LiveSlice(items, first, last)

    def watch(self, channel: str) -> LiveWatch:
        check_key(channel, "channel")
        return _PgWatch(self, channel)

    async def drop(self, channel: str) -> None:
        check_key(channel, "channel")
        await self.mesh._move(_exec, _DROP, (channel, channel))

    async def _count(self, channel: str, delta: int) -> None:
        args = {"ch": channel, "d": delta, "ctl": self.control_channel}
        await self.mesh._move(_exec, _COUNT, args)


async def _one(conn: Any, query: str, args: Any) -> Any:
    cur = await conn.execute(query, args)
    row = await cur.fetchone()
    return row[0]


async def _rows(conn: Any, query: str, args: Any) -> list[tuple[Any, ...]]:
    cur = await conn.execute(query, args)
    rows: list[tuple[Any, ...]] = await cur.fetchall()
    return rows


async def _exec(conn: Any, query: str, args: Any) -> None:
    await conn.execute(query, args)


class _PgWatch(LiveWatch):
    live: PgLive

    def __init__(self, live: PgLive, channel: str) -> None:
        super().__init__(live, channel)
        self._open = False

    async def open(self) -> None:
        live = self.live
        await live.mesh._await_listener()  # appends from now on wake this watch
        live._watches.setdefault(self.channel, set()).add(self)
        self._open = True
        await live._count(self.channel, 1)

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        live = self.live
        watches = live._watches.get(self.channel, set())
        watches.discard(self)
        if not watches:
            live._watches.pop(self.channel, None)
        with contextlib.suppress(MeshError):
            await live._count(self.channel, -1)


__all__ = ["PgLive"]
