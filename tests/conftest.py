"""Shared fixtures: the anyio backend, and a fresh mesh on every backend.

Each test that takes ``mesh`` runs once per backend: memory, a fresh SQLite file, and
the real Redis at 127.0.0.1:6379 under a key prefix of its own that is removed after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from plait.mesh import Mesh, open_mesh

REDIS_URL = os.environ.get("PLAIT_TEST_REDIS", "redis://127.0.0.1:6379/0")
BACKENDS = ["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)]
REQUIRE_SERVICES = os.environ.get("PLAIT_REQUIRE_SERVICES") == "1"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Name each item's ``xdist_group`` in its node id (``ID@GROUP``), so that ``--dist
    loadgroup`` sends a group's tests to one worker.

    pytest-xdist does that by setting ``item._nodeid``, which pytest 9 no longer reads
    (an item's id is its ``_id``): without this, each Ray test would start a cluster of
    its own on another worker, all at once.
    """
    if not config.getoption("loadgroup", default=False):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(names))
        if names and hasattr(item, "_id") and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def redis_available() -> bool:
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


def drop_redis_prefix(prefix: str) -> None:
    """Remove every key under ``prefix`` (tests only; SCAN, never KEYS)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        batch = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if batch:
            client.delete(*batch)
    finally:
        client.close()


def make_url_factory(backend: str, tmp_path: Path) -> tuple[Callable[[], str], Callable[[], None]]:
    """A function giving this test's mesh URL (same URL each call) and a cleanup."""
    if backend == "memory":
        return (lambda: "memory://"), (lambda: None)
    if backend == "sqlite":
        path = tmp_path / "mesh.db"
        return (lambda: f"sqlite:///{path}"), (lambda: None)
    if not redis_available():
        if REQUIRE_SERVICES:
            pytest.fail("Redis does not answer at 127.0.0.1:6379 (PLAIT_REQUIRE_SERVICES=1)")
        pytest.skip("Redis does not answer at 127.0.0.1:6379")
    prefix = f"plait-test-{uuid.uuid4().hex[:12]}:"
    return (lambda: f"{REDIS_URL}?prefix={prefix}"), (lambda: drop_redis_prefix(prefix))


@pytest.fixture(params=BACKENDS)
def mesh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """This test's mesh URL, once per backend."""
    url, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield url()
    finally:
        cleanup()


@pytest.fixture
def backend(mesh_url: str) -> str:
    """The backend name of ``mesh_url``."""
    return mesh_url.split("://", 1)[0].replace("rediss", "redis")


@pytest.fixture
async def mesh(mesh_url: str) -> AsyncIterator[Mesh]:
    """An open mesh on each backend, closed after the test."""
    async with open_mesh(mesh_url) as opened:
        yield opened


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A real local Ray cluster, started once per session (on the xdist worker that owns
    the ``ray`` group), this process connected to it as a driver; its address."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'plait[ray]'")
    from ray_cluster import connect, start_head

    cluster = start_head()
    try:
        ray = connect(cluster)
        try:
            yield cluster.address
        finally:
            ray.shutdown()
    finally:
        cluster.stop()
