"""Topic delivery on PostgreSQL: claims, the subscription loop, and the listener.

A claim is one transaction: due scheduled events of the subscription's topics move
into them, deliveries past their visibility timeout go to this consumer (attempt
raised), then the events after the group's cursor. Rows are taken with ``FOR UPDATE
SKIP LOCKED``, so consumers claiming at once each get different events and none waits
on another.

An idle subscription asks (one read) whether a claim would find anything, and otherwise
sleeps until the earliest of: its next scheduled event, the next visibility expiry of
its group, or one visibility timeout (a delivery claimed after the ask cannot expire
before that). Commits that publish to a topic ``NOTIFY`` the mesh's channel with its
name, and the mesh's one listening connection wakes the subscriptions reading it: no
query runs while nothing happens. While the listener is down, subscriptions ask again
every :data:`FALLBACK_POLL_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from plait.mesh._base import TRIM_INTERVAL_S, Delivery, Event, StartFrom, Subscription
from plait.mesh._codec import decode
from plait.mesh._pg_ops import NOW, Conn, append, create_groups, notify, trim

CLAIM_BATCH = 16
"""Events one claim takes at most; they wait in the subscription, their visibility
timeout running, so the batch stays small."""

FALLBACK_POLL_S = 0.5
"""How often an idle subscription asks while the mesh's listener is reconnecting."""

Claimed = tuple[str, int, int, str, str, bytes, int, bool]
"""topic, seq, attempt, event id, kind, data, at_ms, tainted."""

_DUE = (
    "WITH due AS (SELECT skey FROM scheduled WHERE topic = ANY(%s) AND due_ms <= "
    f"{NOW} ORDER BY due_ms, skey LIMIT 64 FOR UPDATE SKIP LOCKED) "
    "DELETE FROM scheduled s USING due WHERE s.skey = due.skey "
    "RETURNING s.due_ms, s.skey, s.topic, s.id, s.kind, s.data, s.at_ms, s.tainted"
)
_EXPIRED = (
    "WITH x AS (SELECT topic, grp, seq FROM pending WHERE grp = %(g)s AND topic = ANY(%(t)s) "
    f"AND delivered_ms <= {NOW} - %(vis)s ORDER BY delivered_ms LIMIT %(n)s "
    "FOR UPDATE SKIP LOCKED) "
    f"UPDATE pending p SET consumer = %(c)s, delivered_ms = {NOW}, attempt = p.attempt + 1 "
    "FROM x WHERE p.topic = x.topic AND p.grp = x.grp AND p.seq = x.seq "
    "RETURNING p.topic, p.seq, p.attempt"
)
_EVENTS_AT = (
    "SELECT e.topic, e.seq, e.id, e.kind, e.data, e.at_ms, e.tainted FROM events e "
    "JOIN unnest(%s::text[], %s::bigint[]) AS w(topic, seq) "
    "ON e.topic = w.topic AND e.seq = w.seq"
)
_DROP_PENDING = (
    "DELETE FROM pending p USING unnest(%s::text[], %s::bigint[]) AS w(topic, seq) "
    "WHERE p.grp = %s AND p.topic = w.topic AND p.seq = w.seq"
)
_WITH_NEW = (
    "SELECT g.topic, g.cursor FROM consumer_groups g WHERE g.grp = %s AND g.topic = ANY(%s) "
    "AND EXISTS (SELECT 1 FROM events e WHERE e.topic = g.topic AND e.seq > g.cursor) "
    "ORDER BY g.topic FOR UPDATE OF g SKIP LOCKED"
)
_NEXT = (
    "SELECT seq, id, kind, data, at_ms, tainted FROM events "
    "WHERE topic = %s AND seq > %s ORDER BY seq LIMIT %s"
)
_ADVANCE = "UPDATE consumer_groups SET cursor = %s WHERE topic = %s AND grp = %s"
_TAKE = (
    "INSERT INTO pending (topic, grp, seq, consumer, delivered_ms, attempt) "
    f"SELECT %s, %s, s, %s, {NOW}, 1 FROM unnest(%s::bigint[]) AS s"
)
_PROBE = (
    "SELECT (SELECT min(due_ms) FROM scheduled WHERE topic = ANY(%(t)s)), "
    "EXISTS (SELECT 1 FROM consumer_groups g WHERE g.grp = %(g)s AND g.topic = ANY(%(t)s) "
    "AND EXISTS (SELECT 1 FROM events e WHERE e.topic = g.topic AND e.seq > g.cursor)), "
    "(SELECT min(delivered_ms) FROM pending WHERE grp = %(g)s AND topic = ANY(%(t)s)), "
    f"{NOW}"
)


async def claim(
    conn: Conn,
    topics: Sequence[str],
    group: str,
    consumer: str,
    visibility_ms: int,
    channel: str,
    count: int = CLAIM_BATCH,
) -> list[Claimed]:
    """Take up to ``count`` events for ``consumer`` (in the caller's transaction)."""
    names = list(topics)
    cur = await conn.execute(_DUE, (names,))
    due = sorted(await cur.fetchall(), key=lambda r: (r[0], r[1]))
    if due:
        await append(conn, [(r[2], r[3], r[4], r[5], int(r[6]), bool(r[7])) for r in due])
        # Other groups reading these topics have new events now.
        await notify(conn, channel, {r[2] for r in due})
    taken: list[Claimed] = []
    cur = await conn.execute(
        _EXPIRED, {"g": group, "t": names, "vis": visibility_ms, "n": count, "c": consumer}
    )
    expired = {(r[0], int(r[1])): int(r[2]) for r in await cur.fetchall()}
    if expired:
        where = ([t for t, _ in expired], [s for _, s in expired])
        cur = await conn.execute(_EVENTS_AT, where)
        found = {(r[0], int(r[1])): r for r in await cur.fetchall()}
        gone = [k for k in expired if k not in found]  # trimmed or its topic deleted
        if gone:
            await conn.execute(_DROP_PENDING, ([t for t, _ in gone], [s for _, s in gone], group))
        for (topic, seq), r in sorted(found.items(), key=lambda kv: kv[0][1]):
            taken.append((topic, seq, expired[topic, seq], r[2], r[3], r[4], int(r[5]), r[6]))
    if len(taken) < count:
        cur = await conn.execute(_WITH_NEW, (group, names))
        for topic, cursor in await cur.fetchall():
            cur = await conn.execute(_NEXT, (topic, cursor, count - len(taken)))
            rows = await cur.fetchall()
            if rows:
                await conn.execute(_ADVANCE, (rows[-1][0], topic, group))
                await conn.execute(_TAKE, (topic, group, consumer, [r[0] for r in rows]))
                taken.extend(
                    (topic, int(r[0]), 1, r[1], r[2], r[3], int(r[4]), bool(r[5])) for r in rows
                )
            if len(taken) >= count:
                break
    return taken


async def probe(
    conn: Conn, topics: Sequence[str], group: str, visibility_ms: int
) -> tuple[bool, float]:
    """Whether a claim would find something now, else how many seconds until it might."""
    cur = await conn.execute(_PROBE, {"t": list(topics), "g": group})
    row = await cur.fetchone()
    assert row is not None
    next_due, has_new, oldest, now = row
    if has_new:
        return True, 0.0
    wake_at = now + visibility_ms  # nothing claimed after this read expires sooner
    if next_due is not None:
        wake_at = min(wake_at, next_due)
    if oldest is not None:
        wake_at = min(wake_at, oldest + visibility_ms)
    if wake_at <= now:
        return True, 0.0
    return False, (wake_at - now) / 1000


@dataclass(frozen=True)
class PgLink:
    """What a subscription needs of its :class:`~plait.mesh.postgres.PostgresMesh`.

    Attributes:
        write: run ``fn(conn, *args)`` in a transaction, retried as the mesh retries.
        move: the same for what only moves deliveries (committed without waiting for
            the WAL flush: see :meth:`~plait.mesh.postgres.PostgresMesh._move`).
        read: run ``fn(conn, *args)`` outside a transaction.
        ack: acknowledge a delivery (the :class:`Delivery` callback).
        listening: whether the mesh's listener is connected now.
        forget: the subscription is closed; stop waking it.
        channel: the mesh's notification channel.
    """

    write: Callable[..., Awaitable[Any]]
    move: Callable[..., Awaitable[Any]]
    read: Callable[..., Awaitable[Any]]
    ack: Callable[[Delivery], Awaitable[None]]
    listening: Callable[[], bool]
    forget: Callable[[PgSubscription], None]
    channel: str


class PgSubscription(Subscription):
    """One consumer of one group on a :class:`~plait.mesh.postgres.PostgresMesh`."""

    def __init__(
        self,
        mesh: PgLink,
        topics: list[str],
        group: str,
        consumer: str,
        start: StartFrom,
        visibility_ms: int,
        creating: asyncio.Task[None] | None,
    ) -> None:
        self._mesh = mesh
        self._topics = topics
        self._group = group
        self._consumer = consumer
        self._start = start
        self._visibility_ms = visibility_ms
        self._wake = asyncio.Event()
        self._closed = False
        self._stash: deque[Delivery] = deque()
        self._trimmed_at = time.monotonic()
        self._creating = creating
        self._ready = False

    @property
    def topics(self) -> list[str]:
        """The topics this subscription reads."""
        return self._topics

    def wake(self) -> None:
        """Ask again at once: a topic it reads changed."""
        self._wake.set()

    async def _ensure_group(self) -> None:
        if self._ready:
            return
        creating, self._creating = self._creating, None
        if creating is not None:
            await asyncio.wait({creating})
        if creating is None or creating.cancelled() or creating.exception() is not None:
            await self._mesh.write(create_groups, self._topics, self._group, self._start)
        self._ready = True

    async def __anext__(self) -> Delivery:
        await self._ensure_group()
        mesh = self._mesh
        await self._maybe_trim()
        while not self._closed:
            if self._stash:
                return self._stash.popleft()
            self._wake.clear()
            claimable, wait_s = await mesh.read(
                probe, self._topics, self._group, self._visibility_ms
            )
            if self._closed:
                break
            if claimable:
                claimed = await self._claim()
                self._stash.extend(self._delivery(c) for c in claimed)
                continue
            if not mesh.listening():
                wait_s = min(wait_s, FALLBACK_POLL_S)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self._wake.wait()
        raise StopAsyncIteration

    async def _claim(self) -> list[Claimed]:
        task = asyncio.ensure_future(
            self._mesh.move(
                claim,
                self._topics,
                self._group,
                self._consumer,
                self._visibility_ms,
                self._mesh.channel,
            )
        )
        try:
            claimed: list[Claimed] = await asyncio.shield(task)
        except asyncio.CancelledError:
            # The claim may commit regardless; keep its events for the next read instead
            # of leaving them to wait out a visibility timeout.
            task.add_done_callback(self._keep)
            raise
        return claimed

    def _keep(self, task: asyncio.Future[list[Claimed]]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._stash.extend(self._delivery(c) for c in task.result())

    async def _maybe_trim(self) -> None:
        """Now and then, drop the events of our topics that every group is done with."""
        now = time.monotonic()
        if now - self._trimmed_at < TRIM_INTERVAL_S:
            return
        self._trimmed_at = now
        for topic in self._topics:
            await self._mesh.move(trim, topic)

    def _delivery(self, claimed: Claimed) -> Delivery:
        topic, seq, attempt, event_id, kind, data, at_ms, tainted = claimed
        event = Event(event_id, topic, kind, decode(data), at_ms, bool(tainted))
        return Delivery(event, self._group, self._consumer, attempt, seq, self._mesh.ack)

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._mesh.forget(self)


__all__ = [
    "CLAIM_BATCH",
    "FALLBACK_POLL_S",
    "Claimed",
    "PgLink",
    "PgSubscription",
    "claim",
    "probe",
]
