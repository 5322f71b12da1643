"""The SQL of the PostgreSQL mesh: what each request runs on one connection.

Write requests run inside a transaction :class:`~plait.mesh.postgres.PostgresMesh` has
begun (and commits or rolls back); reads run as single statements. Times are the
server's (:data:`NOW`), so hosts with skewed clocks agree on expiries and due times.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from plait.errors import DeliveryLost, VersionConflict
from plait.mesh._base import (
    AckOp,
    CancelOp,
    CheckOp,
    DeleteOp,
    HoldOp,
    InsertOp,
    Op,
    PublishOp,
    PutOp,
    StartFrom,
    TakeOp,
)

Conn = AsyncConnection[Any]

NOW = "(extract(epoch from clock_timestamp()) * 1000)::bigint"
"""The server's clock in epoch milliseconds, as SQL."""

# -- keys -------------------------------------------------------------------------------

_GET = "SELECT value, version, tainted FROM kv WHERE key = %s"
_GET_MANY = "SELECT key, value, version, tainted FROM kv WHERE key = ANY(%s)"
_VERSION = "SELECT version FROM kv WHERE key = %s"
_UPSERT = (
    "INSERT INTO kv (key, value, version, tainted) VALUES (%s, %s, 1, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = kv.version + 1, "
    "tainted = EXCLUDED.tainted RETURNING version"
)
_CREATE = (
    "INSERT INTO kv (key, value, version, tainted) VALUES (%s, %s, 1, %s) "
    "ON CONFLICT (key) DO NOTHING RETURNING version"
)
_UPDATE = (
    "UPDATE kv SET value = %s, version = version + 1, tainted = %s "
    "WHERE key = %s AND version = %s RETURNING version"
)
_DELETE = "DELETE FROM kv WHERE key = %s RETURNING version"
_DELETE_IF = "DELETE FROM kv WHERE key = %s AND version = %s RETURNING version"
_DELETE_RANGE = "DELETE FROM kv WHERE key >= %s AND key < %s"
_DELETE_FROM = "DELETE FROM kv WHERE key >= %s"


def _scan_sql(reverse: bool, low_op: str | None, high_op: str | None) -> str:
    where = " AND ".join(
        clause
        for clause in (
            f"key {low_op} %(low)s" if low_op else "",
            f"key {high_op} %(high)s" if high_op else "",
        )
        if clause
    )
    order = "DESC" if reverse else "ASC"
    return (
        "SELECT key, value, version, tainted FROM kv"
        + (f" WHERE {where}" if where else "")
        + f" ORDER BY key {order} LIMIT %(limit)s"
    )


async def get(conn: Conn, key: str) -> tuple[bytes, int, bool] | None:
    """The stored (value, version, tainted) of ``key``."""
    cur = await conn.execute(_GET, (key,))
    row = await cur.fetchone()
    return None if row is None else (row[0], row[1], row[2])


async def get_many(conn: Conn, keys: list[str]) -> dict[str, tuple[bytes, int, bool]]:
    """The stored (value, version, tainted) of each of ``keys`` that exists: one query."""
    cur = await conn.execute(_GET_MANY, (keys,))
    return {row[0]: (row[1], row[2], row[3]) for row in await cur.fetchall()}


async def scan_page(
    conn: Conn,
    low: str | None,
    low_inclusive: bool,
    high: str | None,
    high_inclusive: bool,
    reverse: bool,
    limit: int,
) -> list[tuple[str, bytes, int, bool]]:
    """Up to ``limit`` rows (key, value, version, tainted) between the bounds, in key
    order (or reversed)."""
    low_op = None if low is None else (">=" if low_inclusive else ">")
    high_op = None if high is None else ("<=" if high_inclusive else "<")
    cur = await conn.execute(
        _scan_sql(reverse, low_op, high_op),
        {"low": low, "high": high, "limit": limit},
    )
    return [(r[0], r[1], r[2], r[3]) for r in await cur.fetchall()]


async def _version(conn: Conn, key: str) -> int:
    cur = await conn.execute(_VERSION, (key,))
    row = await cur.fetchone()
    return 0 if row is None else int(row[0])


async def put(conn: Conn, key: str, data: bytes, if_version: int | None, tainted: bool) -> int:
    """Write ``data`` at ``key``; the new version. CAS on ``if_version``.

    Raises:
        VersionConflict: ``if_version`` did not hold (the caller rolls back).
    """
    if if_version is None:
        cur = await conn.execute(_UPSERT, (key, data, tainted))
    elif if_version == 0:
        cur = await conn.execute(_CREATE, (key, data, tainted))
    else:
        cur = await conn.execute(_UPDATE, (data, tainted, key, if_version))
    row = await cur.fetchone()
    if row is not None:
        return int(row[0])
    assert if_version is not None
    raise VersionConflict(key, if_version, await _version(conn, key))


async def insert(conn: Conn, key: str, data: bytes, tainted: bool) -> bool:
    """Create ``key`` unless it exists; whether it was created."""
    cur = await conn.execute(_CREATE, (key, data, tainted))
    return await cur.fetchone() is not None


async def delete(conn: Conn, key: str, if_version: int | None) -> bool:
    """Delete ``key``; True if it existed. CAS on ``if_version`` (missing: version 0)."""
    if if_version is None:
        cur = await conn.execute(_DELETE, (key,))
        return await cur.fetchone() is not None
    if if_version > 0:
        cur = await conn.execute(_DELETE_IF, (key, if_version))
        if await cur.fetchone() is not None:
            return True
    actual = await _version(conn, key)
    if actual != if_version:
        raise VersionConflict(key, if_version, actual)
    return False


async def delete_prefix(conn: Conn, prefix: str, high: str | None) -> int:
    """Delete every key from ``prefix`` below ``high`` (None: no bound); how many."""
    if high is None:
        cur = await conn.execute(_DELETE_FROM, (prefix,))
    else:
        cur = await conn.execute(_DELETE_RANGE, (prefix, high))
    return max(cur.rowcount, 0)


# -- publishing ---------------------------------------------------------------------------

_NUMBER = (
    "INSERT INTO topics (topic, last_seq) VALUES (%s, %s) ON CONFLICT (topic) "
    "DO UPDATE SET last_seq = topics.last_seq + EXCLUDED.last_seq RETURNING last_seq"
)
_APPEND = (
    "INSERT INTO events (topic, seq, id, kind, data, at_ms, tainted) "
    "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::bytea[], "
    "%s::bigint[], %s::boolean[])"
)
_SCHEDULE = (
    "INSERT INTO scheduled (skey, due_ms, topic, id, kind, data, at_ms, tainted) "
    f"VALUES (%s, {NOW} + %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (skey) DO UPDATE SET "
    "due_ms = EXCLUDED.due_ms, topic = EXCLUDED.topic, id = EXCLUDED.id, "
    "kind = EXCLUDED.kind, data = EXCLUDED.data, at_ms = EXCLUDED.at_ms, "
    "tainted = EXCLUDED.tainted"
)
_CANCEL = "DELETE FROM scheduled WHERE skey = %s"
_ACK = "DELETE FROM pending WHERE topic = %s AND grp = %s AND seq = %s AND consumer = %s"
# FOR SHARE: a redelivery (an UPDATE of the row) waits for the batch that holds it.
_HOLDS = (
    "SELECT 1 FROM pending WHERE topic = %s AND grp = %s AND seq = %s AND consumer = %s FOR SHARE"
)
_NOTIFY = "SELECT pg_notify(%s, t) FROM unnest(%s::text[]) AS t"

Row = tuple[str, str, str, bytes, int, bool]
"""An event to append: topic, id, kind, data, at_ms, tainted."""


async def append(conn: Conn, rows: Sequence[Row]) -> None:
    """Append events, numbering each topic's in order; topics are locked sorted by
    name, so that two publishers never wait on each other in a circle."""
    by_topic: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_topic[row[0]].append(row)
    columns: list[list[Any]] = [[] for _ in range(7)]
    for topic in sorted(by_topic):
        events = by_topic[topic]
        cur = await conn.execute(_NUMBER, (topic, len(events)))
        found = await cur.fetchone()
        assert found is not None
        first = int(found[0]) - len(events) + 1
        for offset, (_, event_id, kind, data, at_ms, tainted) in enumerate(events):
            for column, value in zip(
                columns, (topic, first + offset, event_id, kind, data, at_ms, tainted), strict=True
            ):
                column.append(value)
    await conn.execute(_APPEND, columns)


async def notify(conn: Conn, channel: str, topics: set[str]) -> None:
    """Tell the mesh's listeners (at commit) that ``topics`` changed."""
    if topics:
        await conn.execute(_NOTIFY, (channel, sorted(topics)))


def schedule_key(key: str) -> str:
    """The ``scheduled.skey`` of a publish key; unkeyed events use ``"e" + event id``."""
    return "k" + key


# -- transactions -------------------------------------------------------------------------

_GROUP_CURSOR = "SELECT cursor FROM consumer_groups WHERE topic = %s AND grp = %s FOR UPDATE"
_NEXT = (
    "SELECT seq, id, kind, data, at_ms, tainted FROM events "
    "WHERE topic = %s AND seq > %s ORDER BY seq LIMIT %s"
)
_ADVANCE = "UPDATE consumer_groups SET cursor = %s WHERE topic = %s AND grp = %s"
_TAKE = (
    "INSERT INTO pending (topic, grp, seq, consumer, delivered_ms, attempt) "
    f"SELECT %s, %s, s, %s, {NOW}, 1 FROM unnest(%s::bigint[]) AS s"
)

Taken = tuple[TakeOp, int, str, str, bytes, int, bool]
"""What a take took: the op, seq, event id, kind, data, at_ms, tainted."""


async def commit(
    conn: Conn, ops: Sequence[Op], channel: str
) -> tuple[list[int], list[bool], list[Taken]]:
    """Apply ``ops``: each put's new version, whether each insert created its key, and
    what each take took. Events are numbered first (see :func:`append`), then the ops
    run in order, then the takes; a conflict raises midway and the caller rolls back.
    """
    events = [
        (op.topic, op.event_id, op.kind, op.data, op.at_ms, op.tainted)
        for op in ops
        if isinstance(op, PublishOp) and op.after_ms == 0 and op.key is None
    ]
    if events:
        await append(conn, events)
    versions: list[int] = []
    inserted: list[bool] = []
    scheduled: set[str] = set()
    for op in ops:
        if isinstance(op, PutOp):
            versions.append(await put(conn, op.key, op.data, op.if_version, op.tainted))
        elif isinstance(op, InsertOp):
            inserted.append(await insert(conn, op.key, op.data, op.tainted))
        elif isinstance(op, DeleteOp):
            await delete(conn, op.key, op.if_version)
        elif isinstance(op, PublishOp):
            if op.after_ms or op.key is not None:
                scheduled.add(op.topic)
                skey = schedule_key(op.key) if op.key is not None else "e" + op.event_id
                # at_ms is truncated to the millisecond; one more keeps it from being early.
                after = op.after_ms + (1 if op.after_ms else 0)
                await conn.execute(
                    _SCHEDULE,
                    (skey, after, op.topic, op.event_id, op.kind, op.data, op.at_ms, op.tainted),
                )
        elif isinstance(op, CancelOp):
            await conn.execute(_CANCEL, (schedule_key(op.key),))
        elif isinstance(op, AckOp):
            d = op.delivery
            await conn.execute(_ACK, (d.topic, d.group, d.position, d.consumer))
        elif isinstance(op, HoldOp):
            d = op.delivery
            cur = await conn.execute(_HOLDS, (d.topic, d.group, d.position, d.consumer))
            if await cur.fetchone() is None:
                raise DeliveryLost(d.topic, d.id, d.consumer)
        elif isinstance(op, CheckOp):
            actual = await _version(conn, op.key)
            if actual != op.version:
                raise VersionConflict(op.key, op.version, actual)
    taken: list[Taken] = []
    for op in ops:
        if isinstance(op, TakeOp):
            found = await take(conn, op)
            if found is not None:
                taken.append(found)
    # A topic whose new events this very transaction took needs no reader woken.
    left: dict[str, int] = defaultdict(int)
    for row in events:
        left[row[0]] += 1
    for t in taken:
        left[t[0].topic] -= 1
    changed = scheduled | {topic for topic, count in left.items() if count > 0}
    await notify(conn, channel, changed)
    return versions, inserted, taken


async def take(conn: Conn, op: TakeOp) -> Taken | None:
    """The group's next new event on the topic, made pending for the op's consumer."""
    cur = await conn.execute(_GROUP_CURSOR, (op.topic, op.group))
    row = await cur.fetchone()
    if row is None:
        return None
    cur = await conn.execute(_NEXT, (op.topic, row[0], 1))
    event = await cur.fetchone()
    if event is None:
        return None
    seq = int(event[0])
    await conn.execute(_ADVANCE, (seq, op.topic, op.group))
    await conn.execute(_TAKE, (op.topic, op.group, op.consumer, [seq]))
    return (op, seq, event[1], event[2], event[3], int(event[4]), bool(event[5]))


# -- groups and topics --------------------------------------------------------------------

_CREATE_GROUPS = (
    "INSERT INTO consumer_groups (topic, grp, cursor) "
    "SELECT t, %s, CASE WHEN %s THEN 0 ELSE "
    "coalesce((SELECT last_seq FROM topics WHERE topic = t), 0) END "
    "FROM unnest(%s::text[]) AS t ON CONFLICT (topic, grp) DO NOTHING"
)


async def create_groups(conn: Conn, topics: Sequence[str], group: str, start: StartFrom) -> None:
    """Create ``group`` on each topic where it does not exist yet."""
    await conn.execute(_CREATE_GROUPS, (group, start == "begin", list(topics)))


async def ack(conn: Conn, topic: str, group: str, seq: int, consumer: str) -> None:
    """Forget a pending delivery (acked) if ``consumer`` still holds it.

    A delivery that outlived its visibility timeout went to another consumer (or to
    the same one again), which may be running it now, as a new attempt. An ack by a
    consumer it went away from leaves it pending for its holder: deleting it would
    leave the holder's attempt with nothing to deliver it again if that holder dies
    before it acks (a run whose wake went on to claim its next node would stall).
    """
    await conn.execute(_ACK, (topic, group, seq, consumer))


_EXTEND = (
    f"UPDATE pending SET delivered_ms = {NOW} "
    "WHERE topic = %s AND grp = %s AND seq = %s AND consumer = %s"
)


async def extend(conn: Conn, topic: str, group: str, seq: int, consumer: str) -> None:
    """Restart a pending delivery's visibility timeout if ``consumer`` still holds it."""
    await conn.execute(_EXTEND, (topic, group, seq, consumer))


_TRIM = (
    "DELETE FROM events WHERE topic = %(t)s "
    "AND seq <= (SELECT min(cursor) FROM consumer_groups WHERE topic = %(t)s) "
    "AND seq < coalesce((SELECT min(seq) FROM pending WHERE topic = %(t)s), "
    "9223372036854775807)"
)


async def trim(conn: Conn, topic: str) -> int:
    """Delete the events of ``topic`` every group passed and acked; how many."""
    cur = await conn.execute(_TRIM, {"t": topic})
    return max(cur.rowcount, 0)


_BACKLOG = (
    "SELECT (SELECT count(*) FROM events WHERE topic = %(t)s AND seq > g.cursor) "
    "+ (SELECT count(*) FROM pending WHERE topic = %(t)s AND grp = %(g)s) "
    "FROM consumer_groups g WHERE g.topic = %(t)s AND g.grp = %(g)s"
)
_HELD = "SELECT count(*) FROM events WHERE topic = %s"


async def backlog(conn: Conn, topic: str, group: str) -> int:
    """Events of ``topic`` not yet acked by ``group`` (no group: all it holds)."""
    cur = await conn.execute(_BACKLOG, {"t": topic, "g": group})
    row = await cur.fetchone()
    if row is None:
        cur = await conn.execute(_HELD, (topic,))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def topics(conn: Conn, low: str, high: str | None) -> list[str]:
    """The topics with events or groups from ``low`` below ``high`` (None: no bound)."""
    bound = " AND topic < %(high)s" if high is not None else ""
    cur = await conn.execute(
        f"SELECT topic FROM consumer_groups WHERE topic >= %(low)s{bound} "
        f"UNION SELECT DISTINCT topic FROM events WHERE topic >= %(low)s{bound} ORDER BY 1",
        {"low": low, "high": high},
    )
    return [row[0] for row in await cur.fetchall()]


async def delete_topic(conn: Conn, topic: str) -> None:
    """Delete a topic's events and pending deliveries; its groups move past every
    event it ever numbered (its ``topics`` row stays, so seqs never come back)."""
    await conn.execute("DELETE FROM pending WHERE topic = %s", (topic,))
    await conn.execute(
        "UPDATE consumer_groups SET cursor = "
        "coalesce((SELECT last_seq FROM topics WHERE topic = %(t)s), 0) WHERE topic = %(t)s",
        {"t": topic},
    )
    await conn.execute("DELETE FROM events WHERE topic = %s", (topic,))


async def drop_group(conn: Conn, topics: Sequence[str], group: str) -> None:
    """Forget ``group`` on each topic, with its pending deliveries."""
    names = list(topics)
    await conn.execute("DELETE FROM pending WHERE grp = %s AND topic = ANY(%s)", (group, names))
    await conn.execute(
        "DELETE FROM consumer_groups WHERE grp = %s AND topic = ANY(%s)", (group, names)
    )


__all__ = [
    "NOW",
    "Conn",
    "Row",
    "Taken",
    "ack",
    "append",
    "backlog",
    "commit",
    "create_groups",
    "delete",
    "delete_prefix",
    "delete_topic",
    "drop_group",
    "extend",
    "get",
    "get_many",
    "insert",
    "notify",
    "put",
    "scan_page",
    "schedule_key",
    "take",
    "topics",
    "trim",
]
