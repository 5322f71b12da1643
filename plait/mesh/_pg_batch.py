"""A PostgreSQL transaction in two round trips: BEGIN and its statements in one
pipeline (psycopg 3 pipeline mode), then COMMIT.

:func:`plait.mesh._pg_ops.commit` runs a transaction's statements one after another,
reading each answer before it sends the next: a transition's commit (a record CAS, a
log entry, a wake, an ack, the notify) cost a dozen round trips. Here no statement
needs an earlier one's answer:

- an expectation that does not hold fails the transaction on the server:
  ``mesh_refuse('cas', key, expected)`` raises where a CAS found another version, and
  ``mesh_refuse('lost', '', op)`` where a held delivery is no longer its consumer's,
  so the transaction rolls back; the error becomes the same
  :class:`~plait.errors.VersionConflict` (or :class:`~plait.errors.DeliveryLost`) as
  on every backend;
- a topic's events are numbered and inserted in one statement.

Takes read what they take before they record it, so a batch with a take goes the
statement-by-statement way. COMMIT goes apart, after the statements' answers, so a
connection lost before it is known to have applied nothing (the batch is retried on a
new connection) and only one lost while COMMIT is in flight leaves the outcome unknown
(:class:`~plait.errors.MeshUnavailable`), as the statement-by-statement way promises;
sending COMMIT in the pipeline too would save one more round trip but make every lost
connection an unknown outcome.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncCursor

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
    TakeOp,
)
from plait.mesh._pg_ops import (
    _ACK,
    _CANCEL,
    _CREATE,
    _DELETE,
    _NOTIFY,
    _SCHEDULE,
    _UPSERT,
    Conn,
    _version,
    schedule_key,
)

_CREATE_IF_ABSENT = (
    "WITH i AS (INSERT INTO kv (key, value, version, tainted) VALUES (%(k)s, %(v)s, 1, %(t)s) "
    "ON CONFLICT (key) DO NOTHING RETURNING version) "
    "SELECT coalesce((SELECT version FROM i), mesh_refuse('cas', %(k)s, 0))"
)
_UPDATE_IF = (
    "WITH u AS (UPDATE kv SET value = %(v)s, version = version + 1, tainted = %(t)s "
    "WHERE key = %(k)s AND version = %(n)s RETURNING version) "
    "SELECT coalesce((SELECT version FROM u), mesh_refuse('cas', %(k)s, %(n)s))"
)
_DELETE_IF = (
    "WITH d AS (DELETE FROM kv WHERE key = %(k)s AND version = %(n)s RETURNING version) "
    "SELECT coalesce((SELECT version FROM d), mesh_refuse('cas', %(k)s, %(n)s))"
)
_CHECK = (
    "SELECT CASE WHEN coalesce((SELECT version FROM kv WHERE key = %(k)s), 0) = %(n)s "
    "THEN 0 ELSE mesh_refuse('cas', %(k)s, %(n)s) END"
)
_HOLD = (
    "SELECT coalesce((SELECT 1 FROM pending WHERE topic = %s AND grp = %s AND seq = %s "
    "AND consumer = %s FOR SHARE), mesh_refuse('lost', '', %s))"
)
_APPEND = (
    "WITH n AS (INSERT INTO topics (topic, last_seq) VALUES (%(t)s, %(c)s) "
    "ON CONFLICT (topic) DO UPDATE SET last_seq = topics.last_seq + EXCLUDED.last_seq "
    "RETURNING last_seq) "
    "INSERT INTO events (topic, seq, id, kind, data, at_ms, tainted) "
    "SELECT %(t)s, n.last_seq - %(c)s + e.o, e.id, e.kind, e.data, e.at_ms, e.tainted "
    "FROM n, unnest(%(ids)s::text[], %(kinds)s::text[], %(data)s::bytea[], "
    "%(at)s::bigint[], %(tainted)s::boolean[]) WITH ORDINALITY "
    "AS e(id, kind, data, at_ms, tainted, o)"
)


async def _queue(conn: Conn, query: str, args: Any) -> AsyncCursor[Any]:
    """Queue one statement, unprepared: a statement prepared in a pipeline that fails
    before it is never created, yet the driver would take it as prepared from then on
    (``prepared statement "_pg3_N" does not exist`` on the connection's next use)."""
    return await conn.execute(query, args, prepare=False)


def sendable(ops: Sequence[Op]) -> bool:
    """Whether ``ops`` can go in one round trip (no take among them)."""
    return not any(isinstance(op, TakeOp) for op in ops)


async def send(conn: Conn, ops: Sequence[Op], channel: str) -> list[AsyncCursor[Any]]:
    """Queue ``ops``' statements on ``conn`` (in pipeline mode, inside a transaction);
    the cursors whose answers :func:`results` reads, one per put and per insert."""
    answers: list[AsyncCursor[Any]] = []
    by_topic: dict[str, list[PublishOp]] = defaultdict(list)
    for op in ops:
        if isinstance(op, PublishOp) and op.after_ms == 0 and op.key is None:
            by_topic[op.topic].append(op)
    # Topics locked sorted by name, before anything else, as the one-by-one way does.
    for topic in sorted(by_topic):
        events = by_topic[topic]
        await _queue(
            conn,
            _APPEND,
            {
                "t": topic,
                "c": len(events),
                "ids": [e.event_id for e in events],
                "kinds": [e.kind for e in events],
                "data": [e.data for e in events],
                "at": [e.at_ms for e in events],
                "tainted": [e.tainted for e in events],
            },
        )
    changed = set(by_topic)
    for index, op in enumerate(ops):
        if isinstance(op, PutOp):
            args = {"k": op.key, "v": op.data, "t": op.tainted, "n": op.if_version}
            if op.if_version is None:
                answers.append(await _queue(conn, _UPSERT, (op.key, op.data, op.tainted)))
            elif op.if_version == 0:
                answers.append(await _queue(conn, _CREATE_IF_ABSENT, args))
            else:
                answers.append(await _queue(conn, _UPDATE_IF, args))
        elif isinstance(op, InsertOp):
            answers.append(await _queue(conn, _CREATE, (op.key, op.data, op.tainted)))
        elif isinstance(op, DeleteOp):
            if op.if_version is None:
                await _queue(conn, _DELETE, (op.key,))
            elif op.if_version == 0:
                await _queue(conn, _CHECK, {"k": op.key, "n": 0})
            else:
                await _queue(conn, _DELETE_IF, {"k": op.key, "n": op.if_version})
        elif isinstance(op, CheckOp):
            await _queue(conn, _CHECK, {"k": op.key, "n": op.version})
        elif isinstance(op, HoldOp):
            d = op.delivery
            await _queue(conn, _HOLD, (d.topic, d.group, d.position, d.consumer, index))
        elif isinstance(op, AckOp):
            d = op.delivery
            await _queue(conn, _ACK, (d.topic, d.group, d.position, d.consumer))
        elif isinstance(op, CancelOp):
            await _queue(conn, _CANCEL, (schedule_key(op.key),))
        elif isinstance(op, PublishOp) and (op.after_ms or op.key is not None):
            changed.add(op.topic)
            skey = schedule_key(op.key) if op.key is not None else "e" + op.event_id
            # at_ms is truncated to the millisecond; one more keeps it from being early.
            after = op.after_ms + (1 if op.after_ms else 0)
            row = (skey, after, op.topic, op.event_id, op.kind, op.data, op.at_ms, op.tainted)
            await _queue(conn, _SCHEDULE, row)
    if changed:
        await _queue(conn, _NOTIFY, (channel, sorted(changed)))
    return answers


async def results(
    ops: Sequence[Op], answers: list[AsyncCursor[Any]]
) -> tuple[list[int], list[bool]]:
    """Each put's new version and whether each insert created its key, read from the
    answers of a committed batch."""
    versions: list[int] = []
    inserted: list[bool] = []
    found = iter(answers)
    for op in ops:
        if isinstance(op, PutOp):
            row = await next(found).fetchone()
            assert row is not None
            versions.append(int(row[0]))
        elif isinstance(op, InsertOp):
            inserted.append(await next(found).fetchone() is not None)
    return versions, inserted


def refused(message: str | None, detail: str | None, hint: str | None) -> tuple[str, str, int]:
    """What a ``mesh_refuse`` error says: ("cas" or "lost", key, expected or op index);
    ("", "", 0) for any other error."""
    if message not in ("plait:cas", "plait:lost"):
        return "", "", 0
    return message.removeprefix("plait:"), detail or "", int(hint or 0)


async def conflict(conn: Conn, ops: Sequence[Op], what: str, key: str, number: int) -> Exception:
    """The error of a refused batch (``conn`` rolled back, out of pipeline mode)."""
    if what == "lost":
        op = ops[number]
        assert isinstance(op, HoldOp)
        d = op.delivery
        return DeliveryLost(d.topic, d.id, d.consumer)
    return VersionConflict(key, number, await _version(conn, key))


__all__ = ["conflict", "refused", "results", "send", "sendable"]
