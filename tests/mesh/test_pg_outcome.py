"""How the PostgreSQL mesh settles a one-round-trip transaction whose connection was
lost: by its transaction id, or, without one, by how the connection ended."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from plait.mesh import _pg_outcome as outcome
from tests._support.meshes import POSTGRES_URL, require_postgres

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


@pytest.fixture
async def admin() -> AsyncIterator[Conn]:
    """A plain connection to the test database."""
    require_postgres()
    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True)
    yield conn
    await conn.close()


async def _xid(conn: Conn) -> str:
    cur = await conn.execute(outcome.XID)
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


def _reading(admin: Conn) -> Any:
    async def read(fn: Any, *args: Any) -> Any:
        return await fn(admin, *args)

    return read


async def test_a_transaction_is_settled_by_its_id(admin: Conn) -> None:
    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL)
    try:
        committed = await _xid(conn)
        await conn.commit()
        aborted = await _xid(conn)
        await conn.rollback()
        running = await _xid(conn)
        pid = conn.info.backend_pid
        read = _reading(admin)
        cause = psycopg.OperationalError("lost")
        assert await outcome.settle(read, committed, pid, cause) == "committed"
        assert await outcome.settle(read, aborted, pid, cause) == "aborted"
        # Still running on a backend the client lost: that backend is ended, so the
        # transaction rolls back and is known not to have applied.
        assert await outcome.status(admin, running, pid) == "in progress"
        assert await outcome.settle(read, running, pid, cause) == "aborted"
    finally:
        await conn.close()


async def test_without_its_id_only_a_server_goodbye_proves_nothing_applied() -> None:
    async def read(fn: Any, *args: Any) -> Any:
        raise AssertionError("nothing to read: the id never came back")

    closed = psycopg.OperationalError("server closed the connection unexpectedly")
    reset = psycopg.OperationalError("could not receive data from server: Connection reset")
    assert await outcome.settle(read, None, 0, closed) == "aborted"
    assert await outcome.settle(read, None, 0, reset) == "unknown"
    assert await outcome.settle(read, None, 0, psycopg.errors.AdminShutdown()) == "aborted"


async def test_the_pool_drops_a_connection_the_server_ended(admin: Conn) -> None:
    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True)
    await outcome.unbroken(conn)  # idle, nothing to read
    await admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    for _ in range(500):  # the backend's goodbye arrives as it exits
        try:
            await outcome.unbroken(conn)
        except psycopg.OperationalError:
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail("a connection the server ended passed the pool's check")
    assert conn.closed
