"""What only the Redis mesh has: prefixes, URLs and passwords, its key layout, EVALSHA."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis
import redis.asyncio.connection as redis_connection
from redis.exceptions import RedisError

from plait.errors import ConfigError, MeshError, MeshUnavailable, PlaitError
from plait.mesh import Delivery, Entry, Mesh, open_mesh
from plait.mesh.redis import RedisMesh
from tests._support.deliveries import drain, next_within
from tests._support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

REDIS_URL = os.environ.get("PLAIT_TEST_REDIS", "redis://127.0.0.1:6379/0")

CLOSED_PORT_URL = "redis://:s3cret-pw@127.0.0.1:1/0?prefix=nowhere:"


def new_prefix() -> str:
    return f"plait-test-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    """A plain client on the test Redis; skips the test if Redis does not answer."""
    client = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        await client.ping()
    except (RedisError, OSError):
        await client.aclose()
        if os.environ.get("PLAIT_REQUIRE_SERVICES") == "1":
            pytest.fail(f"Redis does not answer at {REDIS_URL}")
        pytest.skip(f"Redis does not answer at {REDIS_URL}")
    yield client
    await client.aclose()


@pytest.fixture
async def prefixes(raw: aioredis.Redis) -> AsyncIterator[list[str]]:
    """A list to append fresh key prefixes to; every key under them is dropped after."""
    made: list[str] = []
    yield made
    for prefix in made:
        await drop_prefix(raw, prefix)


@pytest.fixture
def prefix(prefixes: list[str]) -> str:
    prefixes.append(new_prefix())
    return prefixes[-1]


@pytest.fixture
async def mesh(prefix: str) -> AsyncIterator[Mesh]:
    async with open_mesh(f"{REDIS_URL}?prefix={prefix}") as opened:
        yield opened


async def drop_prefix(raw: aioredis.Redis, prefix: str) -> None:
    """Delete every key under ``prefix`` (SCAN, never KEYS)."""
    doomed = [key async for key in raw.scan_iter(match=f"{prefix}*", count=1000)]
    if doomed:
        await raw.delete(*doomed)


async def keys_like(raw: aioredis.Redis, pattern: str) -> set[str]:
    return {key.decode() async for key in raw.scan_iter(match=pattern, count=1000)}


# -- prefixes and key layout --------------------------------------------------------


async def test_prefixes_isolate_keys_and_events(prefixes: list[str]) -> None:
    prefixes += [new_prefix(), new_prefix()]
    async with (
        open_mesh(f"{REDIS_URL}?prefix={prefixes[0]}") as one,
        open_mesh(f"{REDIS_URL}?prefix={prefixes[1]}") as two,
    ):
        await one.put("shared/key", "one")
        await two.put("shared/key", "two")
        await two.put("shared/only-two", 2)
        got_one, got_two = await one.get("shared/key"), await two.get("shared/key")
        assert got_one is not None and (got_one.value, got_one.version) == ("one", 1)
        assert got_two is not None and (got_two.value, got_two.version) == ("two", 1)
        assert [e.key async for e in one.scan("shared/")] == ["shared/key"]
        assert [e.key async for e in two.scan("shared/")] == ["shared/key", "shared/only-two"]

        sub_one = one.subscribe("topic", "g", "c")
        sub_two = two.subscribe("topic", "g", "c")
        await one.publish("topic", "n", "for one")
        await two.publish("topic", "n", "for two", after_ms=50, key="tick")
        await one.cancel("tick")  # another prefix's schedule: must not touch two's
        first = await next_within(sub_one, 2)
        second = await next_within(sub_two, 2)
        assert first is not None and first.data == "for one"
        assert second is not None and second.data == "for two"
        assert await drain(one, sub_one, "topic") == []
        assert await drain(two, sub_two, "topic") == []
        await sub_one.close()
        await sub_two.close()


async def test_every_key_is_under_the_prefix_and_cleanup_leaves_none(
    raw: aioredis.Redis, prefixes: list[str]
) -> None:
    prefix = new_prefix()
    prefixes.append(prefix)
    marker = uuid.uuid4().hex
    async with open_mesh(f"{REDIS_URL}?prefix={prefix}") as mesh:
        await mesh.put(f"k-{marker}", 1)
        sub = mesh.subscribe(f"t-{marker}", "g", "c")
        await mesh.publish(f"t-{marker}", "n", 1)
        await mesh.publish(f"t-{marker}", "n", 2, after_ms=60_000, key=f"s-{marker}")
        delivery = await next_within(sub, 2)
        assert delivery is not None
        await delivery.ack()
        await sub.close()
    touched = await keys_like(raw, f"*{marker}*")
    assert touched == {f"{prefix}kv:k-{marker}", f"{prefix}t:t-{marker}"}
    assert await keys_like(raw, f"{prefix}*") == touched | {
        f"{prefix}keys",
        f"{prefix}sched",
        f"{prefix}schedp",
    }
    await drop_prefix(raw, prefix)
    assert await keys_like(raw, f"{prefix}*") == set()


async def test_scan_index_agrees_with_kv_keys_after_deletes(
    mesh: Mesh, raw: aioredis.Redis, prefix: str
) -> None:
    for i in range(40):
        await mesh.put(f"k/{i:02d}", i)
    for i in range(0, 40, 3):
        assert await mesh.delete(f"k/{i:02d}") is True
    async with mesh.transact() as tx:
        tx.delete("k/01", if_version=1)
        tx.delete("k/02")
        tx.put("k/02", "back")
        tx.delete("k/never")
    await mesh.put("k/00", "again", if_version=0)
    members: list[Any] = await raw.zrange(f"{prefix}keys", 0, -1)
    index = {member.decode() for member in members}
    stored = {k.removeprefix(f"{prefix}kv:") for k in await keys_like(raw, f"{prefix}kv:*")}
    scanned = [e.key async for e in mesh.scan()]
    assert index == stored == set(scanned)
    assert "k/01" not in index and "k/00" in index and "k/02" in index and "k/03" not in index
    assert scanned == sorted(scanned)
    back = await mesh.get("k/02")
    assert back is not None and back.value == "back" and back.version == 1


async def test_scripts_run_by_evalsha_and_survive_script_flush(
    mesh: Mesh, raw: aioredis.Redis
) -> None:
    def evalsha_calls(stats: dict[str, dict[str, int]]) -> int:
        return int(stats.get("evalsha", {}).get("calls", 0))

    assert isinstance(mesh, RedisMesh)
    assert await raw.script_exists(mesh._commit_script.sha) == [True]  # loaded by open()
    before = evalsha_calls(await commandstats(raw))
    for i in range(10):
        await mesh.put("counter", i)
    assert evalsha_calls(await commandstats(raw)) - before >= 10
    await raw.script_flush()
    written = await mesh.put("counter", "after flush", if_version=10)
    assert written.version == 11
    sub = mesh.subscribe("flushed", "g", "c")
    await raw.script_flush()
    await mesh.publish("flushed", "n", "still delivered")
    delivery = await next_within(sub, 2)
    assert delivery is not None and delivery.data == "still delivered"
    await sub.close()


def counted_requests(client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The commands ``client`` sends from now on, by name."""
    sent: list[str] = []
    execute: Any = client.execute_command

    async def counted(*args: Any, **options: Any) -> Any:
        sent.append(str(args[0]))
        return await execute(*args, **options)

    monkeypatch.setattr(client, "execute_command", counted)
    return sent


def sent_by_mesh(mesh: RedisMesh, sub: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requests ``mesh`` writes to Redis from now on, each as its commands' names
    joined by ``+`` (a pipeline is one request), counted on every connection but those
    of the subscription ``sub``."""
    sent: list[str] = []
    cls = redis_connection.AbstractConnection
    send = cls.send_packed_command

    async def counted(conn: Any, command: Any, check_health: bool = True) -> None:
        pool = sub._client.connection_pool
        if conn not in pool._in_use_connections and conn not in pool._available_connections:
            data = command if isinstance(command, bytes) else b"".join(command)
            sent.append("+".join(command_names(data)))
        await send(conn, command, check_health)

    monkeypatch.setattr(cls, "send_packed_command", counted)
    return sent


def command_names(data: bytes) -> list[str]:
    """The name of each command in ``data``, requests in the Redis protocol."""
    names: list[str] = []
    at = 0
    while at < len(data):
        assert data[at : at + 1] == b"*"
        end = data.index(b"\r\n", at)
        count, at = int(data[at + 1 : end]), end + 2
        for i in range(count):
            end = data.index(b"\r\n", at)
            size, at = int(data[at + 1 : end]), end + 2
            if i == 0:
                names.append(data[at : at + size].decode().upper())
            at += size + 2
    return names


async def commandstats(raw: aioredis.Redis) -> dict[str, dict[str, int]]:
    info = await raw.info("commandstats")
    return {name.removeprefix("cmdstat_"): value for name, value in info.items()}


async def test_each_operation_is_one_round_trip(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(mesh, RedisMesh)
    sub = mesh.subscribe("trips", "g", "c")
    await mesh.publish("trips", "n", 1)
    delivery = await next_within(sub, 2)
    assert delivery is not None
    sent = sent_by_mesh(mesh, sub, monkeypatch)
    entry = await mesh.put("run", {"status": "ready"}, if_version=0)
    assert sent == ["EVALSHA"]
    assert await mesh.get("run") == entry and sent[1:] == ["HMGET"]
    async with mesh.transact() as tx:
        tx.put("run", {"status": "done"}, if_version=entry.version)
        tx.put("run/out/1", "output", if_version=0)
        tx.delete("scratch")
        tx.publish("trips", "next", 2)
        tx.publish("trips", "tick", 3, after_ms=60_000, key="tick:run")
        tx.cancel("tick:other")
        tx.ack(delivery)
    assert sent[2:] == ["EVALSHA"]
    await delivery.ack()
    assert await mesh.delete("run/out/1", if_version=1) is True
    assert sent[3:] == ["EVALSHA", "EVALSHA"]  # the ack: the commit script, held or not
    await sub.close()


async def test_concurrent_reads_share_a_pipeline_and_a_few_connections(
    mesh: Mesh, raw: aioredis.Redis, prefix: str
) -> None:
    # A read on the wire makes the reads that arrive meanwhile wait and go out together,
    # each its own HMGET in one pipeline: 200 reads at once open a few connections, not
    # 200 (each costs half a millisecond to open); a failed read fails alone.
    assert isinstance(mesh, RedisMesh)
    for i in range(0, 200, 2):
        await mesh.put(f"many/{i}", {"n": i})
    await raw.set(f"{prefix}kv:many/7", "foreign")  # not a hash: that read alone fails
    pool = mesh._client.connection_pool
    before = len(pool._available_connections) + len(pool._in_use_connections)
    got = await asyncio.gather(*(mesh.get(f"many/{i}") for i in range(200)), return_exceptions=True)
    assert isinstance(got[7], MeshError) and "WRONGTYPE" in str(got[7])
    for i, entry in enumerate(got):
        if i != 7:
            assert entry == (Entry(f"many/{i}", {"n": i}, 1) if i % 2 == 0 else None), i
    opened = len(pool._available_connections) + len(pool._in_use_connections) - before
    assert opened <= 2, opened
    await mesh.put("many/after", 1)  # the batcher is free again
    assert await mesh.get("many/after") == Entry("many/after", 1, 1)


async def test_scheduled_events_live_in_the_schedule_until_due(
    mesh: Mesh, raw: aioredis.Redis, prefix: str
) -> None:
    sub = mesh.subscribe("later", "g", "c")
    await mesh.publish("later", "tick", 1, after_ms=200, key="tick:a")
    await mesh.publish("later", "tick", 2, after_ms=200)
    await mesh.publish("later", "tick", 3, after_ms=200, key="tick:b")
    await mesh.cancel("tick:b")
    members = await raw.zrange(f"{prefix}sched", 0, -1)
    assert len(members) == 2 and b"k:tick:a" in members
    assert await raw.hlen(f"{prefix}schedp") == 2
    got = [await next_within(sub, 2), await next_within(sub, 2)]
    assert sorted(d.data for d in got if d is not None) == [1, 2]
    assert await raw.zcard(f"{prefix}sched") == 0 and await raw.hlen(f"{prefix}schedp") == 0
    await sub.close()


# -- blocking reads: on the group, and kept across a cancelled wait --------------------


async def test_what_a_commit_took_for_its_consumer_wakes_no_read(
    mesh: Mesh, raw: aioredis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no poll falls due during the test: every request the subscription sends is a read
    monkeypatch.setattr("plait.mesh._redis_delivery.BLOCK_MS", 10_000)
    sub = mesh.subscribe("mail", "g", "c")
    await mesh.publish("mail", "n", "first")
    first = await next_within(sub, 2)
    assert first is not None and first.data == "first"
    await first.ack()
    reader: Any = sub  # its own connection
    sent = counted_requests(reader._client, monkeypatch)
    got: list[Delivery] = []

    async def wait_next() -> None:
        got.append(await sub.__anext__())

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_next)
            tx = mesh.transact()
            tx.publish("mail", "n", "mine")
            tx.take("mail", "g", "c")
            taken = (await tx.commit()).taken
            assert [d.data for d in taken] == ["mine"]
            await mesh.publish("mail", "n", "theirs")
    # one blocking read, ended by "theirs" alone: "mine" woke nothing, and no poll
    # went looking for it
    assert [d.data for d in got] == ["theirs"] and sent == ["XREADGROUP"]
    # at least once: what the commit took is pending for its consumer until acked
    pending = await raw.xpending(f"{prefix}t:mail", "g")
    assert pending["pending"] == 2 and pending["consumers"] == [{"name": b"c", "pending": 2}]
    await taken[0].ack()
    await got[0].ack()
    assert (await raw.xpending(f"{prefix}t:mail", "g"))["pending"] == 0
    await sub.close()


async def test_a_read_outlives_the_cancelled_wait_that_started_it(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A blocking XREADGROUP hands entries to the consumer on the server: had the cancel
    # dropped its reply, they would come back only after the visibility timeout.
    monkeypatch.setattr("plait.mesh._redis_delivery.BLOCK_MS", 10_000)
    sub = mesh.subscribe("kept", "g", "c", visibility_timeout_ms=60_000)
    assert await next_within(sub, 0.2) is None  # polled; its read blocks on
    reader: Any = sub
    got: list[Delivery] = []

    async def wait_next() -> None:
        got.append(await sub.__anext__())

    for i in range(5):
        got.clear()
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_next)
            with anyio.fail_after(scaled(5)):
                while reader._reading is None:  # a blocking read is out
                    await anyio.sleep(0.001)
            await mesh.publish("kept", "n", i)
            tg.cancel_scope.cancel()
        if not got:
            arrived = await next_within(sub, 2)
            assert arrived is not None
            got.append(arrived)
        assert [(d.data, d.attempt) for d in got] == [(i, 1)]
    await sub.close()


# -- one timeout per operation ------------------------------------------------------


async def test_each_operation_on_a_server_that_never_answers_ends_at_the_timeout() -> None:
    with socket.socket() as silent:  # takes connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        mesh = open_mesh(f"redis://127.0.0.1:{port}/0?prefix=p:&timeout=0.3")
        tx = mesh.transact()
        tx.put("k", 1)
        sub = mesh.subscribe("t", "g", "c")
        for call in (
            lambda: mesh.get("k"),
            lambda: mesh.put("k", 1),
            lambda: mesh.publish("t", "n", 1),
            tx.commit,
            lambda: next_within(sub, 5),
        ):
            started = time.monotonic()
            with pytest.raises(MeshUnavailable, match=r"no answer within 0\.3s") as info:
                await call()
            took = time.monotonic() - started
            assert took < scaled(2), "one bound per operation, not per command"
            assert info.value.retryable
        # Operations at once wait behind the one on the wire, within the same bound.
        started = time.monotonic()
        results = await asyncio.gather(
            *(mesh.get(f"k{i}") for i in range(20)),
            *(mesh.put(f"k{i}", i) for i in range(20)),
            return_exceptions=True,
        )
        assert all(isinstance(r, MeshUnavailable) for r in results), results
        assert time.monotonic() - started < scaled(1.5)
        await mesh.close()


# -- URLs, passwords, unreachable servers --------------------------------------------


async def test_unreachable_redis_names_the_url_without_its_password() -> None:
    mesh = open_mesh(CLOSED_PORT_URL, connect_timeout=0.5)
    assert mesh.url == "redis://:***@127.0.0.1:1/0?prefix=nowhere:"
    started = time.monotonic()
    with pytest.raises(MeshUnavailable) as info:
        await mesh.open()
    took = time.monotonic() - started
    assert took < scaled(2), "a refused connection must not be retried"
    assert "redis://:***@127.0.0.1:1/0" in str(info.value)
    assert info.value.retryable
    tx = mesh.transact()
    tx.put("k", 1)
    sub = mesh.subscribe("t", "g", "c")
    for call in (
        lambda: mesh.get("k"),
        lambda: mesh.put("k", 1),
        lambda: mesh.publish("t", "n", 1),
        tx.commit,
        lambda: next_within(sub, 2),
    ):
        with pytest.raises(MeshUnavailable) as info:
            await call()
        assert "s3cret" not in str(info.value) and "***" in str(info.value)
    await mesh.close()


async def test_rediss_url_parses_without_connecting() -> None:
    mesh = open_mesh("rediss://user:s3cret-pw@127.0.0.1:1/3?prefix=app:", connect_timeout=0.5)
    assert isinstance(mesh, RedisMesh)
    assert mesh.url == "rediss://user:***@127.0.0.1:1/3?prefix=app:"
    assert mesh.prefix == "app:"
    kwargs = mesh._client.connection_pool.connection_kwargs
    assert kwargs["db"] == 3 and kwargs["password"] == "s3cret-pw" and "prefix" not in kwargs
    assert mesh._client.connection_pool.connection_class.__name__ == "SSLConnection"
    with pytest.raises(MeshUnavailable) as info:
        await mesh.open()
    assert "s3cret" not in str(info.value)
    await mesh.close()


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:notaport/0",
        "redis://127.0.0.1:6379/zero",
        "redis://:pw@127.0.0.1:6379/0?no_such_option=1",
    ],
)
def test_malformed_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_mesh(url)
    assert "pw@" not in str(info.value)


async def test_redis_errors_become_mesh_errors(
    mesh: Mesh, raw: aioredis.Redis, prefix: str
) -> None:
    await raw.set(f"{prefix}kv:not-a-hash", "foreign")
    with pytest.raises(MeshError) as info:
        await mesh.get("not-a-hash")
    assert isinstance(info.value, PlaitError) and "WRONGTYPE" in str(info.value)
    with pytest.raises(MeshError):
        await mesh.put("not-a-hash", 1)
    assert await raw.get(f"{prefix}kv:not-a-hash") == b"foreign"


# -- cancellation and close ---------------------------------------------------------


async def test_cancelled_reads_leave_the_mesh_working(mesh: Mesh) -> None:
    sub = mesh.subscribe("cancelled-reads", "g", "c")
    for delay in (0, 0.001, 0.005, 0.02, 0.05, 0.12) * 3:
        assert await next_within(sub, delay) is None
    await mesh.put("still", "fine")
    got = await mesh.get("still")
    assert got is not None and got.value == "fine"
    await mesh.publish("cancelled-reads", "n", "arrives")
    delivery = await next_within(sub, 2)
    assert delivery is not None and delivery.data == "arrives"
    assert delivery.attempt == 1
    await sub.close()


async def test_subscription_recovers_a_group_the_server_lost(
    mesh: Mesh, raw: aioredis.Redis, prefix: str
) -> None:
    sub = mesh.subscribe("lost", "g", "c")
    await mesh.publish("lost", "n", 1)
    first = await next_within(sub, 2)
    assert first is not None and first.data == 1
    await raw.delete(f"{prefix}t:lost")  # as after a restart without persistence
    assert await next_within(sub, 0.3) is None
    await mesh.publish("lost", "n", 2)
    second = await next_within(sub, 2)
    assert second is not None and second.data == 2 and second.attempt == 1
    await sub.close()


async def test_closing_the_mesh_ends_iteration_promptly(prefix: str) -> None:
    mesh = open_mesh(f"{REDIS_URL}?prefix={prefix}")
    await mesh.open()
    sub = mesh.subscribe("idle", "g", "c")
    ended_after: list[float] = []

    async def consume() -> None:
        async for _ in sub:
            pass
        ended_after.append(time.monotonic() - closed_at)

    reader: Any = sub
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        with anyio.fail_after(scaled(5)):
            while reader._reading is None:  # a blocking read is out
                await anyio.sleep(0.001)
        closed_at = time.monotonic()
        await mesh.close()
    # well under the socket timeout (scaled on a busy machine): the blocking read is
    # interrupted, not waited out
    ended = ended_after and ended_after[0] < scaled(0.5)
    assert ended, f"iteration ended {ended_after} s after close"
