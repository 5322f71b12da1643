"""The SQL of the SQLite mesh: schema, connection setup, and what each request runs.

Everything here runs on a connection of :mod:`plait.mesh._sqlite_worker` (on the event
loop or on a worker thread), inside a writer's transaction for writes. SQL strings are
constants so that sqlite3's statement cache prepares each one once per connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plait.errors import ConfigError, DeliveryLost, MeshUnavailable, VersionConflict
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
    now_ms,
)
from plait.mesh._codec import prefix_end
from plait.mesh._sqlite_live import SCHEMA as LIVE_SCHEMA

SCHEMA_VERSION = 4
"""Version 4 adds the live channel tables (:mod:`plait.mesh._sqlite_live`); version 3
keeps a ``tainted`` flag beside each value, event and scheduled event;
version 2 has none, and version 1 also keeps ``kv`` ``WITHOUT ROWID``. Older files are
migrated on open."""

BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
"""The result codes of a lock held by another connection beyond the busy timeout."""

# kv is a rowid table: values are often a kilobyte or more (a run's record), and a
# WITHOUT ROWID table stores a row in its key's b-tree, where a cell overflows to a
# page of its own past about 1000 bytes (on 4 KiB pages). Measured here, with values
# of 1 KB, a CAS update took 42 against 23 us and wrote 3.5 against 1.6 WAL frames,
# and a read 16 against 5 us; a 200-byte value reads 0.6 us slower.
_KV = """
CREATE TABLE IF NOT EXISTS {name} (
    key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL, version INTEGER NOT NULL,
    tainted INTEGER NOT NULL DEFAULT 0
)"""
_SCHEMA = f"""{_KV.format(name="kv")};
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, data BLOB NOT NULL, at_ms INTEGER NOT NULL,
    tainted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS events_by_topic ON events (topic, seq);
CREATE TABLE IF NOT EXISTS consumer_groups (
    topic TEXT NOT NULL, grp TEXT NOT NULL, cursor INTEGER NOT NULL, PRIMARY KEY (topic, grp)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (
    topic TEXT NOT NULL, grp TEXT NOT NULL, seq INTEGER NOT NULL, consumer TEXT NOT NULL,
    delivered_ms INTEGER NOT NULL, attempt INTEGER NOT NULL, PRIMARY KEY (topic, grp, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scheduled (
    skey TEXT PRIMARY KEY, due_ms INTEGER NOT NULL, topic TEXT NOT NULL, id TEXT NOT NULL,
    kind TEXT NOT NULL, data BLOB NOT NULL, at_ms INTEGER NOT NULL,
    tainted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS scheduled_by_due ON scheduled (due_ms);
{LIVE_SCHEMA}"""


SYNCHRONOUS = ("NORMAL", "FULL")
"""The ``synchronous`` levels a mesh may run with (NORMAL is the default)."""


def open_connection(
    path: Path, busy_timeout_ms: int, *, writer: bool, synchronous: str = "NORMAL"
) -> sqlite3.Connection:
    """Open ``path`` (creating its directory, the file and the schema if needed).

    Raises:
        ConfigError: the path cannot be created, opened or written, or is not a mesh.
        MeshUnavailable: another process kept the file locked beyond the busy timeout.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the directory {path.parent} for the SQLite mesh {path}: "
            f"{exc.strerror or exc}"
        ) from exc
    conn: sqlite3.Connection | None = None
    try:
        # isolation_level=None: no implicit BEGIN; transactions are written out explicitly.
        conn = sqlite3.connect(
            path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
        # busy_timeout: wait for another process's lock instead of failing at once.
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # WAL: readers never block the writer nor the writer them, across processes.
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise ConfigError(f"the SQLite mesh {path} cannot use WAL (journal mode {mode!r})")
        # NORMAL under WAL: a commit is atomic and survives a crash of the process; only a
        # power loss may drop the last commits (never corrupting the file). FULL fsyncs
        # the WAL on every commit, which costs more than the whole rest of a write.
        assert synchronous in SYNCHRONOUS
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        _ensure_schema(conn, path)
        if not writer:
            conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF in BUSY_CODES:
            raise MeshUnavailable(
                f"the SQLite mesh {path} stayed locked by another connection for longer than "
                f"busy_timeout ({busy_timeout_ms} ms): {exc}"
            ) from exc
        raise ConfigError(f"cannot open the SQLite mesh {path}: {exc}") from exc
    except ConfigError:
        if conn is not None:
            conn.close()
        raise
    return conn


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"the SQLite mesh {path} has schema version {version}, newer than this plait "
            f"understands ({SCHEMA_VERSION}); upgrade plait"
        )
    # IMMEDIATE: processes opening a new file at once create the schema one at a time.
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the lock: another process may have migrated meanwhile.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 1:
            _migrate_kv_to_rowid(conn)
        if version in (1, 2):
            _add_taint_columns(conn, kv=version == 2)
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _migrate_kv_to_rowid(conn: sqlite3.Connection) -> None:
    """Move a version-1 file's ``kv`` rows into a rowid table (see ``_KV``), in the
    caller's transaction, so a crash midway leaves the file at version 1."""
    conn.execute(_KV.format(name="kv_rowid"))
    conn.execute("INSERT INTO kv_rowid (key, value, version) SELECT key, value, version FROM kv")
    conn.execute("DROP TABLE kv")
    conn.execute("ALTER TABLE kv_rowid RENAME TO kv")


_TAINT_COLUMN = "tainted INTEGER NOT NULL DEFAULT 0"


def _add_taint_columns(conn: sqlite3.Connection, *, kv: bool) -> None:
    """Give an older file's tables the ``tainted`` column (version 3), in the caller's
    transaction; existing rows read as untainted. ``kv`` is False where the version-1
    migration already made ``kv`` with it. Adding a column with a constant default
    rewrites no row, so this is quick however large the file."""
    for table in ("kv", "events", "scheduled") if kv else ("events", "scheduled"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {_TAINT_COLUMN}")


# -- keys (reader) --------------------------------------------------------------------

_GET = "SELECT value, version, tainted FROM kv WHERE key = ?"
_VERSION = "SELECT version FROM kv WHERE key = ?"
_GET_MANY = "SELECT key, value, version, tainted FROM kv WHERE key IN ({})"
_GET_MANY_CHUNK = 500
"""Keys one statement of :func:`get_many` names at most (SQLite bounds its variables)."""


def _scan_sql(reverse: bool, low_op: str | None, high_op: str | None) -> str:
    clauses = [f"key {op} ?" for op in (low_op, high_op) if op]
    return (
        "SELECT key, value, version, tainted FROM kv"
        + (" WHERE " + " AND ".join(clauses) if clauses else "")
        + f" ORDER BY key {'DESC' if reverse else 'ASC'} LIMIT ?"
    )


_SCAN = {
    (reverse, low_op, high_op): _scan_sql(reverse, low_op, high_op)
    for reverse in (False, True)
    for low_op in (None, ">=", ">")
    for high_op in (None, "<=", "<")
}


def get(conn: sqlite3.Connection, key: str) -> tuple[bytes, int, int] | None:
    """The stored (value, version, tainted) of ``key``."""
    row: tuple[bytes, int, int] | None = conn.execute(_GET, (key,)).fetchone()
    return row


def scan_page(
    conn: sqlite3.Connection,
    low: str | None,
    low_inclusive: bool,
    high: str | None,
    high_inclusive: bool,
    reverse: bool,
    limit: int,
) -> list[tuple[str, bytes, int, int]]:
    """Up to ``limit`` rows (key, value, version, tainted) between the bounds (None: no
    bound), in key order or reversed."""
    low_op = None if low is None else (">=" if low_inclusive else ">")
    high_op = None if high is None else ("<=" if high_inclusive else "<")
    params = [bound for bound in (low, high) if bound is not None]
    rows: list[tuple[str, bytes, int, int]] = conn.execute(
        _SCAN[reverse, low_op, high_op], (*params, limit)
    ).fetchall()
    return rows


def get_many(conn: sqlite3.Connection, keys: list[str]) -> dict[str, tuple[bytes, int, int]]:
    """The stored (value, version, tainted) of each of ``keys`` that exists."""
    found: dict[str, tuple[bytes, int, int]] = {}
    for start in range(0, len(keys), _GET_MANY_CHUNK):
        chunk = keys[start : start + _GET_MANY_CHUNK]
        sql = _GET_MANY.format(",".join("?" * len(chunk)))
        for key, value, version, tainted in conn.execute(sql, chunk):
            found[key] = (value, version, tainted)
    return found


# -- keys (writer) --------------------------------------------------------------------

# A put writes its taint flag too (0 clears one an earlier writer left): an integer 0
# or 1 takes no byte of the row's payload in SQLite's record format, only its header's.
_UPSERT = (
    "INSERT INTO kv (key, value, version, tainted) VALUES (?, ?, 1, ?) ON CONFLICT (key) "
    "DO UPDATE SET value = excluded.value, version = kv.version + 1, "
    "tainted = excluded.tainted RETURNING version"
)
_CREATE = (
    "INSERT INTO kv (key, value, version, tainted) VALUES (?, ?, 1, ?) ON CONFLICT (key) DO NOTHING"
)
_UPDATE = (
    "UPDATE kv SET value = ?, version = version + 1, tainted = ? WHERE key = ? AND version = ?"
)
_DELETE = "DELETE FROM kv WHERE key = ?"
_DELETE_IF = "DELETE FROM kv WHERE key = ? AND version = ?"


def _version(conn: sqlite3.Connection, key: str) -> int:
    row = conn.execute(_VERSION, (key,)).fetchone()
    return 0 if row is None else int(row[0])


def put(
    conn: sqlite3.Connection,
    key: str,
    data: bytes,
    if_version: int | None,
    tainted: bool = False,
) -> int:
    """Write ``data`` at ``key`` (with its taint flag) and return the new version; CAS
    on ``if_version``.

    The version check and the write are one statement, so a conflict writes nothing and
    needs no rollback; the current version is read only to report the conflict.
    """
    if if_version is None:
        return int(conn.execute(_UPSERT, (key, data, tainted)).fetchone()[0])
    if if_version == 0:
        if conn.execute(_CREATE, (key, data, tainted)).rowcount == 1:
            return 1
    elif conn.execute(_UPDATE, (data, tainted, key, if_version)).rowcount == 1:
        return if_version + 1
    raise VersionConflict(key, if_version, _version(conn, key))


def delete_prefix(conn: sqlite3.Connection, prefix: str) -> int:
    """Delete every key starting with ``prefix``; how many."""
    high = prefix_end(prefix)
    if high is None:
        return int(conn.execute("DELETE FROM kv WHERE key >= ?", (prefix,)).rowcount)
    return int(conn.execute("DELETE FROM kv WHERE key >= ? AND key < ?", (prefix, high)).rowcount)


def delete(conn: sqlite3.Connection, key: str, if_version: int | None) -> bool:
    """Delete ``key``; True if it existed. CAS on ``if_version`` (missing = version 0)."""
    if if_version is None:
        return conn.execute(_DELETE, (key,)).rowcount > 0
    if if_version > 0 and conn.execute(_DELETE_IF, (key, if_version)).rowcount == 1:
        return True
    actual = _version(conn, key)
    if actual != if_version:
        raise VersionConflict(key, if_version, actual)
    return False


# -- transactions and topics (writer) -------------------------------------------------

_APPEND = "INSERT INTO events (topic, id, kind, data, at_ms, tainted) VALUES (?, ?, ?, ?, ?, ?)"
_SCHEDULE = (
    "INSERT OR REPLACE INTO scheduled (skey, due_ms, topic, id, kind, data, at_ms, tainted) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_CANCEL = "DELETE FROM scheduled WHERE skey = ?"
_ACK = "DELETE FROM pending WHERE topic = ? AND grp = ? AND seq = ? AND consumer = ?"
_HOLDS = "SELECT 1 FROM pending WHERE topic = ? AND grp = ? AND seq = ? AND consumer = ?"


def schedule_key(key: str) -> str:
    """The ``scheduled.skey`` of a publish key; unkeyed events use ``"e" + event id``."""
    return "k" + key


# A take: the group's next new event becomes pending for one consumer (its cursor moves).
_NEXT_NEW = (
    "SELECT seq, id, kind, data, at_ms, tainted FROM events WHERE topic = ?1 "
    "AND seq > (SELECT cursor FROM consumer_groups WHERE topic = ?1 AND grp = ?2) "
    "ORDER BY seq LIMIT 1"
)
_ADVANCE_CURSOR = "UPDATE consumer_groups SET cursor = ? WHERE topic = ? AND grp = ?"
_TAKE_PENDING = (
    "INSERT INTO pending (topic, grp, seq, consumer, delivered_ms, attempt) "
    "VALUES (?, ?, ?, ?, ?, 1)"
)


def commit(conn: sqlite3.Connection, ops: Sequence[Op]) -> tuple[list[int], list[Any]]:
    """Apply ``ops`` in order; return each put's new version (and 1 or 0 for each
    insert: whether it created its key), and what each take took.

    A conflict raises midway: the writer rolls this request's savepoint back, so
    nothing of the batch remains.
    """
    versions: list[int] = []
    taken: list[Any] = []
    for op in ops:
        if isinstance(op, PutOp):
            versions.append(put(conn, op.key, op.data, op.if_version, op.tainted))
        elif isinstance(op, InsertOp):
            versions.append(conn.execute(_CREATE, (op.key, op.data, op.tainted)).rowcount)
        elif isinstance(op, DeleteOp):
            delete(conn, op.key, op.if_version)
        elif isinstance(op, PublishOp):
            if op.after_ms == 0 and op.key is None:
                event = (op.topic, op.event_id, op.kind, op.data, op.at_ms, op.tainted)
                conn.execute(_APPEND, event)
            else:
                skey = schedule_key(op.key) if op.key is not None else "e" + op.event_id
                # at_ms is truncated to the millisecond; one more keeps it from being early.
                due_ms = op.at_ms + op.after_ms + (1 if op.after_ms else 0)
                row = (skey, due_ms, op.topic, op.event_id, op.kind)
                conn.execute(_SCHEDULE, (*row, op.data, op.at_ms, op.tainted))
        elif isinstance(op, CancelOp):
            conn.execute(_CANCEL, (schedule_key(op.key),))
        elif isinstance(op, AckOp):
            d = op.delivery
            conn.execute(_ACK, (d.topic, d.group, d.position, d.consumer))
        elif isinstance(op, HoldOp):
            d = op.delivery
            if conn.execute(_HOLDS, (d.topic, d.group, d.position, d.consumer)).fetchone() is None:
                raise DeliveryLost(d.topic, d.id, d.consumer)
        elif isinstance(op, CheckOp):
            actual = _version(conn, op.key)
            if actual != op.version:
                raise VersionConflict(op.key, op.version, actual)
        elif isinstance(op, TakeOp):
            row = conn.execute(_NEXT_NEW, (op.topic, op.group)).fetchone()
            if row is not None:
                seq = row[0]
                conn.execute(_ADVANCE_CURSOR, (seq, op.topic, op.group))
                conn.execute(_TAKE_PENDING, (op.topic, op.group, seq, op.consumer, now_ms()))
                taken.append((op, seq, *row[1:]))
    return versions, taken


def checkpoint(conn: sqlite3.Connection, restart: bool) -> tuple[int, int, int]:
    """Copy the WAL into the database; (whether it stopped short, frames in the WAL,
    frames copied).

    PASSIVE copies while writers go on; but as they go on it never catches up, and a
    WAL starts over only once every frame in it was copied. ``restart`` then copies the
    few frames written since, holding the write lock, so that the next commit writes
    the WAL from its start.
    """
    mode = "RESTART" if restart else "PASSIVE"
    row: tuple[int, int, int] = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
    return row


def ack(conn: sqlite3.Connection, topic: str, group: str, seq: Any, consumer: str) -> None:
    """Forget a pending delivery if ``consumer`` still holds it (nothing happens if it
    is gone, or went to another consumer: it stays pending for that one)."""
    conn.execute(_ACK, (topic, group, seq, consumer))


_EXTEND = (
    "UPDATE pending SET delivered_ms = ? WHERE topic = ? AND grp = ? AND seq = ? AND consumer = ?"
)


def extend(conn: sqlite3.Connection, topic: str, group: str, seq: Any, consumer: str) -> None:
    """Restart a pending delivery's visibility timeout if ``consumer`` still holds it."""
    conn.execute(_EXTEND, (now_ms(), topic, group, seq, consumer))


_TRIM = (
    "DELETE FROM events WHERE topic = ?1 "
    "AND seq <= (SELECT min(cursor) FROM consumer_groups WHERE topic = ?1) "
    "AND seq < coalesce((SELECT min(seq) FROM pending WHERE topic = ?1), 9223372036854775807)"
)


def trim(conn: sqlite3.Connection, topic: str) -> int:
    """Delete the events of ``topic`` every group passed and acked; how many."""
    return int(conn.execute(_TRIM, (topic,)).rowcount)


_BACKLOG = (
    "SELECT (SELECT count(*) FROM events WHERE topic = ?1 AND seq > g.cursor) "
    "+ (SELECT count(*) FROM pending WHERE topic = ?1 AND grp = ?2) "
    "FROM consumer_groups g WHERE g.topic = ?1 AND g.grp = ?2"
)
_HELD = "SELECT count(*) FROM events WHERE topic = ?"


def backlog(conn: sqlite3.Connection, topic: str, group: str) -> int:
    """Events of ``topic`` not yet acked by ``group`` (no group: all it holds)."""
    row = conn.execute(_BACKLOG, (topic, group)).fetchone()
    if row is None:
        row = conn.execute(_HELD, (topic,)).fetchone()
    return int(row[0])


def topics(conn: sqlite3.Connection, low: str, high: str | None) -> list[str]:
    """The topics with events or groups from ``low`` below ``high`` (None: no bound)."""
    bound, params = ("AND topic < ?", (low, high)) if high is not None else ("", (low,))
    names = {
        row[0]
        for table in ("events", "consumer_groups")
        for row in conn.execute(
            f"SELECT DISTINCT topic FROM {table} WHERE topic >= ? {bound}",
            params,
        )
    }
    return sorted(names)


def delete_topic(conn: sqlite3.Connection, topic: str) -> None:
    """Delete a topic's events and pending deliveries.

    Its groups stay, moved past every event ever written (seqs never come back), so a
    subscription still reading reads only what is published from now on.
    """
    conn.execute("DELETE FROM pending WHERE topic = ?", (topic,))
    conn.execute(
        "UPDATE consumer_groups SET cursor = (SELECT coalesce(max(seq), 0) FROM events) "
        "WHERE topic = ?",
        (topic,),
    )
    conn.execute("DELETE FROM events WHERE topic = ?", (topic,))


def drop_group(conn: sqlite3.Connection, topics: Sequence[str], group: str) -> None:
    """Forget ``group`` on each topic, with its pending deliveries."""
    for topic in topics:
        conn.execute("DELETE FROM pending WHERE topic = ? AND grp = ?", (topic, group))
        conn.execute("DELETE FROM consumer_groups WHERE topic = ? AND grp = ?", (topic, group))


_CREATE_GROUP = (
    "INSERT INTO consumer_groups (topic, grp, cursor) "
    "VALUES (?, ?, CASE WHEN ? THEN 0 ELSE (SELECT coalesce(max(seq), 0) FROM events) END) "
    "ON CONFLICT (topic, grp) DO NOTHING"
)


def create_groups(
    conn: sqlite3.Connection, topics: Sequence[str], group: str, start: StartFrom
) -> None:
    """Create ``group`` on each topic where it does not exist yet."""
    for topic in topics:
        conn.execute(_CREATE_GROUP, (topic, group, start == "begin"))


__all__ = [
    "BUSY_CODES",
    "SCHEMA_VERSION",
    "SYNCHRONOUS",
    "ack",
    "checkpoint",
    "commit",
    "create_groups",
    "delete",
    "delete_prefix",
    "delete_topic",
    "drop_group",
    "extend",
    "get",
    "get_many",
    "open_connection",
    "put",
    "scan_page",
    "schedule_key",
    "trim",
]
