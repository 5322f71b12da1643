"""What the Ray runtime adds to the contract: meshes it refuses, and dedicated actors.

An actor whose config names ``resources`` runs in a Ray actor of its own holding them
(a custom resource the session's head offers one of), created on its first message and
released once idle; every other actor runs inside its host's process.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from plait.errors import ConfigError
from plait.mesh import Mesh, open_mesh

from .kinds import BEHAVE, KIND, REPORT_KIND, LogReader, report

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("url", ["memory://", "sqlite:///{tmp}/mesh.db"])
async def test_meshes_a_remote_host_cannot_share_are_refused(url: str, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from plait.actors.ray import RayRuntime

    async with open_mesh(url.format(tmp=tmp_path)) as mesh:
        with pytest.raises(ConfigError, match=r"Ray runtime cannot serve the mesh .* Redis"):
            RayRuntime(mesh)


@pytest.fixture
async def log(mesh: Mesh) -> AsyncIterator[LogReader]:
    reader = LogReader(mesh)
    yield reader
    await reader.close()


@pytest.mark.ray
@pytest.mark.redis
@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("mesh_url", ["redis"], indirect=True)
async def test_a_dedicated_actor_gets_its_resources_and_is_released_when_idle(
    ray_cluster: str, mesh_url: str, mesh: Mesh, log: LogReader
) -> None:
    import ray
    from ray_cluster import CUSTOM_RESOURCE

    from plait.actors.ray import RayRuntime

    def free() -> float:
        return float(ray.available_resources().get(CUSTOM_RESOURCE, 0))

    rt = RayRuntime(
        mesh,
        url=mesh_url,
        host="h",
        handlers={REPORT_KIND: report, KIND: BEHAVE},
        lease_s=1.0,
        visibility_timeout_ms=500,
        dedicated_idle_s=1.0,
    )
    async with rt:
        (host,) = rt.hosts
        await rt.create("gpu", REPORT_KIND, config={"resources": {CUSTOM_RESOURCE: 1}})
        await rt.create("plain", REPORT_KIND)
        assert free() == 1  # nothing dedicated before the first message
        await rt.tell("gpu", {"n": 1})
        await rt.tell("plain", {"n": 1})
        await log.count("report", 2)
        assert (await rt.info())[0]["dedicated"] == ["gpu"]
        assert free() == 0  # held by the dedicated actor
        await rt.tell("gpu", {"n": 2})
        await log.count("report", 3)
        first, second = log.of("report", "gpu")
        (plain,) = log.of("report", "plain")
        assert plain["pid"] == host["pid"] and plain["resources"].get(CUSTOM_RESOURCE) is None
        assert first["pid"] != host["pid"] and first["host"] == "h/gpu"
        assert first["resources"][CUSTOM_RESOURCE] == 1
        assert second["pid"] == first["pid"]  # kept while it has mail
        deadline = time.monotonic() + 15
        while (await rt.info())[0]["dedicated"] or free() != 1:
            assert time.monotonic() < deadline, "the idle dedicated actor was not released"
            await anyio.sleep(0.1)
        # A message after the release makes a new one.
        await rt.tell("gpu", {"n": 3})
        await log.count("report", 4)
        assert log.of("report", "gpu")[-1]["pid"] not in (first["pid"], host["pid"])
