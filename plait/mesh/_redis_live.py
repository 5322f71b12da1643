"""Live channels of the Redis mesh: a list per channel, watchers woken by pub/sub.

Key layout under the mesh prefix ``P``:

- ``P live:CHANNEL``   list of the encoded items the channel keeps, oldest first
- ``P liveh:CHANNEL``  hash ``{first, last, bytes}``: the window and its size
- ``P livew``          hash channel -> how many watchers have it open
- ``P liven:CHANNEL``  pub/sub channel: an append publishes its last offset
- ``P livectl``        pub/sub channel: a watcher opening or closing publishes the
  channel's new watcher count, so writers know without asking

An append is one script (atomic, one round trip): push, trim to the byte budget,
publish. Both keys expire a day after the last append, so a channel no one drops goes
away by itself. Each mesh object holds one pub/sub connection, opened when it first
watches or is asked whether a channel is watched, and shares it among its watchers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError

from plait.errors import MeshError
from plait.mesh._codec import check_key, decode, encode
from plait.mesh._live import READ_LIMIT, LiveChannels, LiveItem, LiveSlice, LiveWatch

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub

    from plait.mesh._redis_io import RedisLink

    class RedisMesh(RedisLink, Protocol):
        """What the live channels use of their :class:`~plait.mesh.redis.RedisMesh`."""

        prefix: str
        url: str
        _client: Any

        async def _run(self, script: Any, keys: list[str], args: list[Any]) -> Any: ...


log = logging.getLogger("plait.mesh")

TTL_S = 86_400
"""How long a channel's keys outlive its last append."""

PUSH_BYTES = 64 * 1024
"""An append of at most this many encoded bytes publishes its items with its offset,
so a watcher that holds what came before takes them without a read."""

APPEND = """
-- KEYS[1] list, KEYS[2] head, KEYS[3] pub/sub channel; ARGV[1] keep bytes, ARGV[2] ttl,
-- ARGV[3] '1' to publish the items with the offset, ARGV[4..] the encoded items
local head = redis.call('HMGET', KEYS[2], 'last', 'first', 'bytes')
local last, first = tonumber(head[1] or '0'), tonumber(head[2] or '1')
local bytes = tonumber(head[3] or '0')
for i = 4, #ARGV do
  redis.call('RPUSH', KEYS[1], ARGV[i])
  last = last + 1
  bytes = bytes + #ARGV[i]
end
local keep = tonumber(ARGV[1])
while bytes > keep and first < last do
  bytes = bytes - #redis.call('LPOP', KEYS[1])
  first = first + 1
end
redis.call('HSET', KEYS[2], 'last', last, 'first', first, 'bytes', bytes)
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
if ARGV[3] == '1' and #ARGV >= 4 then
  local sizes = {}
  for i = 4, #ARGV do sizes[#sizes + 1] = #ARGV[i] end
  redis.call('PUBLISH', KEYS[3], last .. ' ' .. table.concat(sizes, ',') .. '\\n'
    .. table.concat(ARGV, '', 4))
else
  redis.call('PUBLISH', KEYS[3], last)
end
return last
"""

READ = """
-- KEYS[1] list, KEYS[2] head; ARGV[1] after, ARGV[2] limit
local head = redis.call('HMGET', KEYS[2], 'last', 'first')
if not head[1] then return {1, 0, {}} end
local last, first, limit = tonumber(head[1]), tonumber(head[2]), tonumber(ARGV[2])
local start = math.max(tonumber(ARGV[1]) + 1, first) - first
if limit <= 0 or start > last - first then return {first, last, {}} end
return {first, last, redis.call('LRANGE', KEYS[1], start, start + limit - 1)}
"""

WATCHERS = """
-- KEYS[1] livew, KEYS[2] livectl; ARGV[1] channel, ARGV[2] +1 or -1
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
if n <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]); n = 0 end
redis.call('PUBLISH', KEYS[2], n .. ' ' .. ARGV[1])
return n
"""


class RedisLive(LiveChannels):
    """The live channels of one :class:`~plait.mesh.redis.RedisMesh`."""

    def __init__(self, mesh: RedisMesh) -> None:
        self.mesh = mesh
        prefix = mesh.prefix
        self._list, self._head, self._notify = (
            f"{prefix}live:",
            f"{prefix}liveh:",
            f"{prefix}liven:",
        )
        self._watchers, self._control = f"{prefix}livew", f"{prefix}livectl"
        client = mesh._client
        self._append = client.register_script(APPEND)
        self._read = client.register_script(READ)
        self._count = client.register_script(WATCHERS)
        self._counts: dict[str, int] = {}
        self._watches: dict[str, set[LiveWatch]] = {}
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None

    def watched(self, channel: str) -> bool:
        if self._reader is None and self._starting is None:
            self._starting = self._start_task()
        # This process's own watches count at once: a writer on this mesh object needs
        # no round trip through the server (whose count may lag) to know of them.
        return bool(self._watches.get(channel)) or self._counts.get(channel, 0) > 0

    async def _started(self) -> PubSub:
        if self._reader is None:
            if self._starting is None:
                self._starting = self._start_task()
            await asyncio.shield(self._starting)
        assert self._pubsub is not None
        return self._pubsub

    def _start_task(self) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._start())
        # A start nobody awaits (a writer asking whether a channel is watched) or whose
        # waiter was cancelled leaves its failure to no one: it is read here, so it is
        # not reported as never retrieved; the next call starts again.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    async def _start(self) -> None:
        try:
            pubsub = self.mesh._client.pubsub(ignore_subscribe_messages=True)
            async with self.mesh._bounded():
                await pubsub.subscribe(self._control)
                counts = await self.mesh._client.hgetall(self._watchers)
            self._counts = {_text(k): int(v) for k, v in counts.items()}
            self._pubsub = pubsub
            self._reader = asyncio.get_running_loop().create_task(self._listen(pubsub))
            for channel, count in list(self._counts.items()):
                if count > 0:
                    self._now_watched(channel)
        finally:
            self._starting = None

    async def _listen(self, pubsub: PubSub) -> None:
        control = self._control.encode()
        skip = len(self._notify)
        try:
            async for message in pubsub.listen():
                if message.get("type") != "message":
                    continue
                name: bytes = message["channel"]
                if name == control:
                    count, _, channel = message["data"].decode().partition(" ")
                    before = self._counts.get(channel, 0)
                    self._counts[channel] = int(count)
                    if before <= 0 < int(count):
                        self._now_watched(channel)
                else:
                    self._grew(name.decode()[skip:], message["data"])
        except (RedisError, OSError) as exc:
            log.warning("the live channels of %s stopped listening: %s", self.mesh.url, exc)
        finally:
            self._reader = None
            self._pubsub = None
            for watches in self._watches.values():
                for watch in watches:
                    watch.notify()  # they read again, and wait on a fresh connection

    def _grew(self, channel: str, data: bytes) -> None:
        """Wake this process's watches of ``channel``: with the items the append
        published, taken by their tail, or to read."""
        watches = self._watches.get(channel)
        if not watches:
            return
        tail = None if self._tails is None else self._tails.get(channel)
        items = _pushed(channel, data) if tail is not None else None
        if items is not None and tail is not None and tail.offer(items):
            for watch in watches:
                watch.wake()
            return
        for watch in watches:
            watch.notify()

    async def append(self, channel: str, items: Sequence[Any], *, keep_bytes: int) -> int:
        check_key(channel, "channel")
        encoded = [encode(channel, item) for item in items]
        push = "1" if sum(map(len, encoded)) <= PUSH_BYTES else "0"
        keys = [self._list + channel, self._head + channel, self._notify + channel]
        last = await self.mesh._run(self._append, keys, [keep_bytes, TTL_S, push, *encoded])
        return int(last)

    async def read(self, channel: str, after: int = 0, *, limit: int = READ_LIMIT) -> LiveSlice:
        check_key(channel, "channel")
        keys = [self._list + channel, self._head + channel]
        first, last, rows = await self.mesh._run(self._read, keys, [after, limit])
        first, last = int(first), int(last)
        start = max(after + 1, first)
        items = [LiveItem(start + i, decode(data, channel)) for i, data in enumerate(rows)]
        return LiveSlice(items, first, last)

    def watch(self, channel: str) -> LiveWatch:
        check_key(channel, "channel")
        return _RedisWatch(self, channel)

    async def drop(self, channel: str) -> None:
        check_key(channel, "channel")
        async with self.mesh._bounded():
            await self.mesh._client.delete(self._list + channel, self._head + channel)

    async def close(self) -> None:
        """Close the pub/sub connection."""
        for task in (self._starting, self._reader):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, RedisError, OSError):
                    await task
        if self._pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
            self._pubsub = None


def _pushed(channel: str, data: bytes) -> list[LiveItem] | None:
    """The items an append published (``LAST SIZE,SIZE...\\n`` then the encoded items),
    or None for a bare offset or anything that does not decode."""
    head, newline, body = data.partition(b"\n")
    if not newline:
        return None
    try:
        last_text, _, sizes_text = head.partition(b" ")
        sizes = [int(n) for n in sizes_text.split(b",")]
        first, start, items = int(last_text) - len(sizes) + 1, 0, []
        for index, size in enumerate(sizes):
            items.append(LiveItem(first + index, decode(body[start : start + size], channel)))
            start += size
    except (ValueError, MeshError):
        return None
    return items if start == len(body) else None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class _RedisWatch(LiveWatch):
    live: RedisLive

    def __init__(self, live: RedisLive, channel: str) -> None:
        super().__init__(live, channel)
        self._open = False

    async def open(self) -> None:
        live = self.live
        pubsub = await live._started()
        watches = live._watches.setdefault(self.channel, set())
        if not watches:
            async with live.mesh._bounded():
                await pubsub.subscribe(live._notify + self.channel)
        watches.add(self)
        self._open = True
        keys = [live._watchers, live._control]
        await live.mesh._run(live._count, keys, [self.channel, 1])

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        live = self.live
        watches = live._watches.get(self.channel, set())
        watches.discard(self)
        with contextlib.suppress(MeshError, RedisError, OSError):
            await live.mesh._run(live._count, [live._watchers, live._control], [self.channel, -1])
            if not watches and live._pubsub is not None:
                live._watches.pop(self.channel, None)
                await live._pubsub.unsubscribe(live._notify + self.channel)


__all__ = ["APPEND", "PUSH_BYTES", "READ", "TTL_S", "WATCHERS", "RedisLive"]
