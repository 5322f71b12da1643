"""Shared fixtures: the anyio backend, and a fresh mesh on every backend.

Each test that takes ``mesh`` runs once per backend: memory, a fresh SQLite file, and
the real Redis at 127.0.0.1:6379 under a key prefix of its own that is removed after.
The functions behind them live in :mod:`tests._support` (import them from there; the
names below stay importable from here for older imports).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests._support.bytecode import keep_bytecode

keep_bytecode()  # before the package and the test modules are imported

from plait.mesh import Mesh, open_mesh  # noqa: E402
from tests._support.meshes import (  # noqa: E402
    BACKENDS,
    REDIS_URL,
    REQUIRE_SERVICES,
    drop_redis_prefix,
    make_url_factory,
    redis_available,
)
from tests._support.timing import scaled, worker_count  # noqa: E402

# A `plait worker` a test starts is one serving process, as the tests of crashes and
# takeovers assume (they signal it by pid); the tests of `--processes` ask for more.
os.environ.setdefault("PLAIT_WORKER_PROCESSES", "1")

__all__ = [
    "BACKENDS",
    "REDIS_URL",
    "REQUIRE_SERVICES",
    "drop_redis_prefix",
    "make_url_factory",
    "redis_available",
]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default in ``pyproject.toml``): one test process per core, at
    most four, or ``PLAIT_TEST_WORKERS``."""
    return worker_count()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Name each item's ``xdist_group`` in its node id (``ID@GROUP``), so that ``--dist
    loadgroup`` sends a group's tests to one worker.

    pytest-xdist does that by setting ``item._nodeid``, which pytest 9 no longer reads
    (an item's id is its ``_id``): without this, each Ray test would start a cluster of
    its own on another worker, all at once.

    Also stretches the per-test timeout (``timeout`` in ``pyproject.toml``) of each test
    that sets none of its own, on a busy machine, as every deadline in the tests is.
    """
    default_timeout = float(config.getini("timeout") or 0)
    if default_timeout and not config.getoption("timeout", default=None):
        stretched = pytest.mark.timeout(scaled(default_timeout))
        for item in items:
            if item.get_closest_marker("timeout") is None:
                item.add_marker(stretched)
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
    scheme = mesh_url.split("://", 1)[0]
    return {"rediss": "redis", "postgresql": "postgres"}.get(scheme, scheme)


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
