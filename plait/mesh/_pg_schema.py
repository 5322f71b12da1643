"""The tables of the PostgreSQL mesh, and their migrations.

Every table lives in the mesh's own schema (``?schema=NAME``, default ``plait``), which
is the connections' ``search_path``, so one database can hold several meshes. Text
columns compare with the ``"C"`` collation: bytewise on UTF-8, which is code point
order, the key order every backend scans in.

- ``kv``: one row per key: ``key``, ``value`` (the msgpack bytes), ``version``
  (1 after the first write), ``tainted``.
- ``topics``: one row per topic ever published to: ``last_seq``, the highest event
  sequence number it handed out. Publishers lock this row to number their events, so
  a topic's events commit in sequence order and a group's cursor never passes an event
  that commits later.
- ``events``: ``(topic, seq)`` and the event (``id``, ``kind``, ``data``, ``at_ms``,
  ``tainted``).
- ``consumer_groups``: ``(topic, grp)`` and ``cursor``, the last seq handed out.
- ``pending``: ``(topic, grp, seq)`` delivered and not acked: ``consumer``,
  ``delivered_ms``, ``attempt``.
- ``scheduled``: delayed events by ``skey`` (``k`` + the publish key, ``e`` + the
  event id when unkeyed), ``due_ms``, and the event.
- ``live_heads``, ``live_items``, ``live_watchers`` (version 2): the live channels
  (see :mod:`plait.mesh._pg_live`): per channel its window (``first``, ``last``,
  ``bytes``), its items by ``(channel, off)``, and how many watchers have it open;
  ``live_append(channel, items, keep, notify)`` appends in one call; and
  ``mesh_refuse(what, key, expected)``, which a one-round-trip transaction calls to
  fail itself where an expectation does not hold (see :mod:`plait.mesh._pg_batch`).
- ``schema_version``: one row, the version below.

Every query the mesh makes has an index: the primary keys serve ``kv`` reads, CAS
writes and scans (a range on ``key``), ``events`` reads by topic past a cursor,
``consumer_groups`` and ``pending`` by group; ``pending_by_group`` serves the search for
expired deliveries, and ``scheduled_by_topic`` the search for due events. Plans of the
hot queries (PostgreSQL 15, ``EXPLAIN`` of each prepared statement, on a mesh of 100,000
keys and 100,000 events over 64 partition topics, 500 pending, 20,000 scheduled)::

    -- a CAS put
    UPDATE kv SET value = $1, version = version + 1, tainted = $2
        WHERE key = $3 AND version = $4 RETURNING version
    Update on kv
      ->  Index Scan using kv_pkey on kv
            Index Cond: (key = 'runs/5'::text)
            Filter: (version = '1'::bigint)

    -- the latest key under a prefix (scan reverse=True, limit=1)
    SELECT key, value, version, tainted FROM kv
        WHERE key >= $1 AND key < $2 ORDER BY key DESC LIMIT $3
    Limit
      ->  Index Scan Backward using kv_pkey on kv
            Index Cond: ((key >= 'runs/1'::text) AND (key < 'runs/2'::text))

    -- a claim's next events of one group on one topic
    SELECT seq, id, kind, data, at_ms, tainted FROM events
        WHERE topic = $1 AND seq > $2 ORDER BY seq LIMIT $3
    Limit
      ->  Sort  (Sort Key: seq)
            ->  Bitmap Heap Scan on events
                  ->  Bitmap Index Scan on events_pkey
                        Index Cond: ((topic = 'part/3'::text) AND (seq > '99000'::bigint))

    -- a claim's expired deliveries
    SELECT topic, grp, seq FROM pending WHERE grp = $1 AND topic = ANY ($2)
        AND delivered_ms <= $3 ORDER BY delivered_ms LIMIT $4 FOR UPDATE SKIP LOCKED
    Limit
      ->  LockRows
            ->  Sort  (Sort Key: delivered_ms)
                  ->  Bitmap Heap Scan on pending
                        Filter: (topic = ANY ('{part/1,part/2}'::text[]))
                        ->  Bitmap Index Scan on pending_by_group
                              Index Cond: ((grp = 'workers'::text)
                                           AND (delivered_ms <= '90100'::bigint))

    -- a claim's due scheduled events
    SELECT skey FROM scheduled WHERE topic = ANY ($1) AND due_ms <= $2
        ORDER BY due_ms, skey LIMIT 64 FOR UPDATE SKIP LOCKED
    Limit
      ->  LockRows
            ->  Sort  (Sort Key: due_ms, skey COLLATE "C")
                  ->  Bitmap Heap Scan on scheduled
                        ->  Bitmap Index Scan on scheduled_by_topic
                              Index Cond: ((topic = ANY ('{part/1,part/2}'::text[]))
                                           AND (due_ms <= '100'::bigint))

    -- the topics of a group with new events (64 groups: a scan of the small table)
    SELECT g.topic, g.cursor FROM consumer_groups g WHERE g.grp = $1
        AND g.topic = ANY ($2) AND EXISTS (SELECT 1 FROM events e
        WHERE e.topic = g.topic AND e.seq > g.cursor) ... FOR UPDATE OF g SKIP LOCKED
    LockRows
      ->  Sort
            ->  Nested Loop Semi Join
                  ->  Seq Scan on consumer_groups g
                  ->  Index Scan using events_pkey on events e
                        Index Cond: ((topic = g.topic) AND (seq > g.cursor))
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 2
"""The layout this plait writes; :func:`migrations` brings an older schema up to it."""

DEFAULT_SCHEMA = "plait"
"""The schema a URL without ``?schema=`` uses."""

SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
"""A schema name the mesh accepts: a plain lower-case identifier (no quoting needed)."""

_V1 = """
CREATE TABLE kv (
    key text COLLATE "C" PRIMARY KEY,
    value bytea NOT NULL,
    version bigint NOT NULL,
    tainted boolean NOT NULL DEFAULT false
);
CREATE TABLE topics (
    topic text COLLATE "C" PRIMARY KEY,
    last_seq bigint NOT NULL
);
CREATE TABLE events (
    topic text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    id text NOT NULL,
    kind text NOT NULL,
    data bytea NOT NULL,
    at_ms bigint NOT NULL,
    tainted boolean NOT NULL DEFAULT false,
    PRIMARY KEY (topic, seq)
);
CREATE TABLE consumer_groups (
    topic text COLLATE "C" NOT NULL,
    grp text COLLATE "C" NOT NULL,
    cursor bigint NOT NULL,
    PRIMARY KEY (topic, grp)
);
CREATE TABLE pending (
    topic text COLLATE "C" NOT NULL,
    grp text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    consumer text NOT NULL,
    delivered_ms bigint NOT NULL,
    attempt integer NOT NULL,
    PRIMARY KEY (topic, grp, seq)
);
CREATE INDEX pending_by_group ON pending (grp, delivered_ms);
CREATE TABLE scheduled (
    skey text COLLATE "C" PRIMARY KEY,
    due_ms bigint NOT NULL,
    topic text COLLATE "C" NOT NULL,
    id text NOT NULL,
    kind text NOT NULL,
    data bytea NOT NULL,
    at_ms bigint NOT NULL,
    tainted boolean NOT NULL DEFAULT false
);
CREATE INDEX scheduled_by_topic ON scheduled (topic, due_ms);
"""

_V2 = """
CREATE TABLE live_heads (
    channel text COLLATE "C" PRIMARY KEY,
    first bigint NOT NULL,
    last bigint NOT NULL,
    bytes bigint NOT NULL
);
CREATE TABLE live_items (
    channel text COLLATE "C" NOT NULL,
    off bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (channel, off)
);
CREATE TABLE live_watchers (
    channel text COLLATE "C" PRIMARY KEY,
    n bigint NOT NULL
);
CREATE FUNCTION live_append(ch text, items bytea[], keep bigint, notify text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    h_first bigint;
    h_last bigint;
    h_bytes bigint;
    gone bigint;
    i int;
BEGIN
    INSERT INTO live_heads (channel, first, last, bytes) VALUES (ch, 1, 0, 0)
        ON CONFLICT (channel) DO NOTHING;
    SELECT first, last, bytes INTO h_first, h_last, h_bytes
        FROM live_heads WHERE channel = ch FOR UPDATE;
    FOR i IN 1 .. coalesce(array_length(items, 1), 0) LOOP
        h_last := h_last + 1;
        h_bytes := h_bytes + length(items[i]);
        INSERT INTO live_items (channel, off, data) VALUES (ch, h_last, items[i]);
    END LOOP;
    WHILE h_bytes > keep AND h_first < h_last LOOP
        DELETE FROM live_items WHERE channel = ch AND off = h_first
            RETURNING length(data) INTO gone;
        h_bytes := h_bytes - coalesce(gone, 0);
        h_first := h_first + 1;
    END LOOP;
    UPDATE live_heads SET first = h_first, last = h_last, bytes = h_bytes WHERE channel = ch;
    PERFORM pg_notify(notify, h_last || ' ' || ch);
    RETURN h_last;
END
$$;
"""

_V2 += """
CREATE FUNCTION mesh_refuse(what text, key text, expected bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'plait:' || what, DETAIL = key,
        HINT = expected::text;
END
$$;
"""

MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2}
"""The DDL that brings a schema from version ``n - 1`` to ``n``."""


def migrations(current: int) -> list[tuple[int, str]]:
    """The steps from ``current`` to :data:`SCHEMA_VERSION`, in order."""
    return [(n, MIGRATIONS[n]) for n in range(current + 1, SCHEMA_VERSION + 1)]


def lock_id(schema: str) -> int:
    """The advisory lock migrations of ``schema`` take, so that processes opening a new
    mesh at once create it one at a time (a stable 63-bit number from the name)."""
    value = 1469598103934665603
    for byte in f"plait-mesh:{schema}".encode():
        value = ((value ^ byte) * 1099511628211) % (1 << 63)
    return value


__all__ = [
    "DEFAULT_SCHEMA",
    "MIGRATIONS",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "lock_id",
    "migrations",
]
