"""Keys of plait's services are out of reach of the code given the mesh: an agent's
``mesh_put`` and a program's ``mesh.put`` refuse the same keys."""

from __future__ import annotations

import pytest

from plait.actors.backlog import BACKLOG_PREFIX
from plait.actors.leases import LEASE_PREFIX
from plait.actors.topics import SUBSCRIPTIONS_PREFIX
from plait.agents.store import AGENT_DATA_PREFIX
from plait.agents.tools import TurnEffects, TurnTools
from plait.errors import CapabilityMissing
from plait.mesh import Mesh, open_mesh
from plait.programs import grant_all, run_source
from plait.programs.capabilities import PROTECTED_PREFIXES, service_owned
from plait.runs.live import LIVE_PREFIX
from plait.runs.record import index_key, record_key
from plait.tools import ToolContext

pytestmark = pytest.mark.anyio

SERVICE_KEYS = [
    record_key("grun_0123"),
    index_key("grun_0123"),
    f"{LIVE_PREFIX}3/grun_0123",
    f"{BACKLOG_PREFIX}agent:a/m1",
    f"{SUBSCRIPTIONS_PREFIX}agent:a",
    f"{AGENT_DATA_PREFIX}a/state",
    f"{LEASE_PREFIX}7",
    "actors/run:grun_0123",
    "programs/p",
]


def test_every_service_prefix_is_protected() -> None:
    for prefix in (BACKLOG_PREFIX, SUBSCRIPTIONS_PREFIX, AGENT_DATA_PREFIX, LIVE_PREFIX):
        assert prefix in PROTECTED_PREFIXES
    assert all(service_owned(key) for key in SERVICE_KEYS)
    assert not service_owned("tasks/t1") and not service_owned("runs/r1/graph")


@pytest.fixture
async def mesh() -> Mesh:
    async with open_mesh("memory://") as opened:
        yield opened  # type: ignore[misc]


@pytest.mark.parametrize("key", SERVICE_KEYS)
async def test_an_agent_may_not_write_a_service_key(mesh: Mesh, key: str) -> None:
    tools = TurnTools(mesh, "agent:a", "m1", TurnEffects())
    with pytest.raises(CapabilityMissing, match="belongs to plait"):
        await tools.mesh_put({"key": key, "value": {}}, ToolContext())
    assert await mesh.get(key) is None
    await tools.mesh_put({"key": "tasks/t1", "value": {"done": True}}, ToolContext())


@pytest.mark.parametrize("key", SERVICE_KEYS)
async def test_a_program_may_not_write_a_service_key(mesh: Mesh, key: str) -> None:
    with pytest.raises(CapabilityMissing, match="belongs to a plait service"):
        await run_source(f"await mesh.put({key!r}, {{}})", None, grant_all(mesh))
    assert await mesh.get(key) is None
