"""Live channels of the memory mesh: deques in this process, watchers woken directly."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import islice
from typing import Any

from plait.mesh._codec import check_key, decode, encode
from plait.mesh._live import READ_LIMIT, LiveChannels, LiveItem, LiveSlice, LiveWatch


class _Channel:
    __slots__ = ("bytes", "items", "last")

    def __init__(self) -> None:
        self.items: deque[tuple[int, bytes]] = deque()
        self.bytes = 0
        self.last = 0


class MemoryLive(LiveChannels):
    """The live channels of one :class:`~plait.mesh.memory.MemoryMesh`."""

    def __init__(self) -> None:
        self._channels: dict[str, _Channel] = {}
        self._watches: dict[str, set[LiveWatch]] = {}

    def watched(self, channel: str) -> bool:
        return bool(self._watches.get(channel))

    async def append(self, channel: str, items: Sequence[Any], *, keep_bytes: int) -> int:
        check_key(channel, "channel")
        encoded = [encode(channel, item) for item in items]
        found = self._channels.setdefault(channel, _Channel())
        for data in encoded:
            found.last += 1
            found.items.append((found.last, data))
            found.bytes += len(data)
        while found.bytes > keep_bytes and len(found.items) > 1:
            found.bytes -= len(found.items.popleft()[1])
        for watch in self._watches.get(channel, ()):
            watch.notify()
        return found.last

    async def read(self, channel: str, after: int = 0, *, limit: int = READ_LIMIT) -> LiveSlice:
        check_key(channel, "channel")
        found = self._channels.get(channel)
        if found is None:
            return LiveSlice([], 1, 0)
        first = found.items[0][0] if found.items else found.last + 1
        start = max(after + 1, first) - first
        items = [
            LiveItem(offset, decode(data, channel))
            for offset, data in islice(found.items, start, start + limit)
        ]
        return LiveSlice(items, first, found.last)

    def watch(self, channel: str) -> LiveWatch:
        check_key(channel, "channel")
        return _MemoryWatch(self, channel)

    async def drop(self, channel: str) -> None:
        self._channels.pop(channel, None)


class _MemoryWatch(LiveWatch):
    live: MemoryLive

    async def open(self) -> None:
        watches = self.live._watches.setdefault(self.channel, set())
        watches.add(self)
        if len(watches) == 1:
            self.live._now_watched(self.channel)

    async def close(self) -> None:
        watches = self.live._watches.get(self.channel)
        if watches is not None:
            watches.discard(self)
            if not watches:
                del self.live._watches[self.channel]


__all__ = ["MemoryLive"]
