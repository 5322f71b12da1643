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

from plait.errors import VersionConflict
from plait.mesh._base import StartFrom

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
"""A CAS as one statement (the one-round-trip batch raises on a miss instead)."""
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
    "ack",
    "append",
    "backlog",
    "create_groups",
    "delete",
    "delete_prefix",
    "delete_topic",
    "drop_group",
    "extend",
    "get",
    "get_many",
    "notify",
    "scan_page",
    "schedule_key",
    "topics",
    "trim",
]
