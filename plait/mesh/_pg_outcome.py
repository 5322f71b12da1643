"""One round trip per transaction, and what a connection lost meanwhile left behind.

A transaction of the PostgreSQL mesh goes in one pipeline: the query of its
transaction id, a Flush, its statements, the Sync that commits them. The Flush makes the server
send the transaction id at once, before it runs (or waits on a lock in) any statement,
so a connection lost later still tells which transaction it was. A lost connection
then settles the outcome on another connection with ``pg_xact_status`` (PostgreSQL's
way for a client to learn whether a transaction whose COMMIT it lost committed):

- ``aborted``: nothing applied; the mesh runs the transaction again;
- ``in progress``: the old backend has not noticed yet (a network cut): it is ended
  with ``pg_terminate_backend`` (only while it still runs that very transaction), and
  the status read again;
- ``committed``: it applied, but its answers (new versions) were lost with the
  connection: :class:`~plait.errors.MeshUnavailable`, the outcome known to the
  server only, as on every backend when a commit's answer is lost.

A connection the server closed before the transaction id came back ran nothing of it:
had the server run the id query, the Flush would have sent its answer ahead of any
commit, and a server that commits has read the whole pipeline, so it closes with a FIN
after all it sent, not a reset that may drop it. So a server's goodbye (its FATAL, or
the end of the stream) with no id before it means the transaction did not apply, and
it runs again; any other loss without an id (a reset, a timeout: the network, or a
host that crashed) leaves the outcome unknown. The pool checks each connection as it
hands it out, so one the server ended while it sat idle (a restart) is rarely used:
an idle connection has nothing to read, and one with something to read is dropped,
without a round trip.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import psycopg
from psycopg import AsyncCursor

from plait.mesh._pg_ops import Conn

XID = "SELECT pg_current_xact_id()::text"
"""The query that gives the transaction its id (and tells it to the client)."""

_STATUS = "SELECT pg_xact_status(%s::xid8)"
_END_OLD = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE pid = %s AND backend_xid::text = %s"
)

Outcome = Literal["committed", "aborted", "in progress", "unknown"]
"""What became of a transaction whose connection was lost: ``committed``, ``aborted``,
``in progress`` (its backend still runs it) or ``unknown`` (its id is too old)."""


async def unbroken(conn: Conn) -> None:
    """The pool's check of a connection it hands out: raises if the server ended it
    (an idle connection has nothing to read; see the module docstring)."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    ready, _w, _x = select.select([conn.pgconn.socket], [], [], 0)
    if ready:
        await conn.close()  # so the pool drops it and opens another
        raise psycopg.OperationalError("the server ended the idle connection")


def xid_of(cursor: AsyncCursor[Any] | None) -> str | None:
    """The transaction id a pipeline's :data:`XID` query answered, if its answer came
    back before the connection was lost."""
    result = None if cursor is None else cursor.pgresult
    if result is None or result.status != psycopg.pq.ExecStatus.TUPLES_OK or not result.ntuples:
        return None
    value = result.get_value(0, 0)
    return None if value is None else bytes(value).decode()


def closed_by_server(exc: BaseException) -> bool:
    """Whether a lost connection ended by the server's goodbye: its FATAL error (class
    57, operator intervention) or the end of the stream, not a reset or a timeout."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    return sqlstate.startswith("57P") or "server closed the connection" in str(exc)


async def status(conn: Conn, xid: str, pid: int) -> Outcome:
    """What became of transaction ``xid`` of backend ``pid``; a backend still running
    it is ended (its status is read again by the caller)."""
    cur = await conn.execute(_STATUS, (xid,))
    row = await cur.fetchone()
    found: Outcome = "unknown" if row is None or row[0] is None else row[0]
    if found == "in progress":
        # backend_xid is the 32-bit xid: the low half of the 64-bit one.
        await conn.execute(_END_OLD, (pid, str(int(xid) & 0xFFFFFFFF)))
    return found


_POLLS = 50
"""Reads of the status of a transaction whose backend was told to end (10 ms apart)."""


async def settle(
    read: Callable[..., Awaitable[Any]], xid: str | None, pid: int, cause: BaseException
) -> Outcome:
    """What became of the transaction ``xid`` (None: its id never came back) that backend
    ``pid`` ran when its connection was lost with ``cause``; ``aborted`` only when it
    provably did not apply. ``read(fn, *args)`` runs ``fn(conn, *args)`` on another
    connection."""
    if xid is None:
        return "aborted" if closed_by_server(cause) else "unknown"
    found: Outcome = "unknown"
    for _ in range(_POLLS):
        found = await read(status, xid, pid)
        if found != "in progress":
            return found
        await asyncio.sleep(0.01)  # its backend was told to end; it rolls back
    return found


__all__ = ["XID", "Outcome", "closed_by_server", "settle", "status", "unbroken", "xid_of"]
