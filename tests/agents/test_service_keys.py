"""Keys and topics of plait's services are out of reach of the code given the mesh: an
agent's ``mesh_put``/``mesh_publish`` and a program's ``mesh.put``/``mesh.publish`` refuse
the same keys and topics, and every service's exported namespace is among them."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import plait
from plait.actors import DEAD_LETTER_TOPIC
from plait.actors.backlog import BACKLOG_PREFIX
from plait.actors.leases import LEASE_PREFIX
from plait.actors.partitions import mailbox_topic
from plait.actors.topics import SUBSCRIPTIONS_PREFIX
from plait.agents.store import AGENT_DATA_PREFIX
from plait.agents.tools import TurnEffects, TurnTools
from plait.errors import CapabilityMissing
from plait.mesh import Mesh, open_mesh
from plait.programs import grant_all, run_source
from plait.programs.capabilities import (
    PROTECTED_PREFIXES,
    PROTECTED_TOPICS,
    service_owned,
    service_topic,
)
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


def exported_namespaces() -> dict[str, tuple[list[str], list[str]]]:
    """Every module of plait that exports ``MESH_KEYS`` or ``MESH_TOPICS``: its key
    prefixes and topics (each store says what it owns, next to its own constants)."""
    found: dict[str, tuple[list[str], list[str]]] = {}
    for info in pkgutil.walk_packages(plait.__path__, "plait."):
        module = importlib.import_module(info.name)
        keys = list(getattr(module, "MESH_KEYS", ()))
        topics = list(getattr(module, "MESH_TOPICS", ()))
        if keys or topics:
            found[info.name] = (keys, topics)
    return found


def test_every_namespace_a_service_exports_is_protected_and_nothing_else() -> None:
    namespaces = exported_namespaces()
    assert len(namespaces) >= 15  # the walk found the stores
    keys = [k for owned, _ in namespaces.values() for k in owned]
    topics = [t for _, owned in namespaces.values() for t in owned]
    for module, (owned_keys, owned_topics) in namespaces.items():
        for prefix in owned_keys:
            assert service_owned(prefix) and service_owned(prefix + "x"), (module, prefix)
        for topic in owned_topics:
            assert service_topic(topic) and service_topic(topic + "{3}"), (module, topic)
    # and each protected prefix is some service's, so the guard holds no stale entry
    for guard in PROTECTED_PREFIXES:
        assert any(k.startswith(guard) for k in keys), f"no service exports {guard!r}"
    for guard in PROTECTED_TOPICS:
        assert any(t.startswith(guard) for t in topics), f"no service exports {guard!r}"


RUNTIME_TOPICS = [
    mailbox_topic(52),
    mailbox_topic(0),
    DEAD_LETTER_TOPIC,
    "decisions",
    "runs/grun_0123/events",  # a run's namespace, topics included
]


@pytest.mark.parametrize("topic", RUNTIME_TOPICS)
async def test_an_agent_may_not_publish_on_a_runtime_topic(mesh: Mesh, topic: str) -> None:
    effects = TurnEffects()
    tools = TurnTools(mesh, "agent:a", "m1", effects)
    body = {"to": "agent:victim", "body": {"text": "run the deploy"}}
    with pytest.raises(CapabilityMissing, match="belongs to plait"):
        await tools.mesh_publish({"topic": topic, "kind": "mail", "data": body}, ToolContext())
    assert effects.publishes == []
    await tools.mesh_publish({"topic": "tasks.new", "kind": "task"}, ToolContext())
    assert [p[0] for p in effects.publishes] == ["tasks.new"]


@pytest.mark.parametrize("topic", RUNTIME_TOPICS)
async def test_a_program_may_not_publish_on_a_runtime_topic(mesh: Mesh, topic: str) -> None:
    with pytest.raises(CapabilityMissing, match="belongs to the plait runtime"):
        await run_source(f"await mesh.publish({topic!r}, 'mail', {{}})", None, grant_all(mesh))
    assert await mesh.topics(topic) == []


async def test_a_program_schedule_key_never_replaces_a_services_event(mesh: Mesh) -> None:
    sub = mesh.subscribe("runtime.ticks", "g", "c")
    await mesh.publish("setup", "n", 0)
    await mesh.publish("runtime.ticks", "tick", "service", after_ms=100, key="tick:grun_1")
    text = "await mesh.publish('mine', 'tick', 'program', after_ms=100, key='tick:grun_1')"
    await run_source(text, None, grant_all(mesh))
    delivery = await sub.__anext__()
    assert (delivery.topic, delivery.data) == ("runtime.ticks", "service")
    await sub.close()
