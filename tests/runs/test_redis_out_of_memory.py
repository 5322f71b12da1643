"""A Redis that is full (``maxmemory`` with ``noeviction``) is an outage that passes, not
a failure: its writes raise the retryable ``MeshUnavailable``, and a run that meets it
is tried again instead of failing for good.

Each test starts a Redis server of its own on a free port (killed by its pid after), so
filling it up touches nobody else's keys.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
from redis.exceptions import RedisError

import plait
from plait.errors import MeshUnavailable
from plait.mesh import open_mesh
from plait.programs import MeshCapability, Payload
from plait.runs import Runs
from tests._support.timing import scaled
from tests.api.server import free_port
from tests.runs.helpers import hosting, settle, store

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

FULL = 1
"""A ``maxmemory`` of one byte: every write Redis refuses with OOM."""


@pytest.fixture
def small_redis(tmp_path: Path) -> Iterator[redis.Redis]:
    """A Redis server of this test's own (noeviction, no persistence); a client on it."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
            "no", "--maxmemory-policy", "noeviction", "--dir", str(tmp_path)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=1)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except RedisError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"redis-server on port {port} did not start")
                time.sleep(0.05)
        yield client
    finally:
        client.close()
        proc.kill()
        proc.wait()


def url_of(client: redis.Redis) -> str:
    port = client.connection_pool.connection_kwargs["port"]
    return f"redis://127.0.0.1:{port}/0?prefix=oom:"


def oom_replies(client: redis.Redis) -> int:
    """How many commands the server refused as out of memory."""
    stats: dict[str, Any] = client.info("errorstats")
    return int(stats.get("errorstat_OOM", {}).get("count", 0))


async def test_a_full_redis_refuses_a_write_as_retryable_and_writes_nothing(
    small_redis: redis.Redis,
) -> None:
    async with open_mesh(url_of(small_redis)) as mesh:
        await mesh.put("k", 1)
        small_redis.config_set("maxmemory", FULL)
        with pytest.raises(MeshUnavailable, match="out of memory") as info:
            await mesh.put("k", 2)
        assert info.value.retryable
        with pytest.raises(MeshUnavailable, match="maxmemory"):
            await mesh.publish("news", "item", {"n": 1})
        assert oom_replies(small_redis) >= 2
        small_redis.config_set("maxmemory", 0)
        again = await mesh.put("k", 3)
    assert again.version == 2  # the refused write left nothing behind


@plait.program("test-fills-redis-once")
async def fills_redis_once(mesh: MeshCapability, payload: Payload) -> str:
    """The first time (no marker file yet): fill the Redis at ``payload.port`` and
    write to the mesh, then free it again; later times, just write."""
    marker = Path(payload.marker)
    if marker.exists():
        await mesh.put("notes/after", "written")
        return "written"
    marker.touch()
    server = redis.Redis(port=payload.port)
    server.config_set("maxmemory", FULL)
    try:
        await mesh.put("notes/during", "refused")
    finally:
        server.config_set("maxmemory", 0)
        server.close()
    return "unreachable"


async def test_a_run_that_meets_a_full_redis_is_tried_again_not_failed(
    small_redis: redis.Redis, tmp_path: Path
) -> None:
    port = small_redis.connection_pool.connection_kwargs["port"]
    graph = {
        "name": "full",
        "agent": "assistant",
        "entry": "write",
        "nodes": [
            {
                "id": "write",
                "type": "program",
                "ref": "test-fills-redis-once",
                "input": {"port": port, "marker": str(tmp_path / "filled")},
            }
        ],
    }
    async with open_mesh(url_of(small_redis)) as mesh:
        await store(mesh, graph)
        runs = Runs(mesh)
        async with hosting(mesh):
            started = await runs.start("assistant", "full", "go")
            with anyio.fail_after(scaled(60)):
                while True:
                    try:
                        rec = await settle(runs, started.run_id, timeout=30)
                        break
                    except MeshUnavailable:
                        # The wait itself met the full Redis (its watch is a write): it
                        # is retryable, and retried as a caller would.
                        await anyio.sleep(0.05)
        assert rec.status == "done", (rec.status, rec.error)
        assert await runs.output(rec) == "written"
        assert rec.usage.retries == 1
    assert oom_replies(small_redis) >= 1
