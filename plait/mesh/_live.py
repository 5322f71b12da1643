"""Live channels: small, bounded, ephemeral streams a watcher follows by offset.

A live channel is not a topic. Topics are durable and delivered at least once to
consumer groups; a live channel keeps only its last ``keep_bytes`` of items, has no
groups and no acks, and may lose what it held when its backend does (a memory mesh's
process ends). Writers append; any number of watchers read from an offset and wait for
more. It carries what a person watches as it happens (a model's tokens), never what a
run needs to go on.

Offsets. Every item appended to a channel gets the next offset, from 1, in append
order; offsets are never reused while the channel lives. :meth:`LiveChannels.read`
returns the items after an offset and the window the channel still keeps
(``first``..``last``), so a reader that comes back with an offset older than ``first``
knows what it missed. Dropping a channel forgets it; a later append starts at 1.

Watching. A :class:`LiveWatch` (``async with live.watch(channel)``) marks the channel
watched for as long as it is open, and wakes when the channel grows, without polling:
the memory mesh wakes it in-process, SQLite by a datagram to a socket of the watcher's
process, Redis by a pub/sub message, PostgreSQL by a ``NOTIFY``. Writers ask
:meth:`LiveChannels.watched` (cheap, no round trip) and append only while someone
watches, so an unwatched channel costs nothing.

Many watchers, one read. The watches one mesh object holds of a channel share a
:class:`_Tail`: on a growth one read fetches the new items (one round trip, each item
decoded once) and every watch takes them from there, so a hundred server-sent-event
connections to one run cost one read per growth, not a hundred. A watch behind what
the tail holds (one that came late, or back with an old offset) reads for itself.
The items' data is shared between those watches: read it, never change it.

Errors. A backend that cannot be reached raises :class:`~plait.errors.MeshUnavailable`,
as every mesh call does; items must be msgpack-encodable.
"""

from __future__ import annotations

import abc
import asyncio
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

DEFAULT_KEEP_BYTES = 256 * 1024
"""What a live channel keeps by default: its last 256 KiB of encoded items."""

READ_LIMIT = 1024
"""The most items one :meth:`LiveChannels.read` returns."""

TAIL_KEPT = READ_LIMIT
"""How many of a channel's newest items its watches in one process share at least."""


@dataclass(frozen=True, slots=True)
class LiveItem:
    """One item of a live channel: its offset and its data."""

    offset: int
    data: Any


@dataclass(frozen=True, slots=True)
class LiveSlice:
    """What a read found.

    Attributes:
        items: the items after the offset read from, oldest first (at most a limit).
        first: the oldest offset the channel still keeps (``last + 1`` when it keeps none).
        last: the newest offset appended (0: nothing yet).
    """

    items: list[LiveItem]
    first: int
    last: int


class _Tail:
    """The newest items of one channel as this process's watches of it read them: one
    read per growth, shared (see the module docstring).

    It holds the items after offset ``base``, contiguous, and the channel's window as
    last read; ``grown`` counts the wake-ups and ``fresh`` is the count the last read
    began after, so a read is due when one came since, or when the last read stopped
    at its limit before the channel's end.
    """

    __slots__ = (
        "__weakref__",
        "base",
        "channel",
        "first",
        "fresh",
        "grown",
        "items",
        "last",
        "live",
        "reading",
    )

    def __init__(self, live: LiveChannels, channel: str) -> None:
        self.live = live
        self.channel = channel
        self.items: list[LiveItem] = []
        self.base = -1  # nothing read yet
        self.first, self.last = 1, 0
        self.grown = 0
        self.fresh = -1
        self.reading: asyncio.Future[None] | None = None

    @property
    def top(self) -> int:
        """The newest offset held (``base`` when none)."""
        return self.items[-1].offset if self.items else self.base

    async def slice(self, after: int) -> LiveSlice:
        """The items after ``after``: from what the watches share, read again first
        when the channel grew since; a watch behind what they share reads for itself."""
        wanted = self.grown
        while self.fresh < wanted or self.top < self.last:
            if self.reading is None:
                self.reading = asyncio.ensure_future(self._read(after))
                # a read whose waiters were all cancelled leaves its failure to no one
                self.reading.add_done_callback(lambda f: f.cancelled() or f.exception())
            await asyncio.shield(self.reading)
        if self.base < 0 or after < self.base:
            return await self.live.read(self.channel, after)
        start = after - self.base
        return LiveSlice(self.items[start : start + READ_LIMIT], self.first, self.last)

    def offer(self, items: list[LiveItem]) -> bool:
        """Take items a backend pushed with its wake-up (the newest of the channel),
        sparing the watches a read; False when they do not follow what is held (a
        read is then due: the caller wakes the watches with :meth:`LiveWatch.notify`)."""
        current = self.base >= 0 and self.reading is None
        if not current or self.fresh < self.grown or self.top < self.last:
            return False
        new = [item for item in items if item.offset > self.top]
        if new and new[0].offset != self.top + 1:
            return False
        self.items += new
        self._trim()
        self.last = max(self.last, self.top)
        return True

    def _trim(self) -> None:
        if len(self.items) > 2 * TAIL_KEPT:
            del self.items[:-TAIL_KEPT]
            self.base = self.items[0].offset - 1

    async def _read(self, after: int) -> None:
        """One read of what came after the newest item held (the first: after ``after``)."""
        began = self.grown
        try:
            held = self.top
            found = await self.live.read(self.channel, after if held < 0 else held)
            items = found.items
            if held < 0 or found.last < held or (items and items[0].offset > held + 1):
                # the first read, a channel begun again, or one that dropped what came
                # after what this holds: hold what this read found, from its start
                self.items = list(items)
                self.base = (items[0].offset if items else found.last + 1) - 1
            else:
                self.items += items
            self._trim()
            self.first, self.last = found.first, found.last
            self.fresh = began
        finally:
            self.reading = None


class LiveWatch(abc.ABC):
    """One watcher of one channel: marks it watched while open, wakes when it grows.

    Use as ``async with live.watch(channel) as watch:`` and call :meth:`next`.
    """

    def __init__(self, live: LiveChannels, channel: str) -> None:
        self.live = live
        self.channel = channel
        self._grew = asyncio.Event()
        self._tail = live._tail_of(channel)
        self._read_once = False

    def notify(self) -> None:
        """Wake :meth:`next` (the backend calls this when the channel grew)."""
        self._tail.grown += 1
        self._grew.set()

    def wake(self) -> None:
        """Wake :meth:`next` for items the watches' tail took already (see
        :meth:`_Tail.offer`): no read is due."""
        self._grew.set()

    async def next(self, after: int, wait_s: float) -> LiveSlice:
        """The items after ``after``, waiting up to ``wait_s`` seconds for one.

        Returns an empty slice when nothing came in time.
        """
        deadline = asyncio.get_running_loop().time() + wait_s
        if not self._read_once:
            self._read_once = True
            self._tail.grown += 1  # a growth before this watch opened woke no one
        while True:
            self._grew.clear()  # before the read: a growth during it wakes the wait
            found = await self._tail.slice(after)
            remaining = deadline - asyncio.get_running_loop().time()
            if found.items or found.last < after or remaining <= 0:
                return found
            try:
                async with asyncio.timeout(remaining):
                    await self._grew.wait()
            except TimeoutError:
                self._tail.grown += 1  # read afresh: a wake-up may have been lost
                return await self._tail.slice(after)

    @abc.abstractmethod
    async def open(self) -> None:
        """Start watching: the channel counts as watched from now on."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop watching; closing twice does nothing."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class LiveChannels(abc.ABC):
    """A mesh's live channels (``mesh.live``); see the module docstring."""

    _on_watched: list[weakref.WeakMethod[Callable[[str], None]]] | None = None
    _tails: weakref.WeakValueDictionary[str, _Tail] | None = None

    def _tail_of(self, channel: str) -> _Tail:
        """The tail this process's watches of ``channel`` share (it goes with them)."""
        if self._tails is None:
            self._tails = weakref.WeakValueDictionary()
        tail = self._tails.get(channel)
        if tail is None:
            tail = self._tails[channel] = _Tail(self, channel)
        return tail

    def on_watched(self, callback: Callable[[str], None]) -> None:
        """Call the bound method ``callback`` with a channel's name when this process
        learns the channel became watched (a writer holding items for it appends them
        then); held weakly, so it goes with its object. A backend that learns it only
        when asked (:meth:`watched`) never calls it."""
        if self._on_watched is None:
            self._on_watched = []
        self._on_watched = [ref for ref in self._on_watched if ref() is not None]
        self._on_watched.append(weakref.WeakMethod(callback))

    def _now_watched(self, channel: str) -> None:
        """Tell the :meth:`on_watched` callbacks (backends call this)."""
        for ref in list(self._on_watched or ()):
            callback = ref()
            if callback is not None:
                callback(channel)

    @abc.abstractmethod
    def watched(self, channel: str) -> bool:
        """Whether a watcher (of any process) has ``channel`` open; answered from what
        this process knows, without a round trip (a watcher that opened a moment ago
        may not count yet)."""

    @abc.abstractmethod
    async def append(self, channel: str, items: Sequence[Any], *, keep_bytes: int) -> int:
        """Append ``items`` in order, keep the channel's last ``keep_bytes`` of encoded
        items (always its newest item), wake its watchers; the offset of the last item.

        Raises:
            ValueNotEncodable: an item cannot be encoded (nothing is appended).
        """

    @abc.abstractmethod
    async def read(self, channel: str, after: int = 0, *, limit: int = READ_LIMIT) -> LiveSlice:
        """The items after offset ``after`` that the channel still keeps, at most
        ``limit``, and its window (an unknown channel: empty, ``first`` 1, ``last`` 0)."""

    @abc.abstractmethod
    def watch(self, channel: str) -> LiveWatch:
        """A watcher of ``channel`` (open it with ``async with``)."""

    @abc.abstractmethod
    async def drop(self, channel: str) -> None:
        """Forget ``channel`` and what it keeps."""


__all__ = [
    "DEFAULT_KEEP_BYTES",
    "READ_LIMIT",
    "LiveChannels",
    "LiveItem",
    "LiveSlice",
    "LiveWatch",
]
