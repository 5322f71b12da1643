"""The runtime fixture: every actor runtime, on every mesh backend.

``make_runtime`` builds a runtime of the kind under test on this test's mesh. A runtime
joins the conformance suite by adding its name to :data:`RUNTIMES` and a branch here
(skipping meshes it refuses, as a remote runtime refuses ``memory://``).

The ``ray`` runtime runs one host on the session's Ray cluster (``ray_cluster``), on
Redis only: its host is another process, which a memory or SQLite mesh cannot reach.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from plait.actors import ActorRuntime, Handler, LeasedRuntime, LocalRuntime
from plait.mesh import Mesh
from tests._support.timing import scaled

RUNTIMES = [
    "local",
    "leased",
    pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.xdist_group("ray")]),
]

LEASE_S = scaled(1.0)
"""Leases in tests: short, so a dead runtime's partitions move fast; longer on a busy
machine, where a starved event loop would otherwise let a live runtime's lease expire."""

MakeRuntime = Callable[..., ActorRuntime]
"""``make(handlers=..., host=None, services=None, visibility_timeout_ms=300,
max_attempts=5, drain_timeout_s=5.0)``: a runtime on this test's mesh, not started."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the Ray runtime on meshes it refuses by design (memory, SQLite): that
    refusal has a test of its own, so these pairs are not cases to run or skip."""
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        on_ray = params.get("runtime_name") == "ray"
        (dropped if on_ray and params.get("mesh_url") not in (None, "redis") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(params=RUNTIMES)
def runtime_name(request: pytest.FixtureRequest) -> str:
    """The runtime under test."""
    return str(request.param)


@pytest.fixture
def make_runtime(
    request: pytest.FixtureRequest, runtime_name: str, mesh: Mesh, mesh_url: str
) -> MakeRuntime:
    """A factory of runtimes of the kind under test on this test's mesh."""
    if runtime_name == "ray":
        if not mesh_url.startswith("redis"):
            pytest.skip("the Ray runtime refuses meshes in one process or file (memory, SQLite)")
        request.getfixturevalue("ray_cluster")

    def make(
        *,
        handlers: Mapping[str, Handler],
        host: str | None = None,
        services: object | None = None,
        visibility_timeout_ms: int = 300,
        max_attempts: int = 5,
        drain_timeout_s: float = 5.0,
    ) -> ActorRuntime:
        options: dict[str, Any] = {
            "handlers": handlers,
            "host": host,
            "services": services,
            "visibility_timeout_ms": visibility_timeout_ms,
            "max_attempts": max_attempts,
            "drain_timeout_s": drain_timeout_s,
        }
        if runtime_name == "local":
            return LocalRuntime(mesh, **options)
        if runtime_name == "leased":
            return LeasedRuntime(mesh, lease_s=LEASE_S, **options)
        if runtime_name == "ray":
            from plait.actors.ray import RayRuntime

            return RayRuntime(mesh, url=mesh_url, lease_s=LEASE_S, **options)
        raise AssertionError(f"no such runtime {runtime_name!r}")

    return make
