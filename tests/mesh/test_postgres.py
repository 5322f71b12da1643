"""What only the PostgreSQL mesh has: its schema and migrations, its readable tables,
and riding out connections the server ends (``pg_terminate_backend``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg import sql

from plait.cli import app
from plait.errors import ConfigError, MeshUnavailable, VersionConflict
from plait.mesh import open_mesh
from plait.mesh._pg_schema import SCHEMA_VERSION
from plait.mesh.postgres import PostgresMesh
from tests._support.deliveries import next_within
from tests._support.meshes import (
    POSTGRES_URL,
    drop_postgres_schema,
    postgres_url,
    require_postgres,
)
from tests._support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name, dropped after the test."""
    require_postgres()
    name = f"plait_test_{uuid.uuid4().hex[:12]}"
    yield name
    drop_postgres_schema(name)


@pytest.fixture
async def admin() -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    """A plain connection to the test database, outside any mesh."""
    require_postgres()
    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True)
    yield conn
    await conn.close()


async def test_the_schema_is_created_versioned_and_migrated_once(schema: str) -> None:
    url = postgres_url(schema)
    async with open_mesh(url) as mesh:
        assert "migrated from version 0" in await mesh.migrate()
        await mesh.put("k", {"v": 1})
    async with open_mesh(url) as again:
        said = await again.migrate()
        assert f"at version {SCHEMA_VERSION}, nothing to migrate" in said
        got = await again.get("k")
        assert got is not None and got.value == {"v": 1}


async def test_concurrent_opens_of_a_new_schema_create_it_once(schema: str) -> None:
    meshes = [open_mesh(postgres_url(schema)) for _ in range(4)]
    await asyncio.gather(*(m.open() for m in meshes))
    said = [await m.migrate() for m in meshes]
    assert sum("migrated from version 0" in s for s in said) == 1
    for mesh in meshes:
        await mesh.close()


async def test_a_schema_newer_than_plait_is_refused(
    schema: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    async with open_mesh(postgres_url(schema)):
        pass
    await admin.execute(
        sql.SQL("UPDATE {}.schema_version SET version = 99").format(sql.Identifier(schema))
    )
    with pytest.raises(ConfigError, match="version 99, newer than this plait"):
        async with open_mesh(postgres_url(schema)):
            pass


async def test_the_tables_read_plainly(
    schema: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    async with open_mesh(postgres_url(schema)) as mesh:
        await mesh.put("runs/1", "x")
        await mesh.put("runs/1", "y")
        sub = mesh.subscribe("jobs", "workers", "w1")
        await mesh.publish("jobs", "job", 1)
        await mesh.publish("jobs", "job", 2, after_ms=60_000, key="later")
        assert await next_within(sub, 3) is not None
        await sub.close()
    name = sql.Identifier(schema)
    cur = await admin.execute(sql.SQL("SELECT key, version FROM {}.kv").format(name))
    assert await cur.fetchall() == [("runs/1", 2)]
    cur = await admin.execute(sql.SQL("SELECT topic, seq, kind FROM {}.events").format(name))
    assert await cur.fetchall() == [("jobs", 1, "job")]
    cur = await admin.execute(
        sql.SQL("SELECT topic, grp, cursor FROM {}.consumer_groups").format(name)
    )
    assert await cur.fetchall() == [("jobs", "workers", 1)]
    cur = await admin.execute(
        sql.SQL("SELECT grp, seq, consumer, attempt FROM {}.pending").format(name)
    )
    assert await cur.fetchall() == [("workers", 1, "w1", 1)]
    cur = await admin.execute(sql.SQL("SELECT skey, topic FROM {}.scheduled").format(name))
    assert await cur.fetchall() == [("klater", "jobs")]


async def test_an_unreachable_server_is_unavailable_with_the_password_masked() -> None:
    mesh = open_mesh("postgresql://plait:s3cret-pw@127.0.0.1:1/db", connect_timeout=2)
    with pytest.raises(MeshUnavailable) as info:
        await mesh.open()
    assert "s3cret-pw" not in str(info.value) and "***" in str(info.value)
    await mesh.close()


async def _backends(
    admin: psycopg.AsyncConnection[tuple[object, ...]], app_name: str, waiting: bool
) -> list[int]:
    cur = await admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
        + (" AND wait_event_type = 'Lock'" if waiting else ""),
        (app_name,),
    )
    return [int(row[0]) for row in await cur.fetchall()]


async def test_a_connection_killed_mid_transaction_is_retried_and_applies_once(
    schema: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    app_name = f"plait-test-{uuid.uuid4().hex[:8]}"
    url = postgres_url(schema) + f"&application_name={app_name}"
    async with open_mesh(url) as mesh:
        await mesh.put("counter", 1)
        # Hold the key's row, so that the mesh's transaction stops midway on its lock.
        holder = await psycopg.AsyncConnection.connect(POSTGRES_URL)
        try:
            await holder.execute(
                sql.SQL("SELECT 1 FROM {}.kv WHERE key = 'counter' FOR UPDATE").format(
                    sql.Identifier(schema)
                )
            )
            tx = mesh.transact()
            tx.put("counter", 2, if_version=1)
            tx.publish("counted", "n", 2)
            writing = asyncio.ensure_future(tx.commit())
            async with asyncio.timeout(scaled(10)):
                while not (waiting := await _backends(admin, app_name, waiting=True)):
                    await asyncio.sleep(0.01)
            for pid in waiting:
                await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        finally:
            await holder.close()  # its lock goes with it
        result = await writing  # retried on a new connection: it had not committed
        assert result.entries["counter"].version == 2
        got = await mesh.get("counter")
        assert got is not None and got.value == 2 and got.version == 2
        assert await mesh.backlog("counted", "g") == 1  # published once


async def test_idle_connections_killed_by_the_server_are_replaced(
    schema: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    app_name = f"plait-test-{uuid.uuid4().hex[:8]}"
    url = postgres_url(schema) + f"&application_name={app_name}"
    async with open_mesh(url) as mesh:
        sub = mesh.subscribe("after-restart", "g", "c")
        await mesh.put("k", 1)
        await mesh.publish("after-restart", "n", 1)
        first = await next_within(sub, 3)
        assert first is not None
        await first.ack()
        # What a server restart does to every connection: the pool's and the listener's.
        for pid in await _backends(admin, app_name, waiting=False):
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert (await mesh.put("k", 2, if_version=1)).version == 2
        assert (await mesh.get("k")) is not None
        await mesh.publish("after-restart", "n", 2)
        second = await next_within(sub, 5)  # the listener came back, or the fallback ask
        assert second is not None and second.data == 2
        await sub.close()


async def test_a_conflict_inside_a_transaction_rolls_back_everything(schema: str) -> None:
    async with open_mesh(postgres_url(schema)) as mesh:
        await mesh.put("a", 1)
        tx = mesh.transact()
        tx.put("b", 1)
        tx.publish("t", "n", 1)
        tx.put("a", 2, if_version=7)
        with pytest.raises(VersionConflict):
            await tx.commit()
        assert await mesh.get("b") is None
        assert await mesh.backlog("t", "g") == 0


def test_plait_mesh_migrate_says_what_it_did(schema: str) -> None:
    from typer.testing import CliRunner

    url = postgres_url(schema)
    first = CliRunner().invoke(app, ["mesh", "migrate", "--mesh", url])
    assert first.exit_code == 0, first.output
    assert f"migrated from version 0 to {SCHEMA_VERSION}" in first.output
    second = CliRunner().invoke(app, ["mesh", "migrate", "--mesh", url])
    assert second.exit_code == 0 and "nothing to migrate" in second.output


def test_a_value_limit_over_postgres_ceiling_is_refused() -> None:
    with pytest.raises(ConfigError, match="1 GiB"):
        PostgresMesh("postgresql://h/db", max_value_bytes=2 << 30)


async def test_a_connection_goes_on_after_batches_its_server_refused(schema: str) -> None:
    # A batch is sent in one pipeline; one whose expectation the server refuses stops
    # midway, and its connection must serve the next batches as if nothing happened.
    async with open_mesh(postgres_url(schema) + "&pool=1") as mesh:
        await mesh.put("k", 1)
        for n in range(8):
            tx = mesh.transact()
            tx.put("other", n)
            tx.publish("t", "n", n)
            tx.put("k", 2, if_version=7)
            with pytest.raises(VersionConflict):
                await tx.commit()
            async with mesh.transact() as tx:
                tx.put(f"fine/{n}", n, if_version=0)
                tx.publish("t", "n", n)
        assert await mesh.get("other") is None
        assert [e.key async for e in mesh.scan("fine/")] == [f"fine/{n}" for n in range(8)]
        assert await mesh.backlog("t", "g") == 8
