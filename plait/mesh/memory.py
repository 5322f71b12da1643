"""The in-memory mesh: one process, nothing on disk; for tests and in-session graphs.

Every operation runs to completion without awaiting in the middle, so on one event loop
each is atomic without locks. Values are kept encoded, so a caller mutating what it
wrote or read never changes the stored value.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.errors import DeliveryLost, VersionConflict
from plait.mesh._base import (
    DEFAULT_VISIBILITY_TIMEOUT_MS,
    AckOp,
    CancelOp,
    CheckOp,
    DeleteOp,
    Delivery,
    Entry,
    Event,
    HoldOp,
    InsertOp,
    Mesh,
    Op,
    PublishOp,
    PutOp,
    StartFrom,
    Subscription,
    TakeOp,
    TransactionResult,
    _check_version,
    check_prefix,
    now_ms,
    scan_bounds,
)
from plait.mesh._codec import (
    DEFAULT_MAX_VALUE_BYTES,
    OnCorrupt,
    check_key,
    decode,
    decode_scanned,
    encode,
    prefix_end,
    topic_names,
)
from plait.mesh._memory_live import MemoryLive

_SCAN_PAGE = 256


@dataclass(slots=True)
class _Pending:
    consumer: str
    delivered_ms: int
    attempt: int


@dataclass(slots=True)
class _Group:
    cursor: int
    pending: dict[int, _Pending] = field(default_factory=dict)


@dataclass(slots=True)
class _Topic:
    log: list[tuple[str, str, bytes, int, bool]] = field(default_factory=list)
    groups: dict[str, _Group] = field(default_factory=dict)


class MemoryMesh(Mesh):
    """A mesh held in this process's memory (URL ``memory://``)."""

    # The class defaults hold: it is shared with no other process.

    @property
    def location(self) -> str:
        """In this process's memory."""
        return "this process's memory"

    def __init__(self, *, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> None:
        self.url = "memory://"
        self.max_value_bytes = max_value_bytes
        self._data: dict[str, tuple[bytes, int, bool]] = {}  # value, version, tainted
        self._keys: list[str] = []
        self._topics: dict[str, _Topic] = {}
        self._scheduled: dict[str, tuple[int, PublishOp]] = {}
        self._due: list[tuple[int, int, str]] = []
        self._seq = 0
        self._changed: asyncio.Event | None = None  # made only while someone waits
        self._subs: set[_MemorySubscription] = set()
        self._live = MemoryLive()

    @property
    def live(self) -> MemoryLive:
        """The mesh's live channels, in this process."""
        return self._live

    async def close(self) -> None:
        for sub in list(self._subs):
            await sub.close()

    # keys ---------------------------------------------------------------------------

    async def get(self, key: str) -> Entry | None:
        check_key(key)
        found = self._data.get(key)
        return None if found is None else Entry(key, decode(found[0], key), found[1], found[2])

    async def put(
        self, key: str, value: Any, if_version: int | None = None, *, tainted: bool = False
    ) -> Entry:
        # The hot path of every CAS: no transaction object, no re-decoding.
        check_key(key)
        _check_version(if_version)
        data = encode(key, value, self.max_value_bytes)
        found = self._data.get(key)
        current = found[1] if found is not None else 0
        if if_version is not None and if_version != current:
            raise VersionConflict(key, if_version, current)
        if found is None:
            bisect.insort(self._keys, key)
        self._data[key] = (data, current + 1, tainted)
        if self._changed is not None:
            self._notify()
        return Entry(key, value, current + 1, tainted)

    async def delete(self, key: str, if_version: int | None = None) -> bool:
        tx = self.transact()
        tx.delete(key, if_version)
        existed = key in self._data
        await tx.commit()
        return existed

    async def delete_prefix(self, prefix: str) -> int:
        check_prefix(prefix)
        start = bisect.bisect_left(self._keys, prefix)
        high = prefix_end(prefix)
        end = len(self._keys) if high is None else bisect.bisect_left(self._keys, high)
        for key in self._keys[start:end]:
            del self._data[key]
        del self._keys[start:end]
        return end - start

    async def scan(
        self,
        prefix: str = "",
        *,
        on_corrupt: OnCorrupt | None = None,
        reverse: bool = False,
        limit: int | None = None,
        after: str | None = None,
    ) -> AsyncIterator[Entry]:
        low, high, low_in, high_in = scan_bounds(prefix, reverse, limit, after)
        left = limit
        while left is None or left > 0:
            page_size = _SCAN_PAGE if left is None else min(left, _SCAN_PAGE)
            keys = self._keys  # read anew each page: writes between pages are seen
            start = (
                0
                if low is None
                else (bisect.bisect_left if low_in else bisect.bisect_right)(keys, low)
            )
            end = (
                len(keys)
                if high is None
                else (bisect.bisect_right if high_in else bisect.bisect_left)(keys, high)
            )
            if reverse:
                page = keys[max(start, end - page_size) : end][::-1]
            else:
                page = keys[start : min(end, start + page_size)]
            for key in page:
                found = self._data.get(key)
                if found is not None:
                    value = decode_scanned(found[0], key, on_corrupt)
                    if value is not None:
                        yield Entry(key, value[0], found[1], found[2])
            if left is not None:
                left -= len(page)
            if len(page) < page_size:
                return
            if reverse:
                high, high_in = page[-1], False
            else:
                low, low_in = page[-1], False

    # transactions -------------------------------------------------------------------

    async def _commit(self, ops: Sequence[Op]) -> TransactionResult:
        # Check every expectation first, against the state as the batch would see it.
        shadow: dict[str, int] = {}
        for op in ops:
            if isinstance(op, HoldOp):
                if self._held(op.delivery) is None:
                    raise DeliveryLost(op.delivery.topic, op.delivery.id, op.delivery.consumer)
                continue
            if isinstance(op, PutOp | DeleteOp | CheckOp | InsertOp):
                current = shadow.get(op.key)
                if current is None:
                    found = self._data.get(op.key)
                    current = found[1] if found else 0
                if isinstance(op, InsertOp):
                    shadow[op.key] = current or 1
                    continue
                if isinstance(op, CheckOp):
                    if op.version != current:
                        raise VersionConflict(op.key, op.version, current)
                    continue
                if op.if_version is not None and op.if_version != current:
                    raise VersionConflict(op.key, op.if_version, current)
                shadow[op.key] = current + 1 if isinstance(op, PutOp) else 0
        entries: dict[str, Entry] = {}
        event_ids: list[str] = []
        for op in ops:
            if isinstance(op, PutOp):
                found = self._data.get(op.key)
                version = (found[1] if found else 0) + 1
                if found is None:
                    bisect.insort(self._keys, op.key)
                self._data[op.key] = (op.data, version, op.tainted)
                entries[op.key] = Entry(op.key, op.value, version, op.tainted)
            elif isinstance(op, InsertOp):
                if op.key not in self._data:
                    bisect.insort(self._keys, op.key)
                    self._data[op.key] = (op.data, 1, op.tainted)
                    entries[op.key] = Entry(op.key, op.value, 1, op.tainted)
            elif isinstance(op, DeleteOp):
                if self._data.pop(op.key, None) is not None:
                    del self._keys[bisect.bisect_left(self._keys, op.key)]
            elif isinstance(op, PublishOp):
                event_ids.append(op.event_id)
                if op.after_ms == 0 and op.key is None:
                    self._append(op)
                else:
                    self._schedule(op)
            elif isinstance(op, CancelOp):
                self._scheduled.pop(op.key, None)
            elif isinstance(op, AckOp):
                self._ack_now(op.delivery)
        taken = [
            d for op in ops if isinstance(op, TakeOp) and (d := self._take_new(op)) is not None
        ]
        self._notify()
        return TransactionResult(entries, event_ids, taken)

    def _take_new(self, op: TakeOp) -> Delivery | None:
        topic = self._topics.get(op.topic)
        state = topic.groups.get(op.group) if topic is not None else None
        if topic is None or state is None or state.cursor >= len(topic.log):
            return None
        position = state.cursor
        state.cursor += 1
        pending = state.pending[position] = _Pending(op.consumer, now_ms(), 1)
        return self._delivery(op.topic, topic, op.group, position, pending)

    # topics -------------------------------------------------------------------------

    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            topic = self._topics[name] = _Topic()
        return topic

    def _append(self, op: PublishOp) -> None:
        self._topic(op.topic).log.append((op.event_id, op.kind, op.data, op.at_ms, op.tainted))

    def _schedule(self, op: PublishOp) -> None:
        # at_ms is truncated to the millisecond; one more keeps delivery from being early.
        due = op.at_ms + op.after_ms + (1 if op.after_ms else 0)
        skey = op.key if op.key is not None else f"\x00{op.event_id}"
        self._scheduled[skey] = (due, op)
        self._seq += 1
        heapq.heappush(self._due, (due, self._seq, skey))

    def _promote_due(self) -> int | None:
        """Move due scheduled events into their topics; return the next due time."""
        now = now_ms()
        while self._due:
            due, _, skey = self._due[0]
            current = self._scheduled.get(skey)
            if current is None or current[0] != due:
                heapq.heappop(self._due)  # cancelled or replaced
                continue
            if due > now:
                return due
            heapq.heappop(self._due)
            del self._scheduled[skey]
            self._append(current[1])
        return None

    def _held(self, delivery: Delivery) -> _Pending | None:
        """The pending entry of ``delivery`` while its consumer still holds it."""
        topic = self._topics.get(delivery.topic)
        group = topic.groups.get(delivery.group) if topic else None
        pending = group.pending.get(delivery.position) if group else None
        return pending if pending is not None and pending.consumer == delivery.consumer else None

    def _ack_now(self, delivery: Delivery) -> None:
        if self._held(delivery) is not None:
            del self._topics[delivery.topic].groups[delivery.group].pending[delivery.position]

    async def topics(self, prefix: str = "") -> list[str]:
        self._promote_due()
        return sorted(name for name in self._topics if name.startswith(prefix))

    async def delete_topic(self, topic: str) -> None:
        check_key(topic, "topic")
        self._topics.pop(topic, None)

    async def backlog(self, topic: str, group: str) -> int:
        check_key(topic, "topic")
        self._promote_due()
        found = self._topics.get(topic)
        if found is None:
            return 0
        state = found.groups.get(group)
        if state is None:
            return len(found.log)
        return len(found.log) - state.cursor + len(state.pending)

    async def drop_group(self, topics: str | Sequence[str], group: str) -> None:
        for name in topic_names(topics):
            topic = self._topics.get(name)
            if topic is not None:
                topic.groups.pop(group, None)

    async def extend(self, delivery: Delivery) -> None:
        pending = self._held(delivery)
        if pending is not None:
            pending.delivered_ms = now_ms()

    async def _ack(self, delivery: Delivery) -> None:
        self._ack_now(delivery)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _waiter(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def subscribe(
        self,
        topics: str | Sequence[str],
        group: str,
        consumer: str,
        *,
        start: StartFrom = "new",
        visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS,
    ) -> Subscription:
        names = topic_names(topics)
        for name in names:
            topic = self._topic(name)
            if group not in topic.groups:
                topic.groups[group] = _Group(cursor=0 if start == "begin" else len(topic.log))
        sub = _MemorySubscription(self, names, group, consumer, visibility_timeout_ms)
        self._subs.add(sub)
        return sub

    def _next_for(
        self, names: list[str], group: str, consumer: str, visibility_ms: int
    ) -> Delivery | None:
        now = now_ms()
        for name in names:
            topic = self._topic(name)
            # A group gone with its deleted topic starts over on the topic made anew.
            state = topic.groups.setdefault(group, _Group(cursor=0))
            for position, pending in state.pending.items():
                if now - pending.delivered_ms >= visibility_ms:
                    pending.consumer, pending.delivered_ms = consumer, now
                    pending.attempt += 1
                    return self._delivery(name, topic, group, position, pending)
            if state.cursor < len(topic.log):
                position = state.cursor
                state.cursor += 1
                pending = state.pending[position] = _Pending(consumer, now, 1)
                return self._delivery(name, topic, group, position, pending)
        return None

    def _delivery(
        self, name: str, topic: _Topic, group: str, position: int, pending: _Pending
    ) -> Delivery:
        event_id, kind, data, at_ms, tainted = topic.log[position]
        event = Event(event_id, name, kind, decode(data), at_ms, tainted)
        return Delivery(event, group, pending.consumer, pending.attempt, position, self._ack)

    def _earliest_redelivery(self, names: list[str], group: str, visibility_ms: int) -> int | None:
        times = [
            pending.delivered_ms + visibility_ms
            for name in names
            if (topic := self._topics.get(name)) is not None and group in topic.groups
            for pending in topic.groups[group].pending.values()
        ]
        return min(times) if times else None


class _MemorySubscription(Subscription):
    def __init__(
        self, mesh: MemoryMesh, names: list[str], group: str, consumer: str, visibility_ms: int
    ) -> None:
        self._mesh = mesh
        self._names = names
        self._group = group
        self._consumer = consumer
        self._visibility_ms = visibility_ms
        self._closed = asyncio.Event()

    async def __anext__(self) -> Delivery:
        mesh = self._mesh
        while not self._closed.is_set():
            next_due = mesh._promote_due()
            delivery = mesh._next_for(self._names, self._group, self._consumer, self._visibility_ms)
            if delivery is not None:
                return delivery
            wake_at = [
                t
                for t in (
                    next_due,
                    mesh._earliest_redelivery(self._names, self._group, self._visibility_ms),
                )
                if t is not None
            ]
            timeout = max(0.0, (min(wake_at) - now_ms()) / 1000) if wake_at else None
            changed = asyncio.ensure_future(mesh._waiter().wait())
            closed = asyncio.ensure_future(self._closed.wait())
            try:
                await asyncio.wait(
                    {changed, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                changed.cancel()
                closed.cancel()
        raise StopAsyncIteration

    async def close(self) -> None:
        self._closed.set()
        self._mesh._subs.discard(self)


__all__ = ["MemoryMesh"]
