"""The local actor runtime: activation, ordering, redelivery, stop, idleness."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from plait.actors import DEAD_LETTER_TOPIC, ActorContext, LocalRuntime, Mail
from plait.errors import ActorError, ActorNotFound
from plait.mesh import Mesh, open_mesh
from tests._support.deliveries import undelivered_mail
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, int]] = []
        self.event = anyio.Event()
        self.expected = 0

    async def __call__(self, ctx: ActorContext, mail: Mail) -> None:
        assert ctx.self().id == mail.actor_id == ctx.id
        self.seen.append((ctx.id, mail.body, mail.delivery.attempt))
        if len(self.seen) >= self.expected:
            self.event.set()


async def test_tell_runs_the_handler_once(mesh: Mesh) -> None:
    rec = Recorder()
    rec.expected = 3
    async with LocalRuntime(mesh, handlers={"t:rec": rec}, visibility_timeout_ms=300) as rt:
        await rt.create("a1", "t:rec")
        for i in range(3):
            await rt.tell("a1", {"n": i})
        with anyio.fail_after(scaled(5)):
            await rec.event.wait()
    assert await undelivered_mail(mesh) == {}  # every message acked: none can come again
    assert rec.seen == [("a1", {"n": i}, 1) for i in range(3)]


async def test_create_twice_and_unknown_actor() -> None:
    async with open_mesh("memory://") as mesh:
        rt = LocalRuntime(mesh)
        await rt.create("x", "t:rec")
        with pytest.raises(ActorError):
            await rt.create("x", "t:rec")
        assert (await rt.create("x", "t:other", exist_ok=True)).kind == "t:rec"
        with pytest.raises(ActorNotFound):
            await rt.get("nobody")


async def test_one_message_at_a_time_in_order() -> None:
    order: list[int] = []
    running = 0
    peak = 0
    done = anyio.Event()

    async def slow(ctx: ActorContext, mail: Mail) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        order.append(mail.body)
        running -= 1
        if len(order) == 20:
            done.set()

    async with open_mesh("memory://") as mesh, LocalRuntime(mesh, handlers={"t:slow": slow}) as rt:
        await rt.create("serial", "t:slow")
        for i in range(20):
            await rt.tell("serial", i)
        with anyio.fail_after(scaled(5)):
            await done.wait()
    assert order == list(range(20)) and peak == 1


async def test_max_concurrency_lets_messages_overlap() -> None:
    running = 0
    peak = 0
    finished = 0
    done = anyio.Event()

    async def slow(ctx: ActorContext, mail: Mail) -> None:
        nonlocal running, peak, finished
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.05)
        running -= 1
        finished += 1
        if finished == 8:
            done.set()

    async with open_mesh("memory://") as mesh, LocalRuntime(mesh, handlers={"t:slow": slow}) as rt:
        await rt.create("wide", "t:slow", config={"max_concurrency": 4})
        for i in range(8):
            await rt.tell("wide", i)
        with anyio.fail_after(scaled(5)):
            await done.wait()
    assert peak == 4


async def test_failed_message_is_delivered_again() -> None:
    attempts: list[int] = []
    done = anyio.Event()

    async def flaky(ctx: ActorContext, mail: Mail) -> None:
        attempts.append(mail.delivery.attempt)
        if mail.delivery.attempt == 1:
            raise RuntimeError("first try fails")
        done.set()

    async with open_mesh("memory://") as mesh:
        async with LocalRuntime(mesh, handlers={"t:flaky": flaky}, visibility_timeout_ms=200) as rt:
            await rt.create("f", "t:flaky")
            await rt.tell("f", "job")
            with anyio.fail_after(scaled(5)):
                await done.wait()
    assert attempts == [1, 2]


async def test_slow_handler_is_not_taken_over_while_alive() -> None:
    starts: list[str] = []
    done = anyio.Event()

    async def slow(ctx: ActorContext, mail: Mail) -> None:
        starts.append(ctx.host)
        await anyio.sleep(1.0)  # five visibility timeouts
        done.set()

    async with open_mesh("memory://") as mesh:
        async with (
            LocalRuntime(
                mesh, handlers={"t:slow": slow}, visibility_timeout_ms=200, host="one"
            ) as one,
            LocalRuntime(mesh, handlers={"t:slow": slow}, visibility_timeout_ms=200, host="two"),
        ):
            await one.create("s", "t:slow")
            await one.tell("s", "job")
            with anyio.fail_after(scaled(5)):
                await done.wait()
        # Both stopped, the message acked: nothing was or can be handled again.
        assert await undelivered_mail(mesh) == {}
    assert len(starts) == 1


async def test_stopped_actor_drops_messages() -> None:
    rec = Recorder()
    async with open_mesh("memory://") as mesh:
        dead = mesh.subscribe(DEAD_LETTER_TOPIC, "audit", "c")
        async with LocalRuntime(mesh, handlers={"t:rec": rec}) as rt:
            await rt.create("s", "t:rec")
            await rt.stop("s")
            await rt.tell("s", "ignored")
            await rt.tell("nobody", "lost")
            got = []
            with anyio.fail_after(scaled(5)):
                async for d in dead:
                    got.append(d.data["data"]["to"])
                    if len(got) == 2:
                        break
        assert sorted(got) == ["nobody", "s"]
        assert rec.seen == []
        await dead.close()


async def test_parked_actors_hold_no_task() -> None:
    rec = Recorder()
    rec.expected = 200
    async with open_mesh("memory://") as mesh:
        async with LocalRuntime(mesh, handlers={"t:rec": rec}) as rt:
            for i in range(10_000):
                await mesh.put(f"actors/p{i}", {"id": f"p{i}", "kind": "t:rec"})
            for i in range(0, 10_000, 50):
                await rt.tell(f"p{i}", i)
            with anyio.fail_after(scaled(10)):
                await rec.event.wait()
                await rt.wait_idle()
            await anyio.sleep(0.05)
            assert rt.active_tasks == 0
            workers = [t for t in asyncio.all_tasks() if "_work" in repr(t.get_coro())]
            assert workers == []
        assert len(rec.seen) == 200


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_waiting_messages_for_many_actors_start_within_a_few_loop_turns(
    backend: str, tmp_path: Any
) -> None:
    # The mailbox reader takes the next message without a loop turn per message: a
    # busy runtime would otherwise start one waiting actor per turn of the loop, each
    # turn as long as every running handler's step in it.
    actors = 48
    started: list[int] = []
    turns = 0
    gate = anyio.Event()

    async def hold(ctx: ActorContext, mail: Mail) -> None:
        started.append(turns)
        await gate.wait()

    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'm.db'}"
    async with open_mesh(url) as mesh:
        rt = LocalRuntime(mesh, handlers={"t:hold": hold})
        for i in range(actors):
            await rt.create(f"h{i}", "t:hold")
            await rt.tell(f"h{i}", i)
        async with rt:
            with anyio.fail_after(scaled(10)):
                while len(started) < actors:
                    await asyncio.sleep(0)
                    turns += 1
            gate.set()
    assert started[-1] - started[0] <= 12, started
