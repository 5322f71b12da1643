"""``Mesh.topics(prefix)``: the topics that exist, by prefix, on every backend."""

from __future__ import annotations

import pytest

from plait.mesh import Mesh

pytestmark = pytest.mark.anyio


async def test_lists_topics_with_events_or_groups_by_prefix(mesh: Mesh) -> None:
    assert await mesh.topics("tasks.") == []
    await mesh.publish("tasks.new", "task", {"n": 1})
    await mesh.publish("tasks.done", "done")
    await mesh.publish("tasksx", "other")
    await mesh.publish("other.new", "other")
    sub = mesh.subscribe("tasks.empty", "g", "c")
    async with sub:
        await mesh.publish("tasks.empty", "poke")
        async for delivery in sub:
            await delivery.ack()
            break
    assert await mesh.topics("tasks.") == ["tasks.done", "tasks.empty", "tasks.new"]
    assert "other.new" in await mesh.topics()


async def test_prefix_with_glob_characters_is_literal(mesh: Mesh) -> None:
    await mesh.publish("a*b.x", "k")
    await mesh.publish("aXb.x", "k")
    await mesh.publish("a[b].y", "k")
    assert await mesh.topics("a*b.") == ["a*b.x"]
    assert await mesh.topics("a[b]") == ["a[b].y"]


async def test_a_deleted_topic_is_gone(mesh: Mesh) -> None:
    await mesh.publish("gone.t", "k")
    await mesh.delete_topic("gone.t")
    assert await mesh.topics("gone.") == []
