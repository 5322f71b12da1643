"""Topic subscriptions between actors, on every runtime and mesh backend: a publish on a
subscribed topic reaches each subscriber's mailbox once, in publish order; later
subscribers start at their subscription (unless ``earliest``); prefixes follow new
topics; subscriptions outlive the runtime that served them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from plait.actors import (
    ActorContext,
    ActorRuntime,
    Mail,
    TopicRouter,
    subscribe,
    subscriptions,
    topic_event,
    unsubscribe,
)
from plait.actors.topics import SHARED_GROUP
from plait.errors import ActorError, VersionConflict
from plait.mesh import Mesh
from tests._support.deliveries import undelivered_mail
from tests._support.timing import scaled

from .conftest import MakeRuntime

pytestmark = pytest.mark.anyio

KIND = "topics:collect"


async def collect(ctx: ActorContext, mail: Mail) -> None:
    """Append each forwarded event's ``n`` to ``got/<actor>``, once, with the ack."""
    event = topic_event(mail.body)
    assert event is not None, mail.body
    while True:
        entry = await ctx.mesh.get(f"got/{ctx.id}")
        seen = [] if entry is None else list(entry.value)
        if any(item["id"] == event.id for item in seen):
            await mail.ack()
            return
        seen.append({"id": event.id, "topic": event.topic, "n": event.data["n"]})
        try:
            async with ctx.mesh.transact() as tx:
                tx.put(f"got/{ctx.id}", seen, if_version=0 if entry is None else entry.version)
                mail.ack_in(tx)
        except VersionConflict:
            continue
        return


HANDLERS = {KIND: collect}


async def got(mesh: Mesh, actor: str) -> list[dict[str, Any]]:
    entry = await mesh.get(f"got/{actor}")
    return [] if entry is None else list(entry.value)


async def until(mesh: Mesh, actor: str, count: int, timeout_s: float = 20.0) -> list[Any]:
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        items = await got(mesh, actor)
        if len(items) >= count:
            return items
        await anyio.sleep(0.02)
    raise AssertionError(f"{actor} got {await got(mesh, actor)} (wanted {count})")


@asynccontextmanager
async def serving(make_runtime: MakeRuntime) -> AsyncIterator[tuple[ActorRuntime, TopicRouter]]:
    runtime = make_runtime(handlers=HANDLERS)
    async with runtime, TopicRouter(runtime, refresh_s=0.05) as router:
        yield runtime, router


async def forwarding(router: TopicRouter, pairs: set[tuple[str, str]]) -> None:
    with anyio.fail_after(scaled(20)):
        while not pairs <= router.forwarding:
            await router.refreshed()


async def test_publish_reaches_every_subscriber_once_in_order(
    make_runtime: MakeRuntime, mesh: Mesh
) -> None:
    async with serving(make_runtime) as (rt, router):
        for name in ("w1", "w2", "w3"):
            await rt.create(name, KIND)
            await subscribe(mesh, name, "tasks.new")
        await forwarding(router, {(n, "tasks.new") for n in ("w1", "w2", "w3")})
        for n in range(15):
            await mesh.publish("tasks.new", "task", {"n": n})
        for name in ("w1", "w2", "w3"):
            items = await until(mesh, name, 15)
            assert [i["n"] for i in items] == list(range(15))
    # Stopped with nothing left to forward or handle: nothing more can arrive, so each
    # event reached each mailbox once.
    assert await mesh.backlog("tasks.new", SHARED_GROUP) == 0
    assert await undelivered_mail(mesh) == {}
    for name in ("w1", "w2", "w3"):
        assert len(await got(mesh, name)) == 15


async def test_later_subscriber_starts_now_unless_earliest(
    make_runtime: MakeRuntime, mesh: Mesh
) -> None:
    async with serving(make_runtime) as (rt, router):
        for name in ("early", "late", "replay"):
            await rt.create(name, KIND)
        await subscribe(mesh, "early", "news")
        await forwarding(router, {("early", "news")})
        for n in range(3):
            await mesh.publish("news", "item", {"n": n})
        await until(mesh, "early", 3)
        await anyio.sleep(0.002)  # a later millisecond than the last publish
        await subscribe(mesh, "late", "news")
        await subscribe(mesh, "replay", "news", start="earliest")
        await forwarding(router, {("late", "news"), ("replay", "news")})
        await mesh.publish("news", "item", {"n": 3})
        assert [i["n"] for i in await until(mesh, "late", 1)] == [3]
        assert [i["n"] for i in await until(mesh, "replay", 4)] == [0, 1, 2, 3]
        assert [i["n"] for i in await until(mesh, "early", 4)] == [0, 1, 2, 3]


async def test_prefix_wildcard_follows_topics_made_later(
    make_runtime: MakeRuntime, mesh: Mesh
) -> None:
    async with serving(make_runtime) as (rt, router):
        await rt.create("all", KIND)
        assert await subscribe(mesh, "all", "tasks.*") == {"tasks.*": pytest.approx(0, abs=1e13)}
        await mesh.publish("tasks.a", "task", {"n": 0})
        await mesh.publish("other.a", "task", {"n": -1})
        await mesh.publish("tasksx", "task", {"n": -2})
        await forwarding(router, {("all", "tasks.a")})
        await mesh.publish("tasks.b", "task", {"n": 1})
        items = await until(mesh, "all", 2)
        assert sorted((i["topic"], i["n"]) for i in items) == [("tasks.a", 0), ("tasks.b", 1)]
        assert ("all", "other.a") not in router.forwarding
        assert not any(t.startswith("actors.") for _, t in router.forwarding)


async def test_unsubscribe_stops_delivery(make_runtime: MakeRuntime, mesh: Mesh) -> None:
    async with serving(make_runtime) as (rt, router):
        for name in ("a", "b"):
            await rt.create(name, KIND)
            await subscribe(mesh, name, "t")
        await forwarding(router, {("a", "t"), ("b", "t")})
        await mesh.publish("t", "e", {"n": 0})
        await until(mesh, "a", 1)
        assert await unsubscribe(mesh, "a", "t") == {}
        assert await subscriptions(mesh, "a") == {}
        with anyio.fail_after(scaled(10)):
            while ("a", "t") in router.forwarding:
                await router.refreshed()
        await mesh.publish("t", "e", {"n": 1})
        # One forward puts an event in every subscriber's mailbox: once b has it, so
        # would a; handled once the runtime stops with no mail left.
        assert [i["n"] for i in await until(mesh, "b", 2)] == [0, 1]
    assert await undelivered_mail(mesh) == {}
    assert [i["n"] for i in await got(mesh, "a")] == [0]


async def test_subscriptions_outlive_the_runtime(make_runtime: MakeRuntime, mesh: Mesh) -> None:
    async with serving(make_runtime) as (rt, router):
        await rt.create("keeper", KIND)
        await subscribe(mesh, "keeper", "log")
        await forwarding(router, {("keeper", "log")})
        await mesh.publish("log", "e", {"n": 0})
        await until(mesh, "keeper", 1)
    await mesh.publish("log", "e", {"n": 1})  # while nothing serves
    async with serving(make_runtime) as (rt, router):
        items = await until(mesh, "keeper", 2)
        assert [i["n"] for i in items] == [0, 1]


async def test_bad_patterns_are_refused(mesh: Mesh) -> None:
    for bad in ("", "*", "a*b", "actors.mailbox.*", "actors.dead"):
        with pytest.raises(ActorError):
            await subscribe(mesh, "x", bad)
