"""Topic delivery on SQLite: claiming events for a consumer, and the subscription loop.

A claim is a write (it moves a group's cursor or hands an expired pending event to a
new consumer), so it runs in the writer's ``BEGIN IMMEDIATE`` transaction: two
processes never take the same event at once. Scheduled events that are due move into
their topics in that same transaction.

An idle subscription asks the reader (not the writer) whether anything is claimable,
and otherwise sleeps until the earliest of: the next scheduled event, the next
visibility expiry, or the poll interval that notices other processes' writes. Writes
made through the same mesh object wake it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from plait.mesh._base import TRIM_INTERVAL_S, Delivery, Event, StartFrom, Subscription, now_ms
from plait.mesh._codec import decode
from plait.mesh._sqlite_ops import create_groups, trim

Claimed = tuple[str, int, int, str, str, bytes, int, int]
"""topic, seq, attempt, event id, kind, data, at_ms, tainted (0 or 1)."""

_HAS_DUE = "SELECT 1 FROM scheduled WHERE due_ms <= ? LIMIT 1"
_PROMOTE = (
    "INSERT INTO events (topic, id, kind, data, at_ms, tainted) "
    "SELECT topic, id, kind, data, at_ms, tainted FROM scheduled WHERE due_ms <= ? "
    "ORDER BY due_ms, rowid"
)
_DROP_DUE = "DELETE FROM scheduled WHERE due_ms <= ?"
_EXPIRED = (
    "SELECT topic, seq, attempt FROM pending WHERE grp = ? AND topic IN ({}) "
    "AND delivered_ms <= ? ORDER BY seq LIMIT ?"
)
_REDELIVER = (
    "UPDATE pending SET consumer = ?, delivered_ms = ?, attempt = ? "
    "WHERE topic = ? AND grp = ? AND seq = ?"
)
_EVENT = "SELECT id, kind, data, at_ms, tainted FROM events WHERE seq = ?"
_DROP_PENDING = "DELETE FROM pending WHERE topic = ? AND grp = ? AND seq = ?"
_NEXT = (
    "SELECT seq, id, kind, data, at_ms, tainted FROM events WHERE topic = ?1 "
    "AND seq > (SELECT cursor FROM consumer_groups WHERE topic = ?1 AND grp = ?2) "
    "ORDER BY seq LIMIT ?3"
)
_ADVANCE = "UPDATE consumer_groups SET cursor = ? WHERE topic = ? AND grp = ?"
_TAKE = (
    "INSERT INTO pending (topic, grp, seq, consumer, delivered_ms, attempt) "
    "VALUES (?, ?, ?, ?, ?, 1)"
)
_NEXT_DUE = "SELECT min(due_ms) FROM scheduled"
# One statement over every topic read (a runtime reads 64 partitions): the group's
# topics with events past its cursor, each an index seek.
_WITH_NEW = (
    "SELECT g.topic FROM consumer_groups g WHERE g.grp = ? AND g.topic IN ({}) "
    "AND EXISTS (SELECT 1 FROM events e WHERE e.topic = g.topic AND e.seq > g.cursor)"
)
_OLDEST_PENDING = "SELECT min(delivered_ms) FROM pending WHERE grp = ? AND topic IN ({})"


def _among(sql: str, topics: Sequence[str]) -> str:
    """``sql`` with its ``IN ({})`` list holding one placeholder per topic."""
    return sql.format(",".join("?" * len(topics)))


CLAIM_BATCH = 16
"""Events one claim takes at most (as a Redis poll does): a runtime serving many runs
takes new ones a batch per write, not one per write. They wait in the subscription,
their visibility timeout running, so the batch stays small."""


def claim(
    conn: sqlite3.Connection,
    topics: Sequence[str],
    group: str,
    consumer: str,
    visibility_ms: int,
    count: int = 1,
) -> tuple[list[Claimed], bool]:
    """Take up to ``count`` events for ``consumer`` (writer); also say whether any became due.

    Expired pending events of the group come first (each goes to this consumer with
    its attempt raised), then the next events after the group's cursor, topic by topic.
    """
    now = now_ms()
    promoted = conn.execute(_HAS_DUE, (now,)).fetchone() is not None
    if promoted:
        conn.execute(_PROMOTE, (now,))
        conn.execute(_DROP_DUE, (now,))
    taken: list[Claimed] = []
    expired = conn.execute(
        _among(_EXPIRED, topics), (group, *topics, now - visibility_ms, count)
    ).fetchall()
    for topic, seq, attempt in expired:
        event = conn.execute(_EVENT, (seq,)).fetchone()
        if event is None:
            conn.execute(_DROP_PENDING, (topic, group, seq))
            continue
        conn.execute(_REDELIVER, (consumer, now, attempt + 1, topic, group, seq))
        taken.append((topic, seq, attempt + 1, *event))
    if len(taken) < count:
        for (topic,) in conn.execute(_among(_WITH_NEW, topics), (group, *topics)).fetchall():
            rows = conn.execute(_NEXT, (topic, group, count - len(taken))).fetchall()
            if rows:
                conn.execute(_ADVANCE, (rows[-1][0], topic, group))
                conn.executemany(_TAKE, [(topic, group, r[0], consumer, now) for r in rows])
                taken.extend((topic, r[0], 1, *r[1:]) for r in rows)
            if len(taken) >= count:
                break
    return taken, promoted


def probe(
    conn: sqlite3.Connection, topics: Sequence[str], group: str, visibility_ms: int
) -> tuple[bool, int | None]:
    """Whether a claim would find something now (reader), else when it next might."""
    now = now_ms()
    wake_at: int | None = conn.execute(_NEXT_DUE).fetchone()[0]
    if wake_at is not None and wake_at <= now:
        return True, None
    if conn.execute(_among(_WITH_NEW, topics) + " LIMIT 1", (group, *topics)).fetchone():
        return True, None
    oldest = conn.execute(_among(_OLDEST_PENDING, topics), (group, *topics)).fetchone()[0]
    if oldest is not None:
        expires = oldest + visibility_ms
        if expires <= now:
            return True, None
        wake_at = expires if wake_at is None else min(wake_at, expires)
    return False, wake_at


class Submit(Protocol):
    """Run ``fn(conn, *args)`` on one of the mesh's connection threads."""

    def __call__(
        self, fn: Callable[..., Any], *args: Any, savepoint: bool = True
    ) -> asyncio.Future[Any]: ...


@dataclass(frozen=True)
class MeshLink:
    """What a subscription needs of its :class:`~plait.mesh.sqlite.SqliteMesh`.

    Attributes:
        write: run a request in the writer's transaction.
        read: run a request on the reader's connection (``savepoint`` is ignored).
        ack: acknowledge a delivery (the :class:`Delivery` callback).
        notify: wake every subscription of the mesh (scheduled events became due).
        forget: the subscription is closed; stop waking it.
    """

    write: Submit
    read: Callable[..., asyncio.Future[Any]]
    ack: Callable[[Delivery], Awaitable[None]]
    notify: Callable[[], None]
    forget: Callable[[SqliteSubscription], None]


class SqliteSubscription(Subscription):
    """One consumer of one group on a :class:`~plait.mesh.sqlite.SqliteMesh`."""

    def __init__(
        self,
        mesh: MeshLink,
        topics: list[str],
        group: str,
        consumer: str,
        start: StartFrom,
        visibility_ms: int,
        poll_s: float,
    ) -> None:
        self._mesh = mesh
        self._topics = topics
        self._group = group
        self._consumer = consumer
        self._start = start
        self._visibility_ms = visibility_ms
        self._poll_s = poll_s
        self._wake = asyncio.Event()
        self._closed = False
        self._stash: deque[Delivery] = deque()
        self._trimmed_at = time.monotonic()
        self._group_created: asyncio.Future[Any] | None = None
        with contextlib.suppress(RuntimeError):  # no running loop: create on first read
            asyncio.get_running_loop()
            # Queued now, ahead of any publish that follows: a "new" group starts here.
            self._create_group()

    def _create_group(self) -> asyncio.Future[Any]:
        future = self._mesh.write(create_groups, self._topics, self._group, self._start)
        future.add_done_callback(_retrieve)
        self._group_created = future
        return future

    @property
    def topics(self) -> list[str]:
        """The topics this subscription reads."""
        return self._topics

    def wake(self) -> None:
        """Re-check at once: something was written through this mesh."""
        self._wake.set()

    async def __anext__(self) -> Delivery:
        created = self._group_created or self._create_group()
        if not created.done():
            await asyncio.shield(created)
        created.result()
        mesh = self._mesh
        self._maybe_trim()
        while not self._closed:
            if self._stash:
                return self._stash.popleft()
            self._wake.clear()
            claimable, wake_at = await mesh.read(
                probe, self._topics, self._group, self._visibility_ms
            )
            if self._closed:
                break
            if claimable:
                delivery = await self._claim()
                if delivery is not None:
                    return delivery
                continue
            timeout = self._poll_s
            if wake_at is not None:
                timeout = min(timeout, max(0.0, (wake_at - now_ms()) / 1000))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
        raise StopAsyncIteration

    def _maybe_trim(self) -> None:
        """Now and then, drop the events of our topics that every group is done with."""
        now = time.monotonic()
        if now - self._trimmed_at < TRIM_INTERVAL_S:
            return
        self._trimmed_at = now
        for topic in self._topics:
            self._mesh.write(trim, topic, savepoint=False).add_done_callback(_retrieve)

    async def _claim(self) -> Delivery | None:
        future = self._mesh.write(
            claim, self._topics, self._group, self._consumer, self._visibility_ms, CLAIM_BATCH
        )
        try:
            claimed, promoted = await asyncio.shield(future)
        except asyncio.CancelledError:
            # The claim commits regardless; keep its event for the next read instead of
            # leaving it to wait out a visibility timeout.
            future.add_done_callback(self._keep)
            raise
        if promoted:
            self._mesh.notify()
        self._stash.extend(self._delivery(c) for c in claimed)
        return self._stash.popleft() if self._stash else None

    def _keep(self, future: asyncio.Future[tuple[list[Claimed], bool]]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._stash.extend(self._delivery(c) for c in future.result()[0])

    def _delivery(self, claimed: Claimed) -> Delivery:
        topic, seq, attempt, event_id, kind, data, at_ms, tainted = claimed
        event = Event(event_id, topic, kind, decode(data), at_ms, bool(tainted))
        return Delivery(event, self._group, self._consumer, attempt, seq, self._mesh.ack)

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._mesh.forget(self)


def _retrieve(future: asyncio.Future[Any]) -> None:
    # Read the outcome so an unread failure is not logged; __anext__ raises it.
    if not future.cancelled():
        future.exception()


__all__ = ["MeshLink", "SqliteSubscription", "Submit", "claim", "probe"]
