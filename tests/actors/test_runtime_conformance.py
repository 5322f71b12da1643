"""The actor-runtime contract (:mod:`plait.actors._base`), held against every runtime on
every mesh backend. Each test runs once per runtime (``tests/actors/conftest.py``) and
mesh (memory, SQLite, Redis); the handler writes what it sees to the mesh, so a runtime
whose handlers run in other processes is held to the same assertions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from plait.actors import DEAD_LETTER_TOPIC, ActorRuntime
from plait.errors import ActorError, ActorNotFound
from plait.mesh import Mesh
from tests._support.timing import scaled

from .conftest import MakeRuntime
from .kinds import BEHAVE, EFFECT_PREFIX, KIND, LOG_TOPIC, LogReader, Services

pytestmark = pytest.mark.anyio

HANDLERS = {KIND: BEHAVE}


@pytest.fixture
async def log(mesh: Mesh) -> AsyncIterator[LogReader]:
    reader = LogReader(mesh)
    yield reader
    await reader.close()


def runtime(make_runtime: MakeRuntime, **kw: Any) -> ActorRuntime:
    return make_runtime(handlers=HANDLERS, **kw)


def labels(entries: list[dict[str, Any]]) -> list[Any]:
    return [e["n"] for e in entries]


def peak_concurrency(entries: list[dict[str, Any]], actor: str) -> int:
    running = peak = 0
    for e in entries:
        if e["actor"] == actor and e["phase"] in ("start", "end"):
            running += 1 if e["phase"] == "start" else -1
            peak = max(peak, running)
    return peak


async def test_create_get_stop(make_runtime: MakeRuntime) -> None:
    rt = runtime(make_runtime)
    made = await rt.create("a", KIND, topics=["t"], config={"max_concurrency": 2})
    assert (made.id, made.kind, made.topics) == ("a", KIND, ["t"])
    assert made.config == {"max_concurrency": 2}
    assert await rt.get("a") == made
    with pytest.raises(ActorError, match="already exists"):
        await rt.create("a", "other:kind")
    assert await rt.create("a", "other:kind", exist_ok=True) == made
    with pytest.raises(ActorNotFound):
        await rt.get("nobody")
    with pytest.raises(ActorNotFound):
        await rt.stop("nobody")
    await rt.stop("a")
    assert (await rt.get("a")).stopped


async def test_tell_delivers_each_message_once(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    rt = runtime(make_runtime, host="one")
    await rt.create("a", KIND)
    await rt.tell("a", {"n": 0})  # before any runtime serves the mesh: kept for it
    async with rt:
        for n in (1, 2):
            await rt.tell("a", {"n": n})
        await log.count("end", 3)
    entries = await log.drained(mesh)
    ends = log.of("end")
    assert labels(ends) == [0, 1, 2] and len(entries) == 6
    assert {(e["attempt"], e["host"]) for e in ends} == {(1, "one")}
    assert rt.host == "one"


async def test_mailbox_order_per_actor(make_runtime: MakeRuntime, log: LogReader) -> None:
    async with runtime(make_runtime) as rt:
        for actor in ("x", "y"):
            await rt.create(actor, KIND)
        for n in range(12):
            for actor in ("x", "y"):
                await rt.tell(actor, {"n": n, "sleep": 0.005})
        await log.count("end", 24)
    for actor in ("x", "y"):
        assert labels(log.of("start", actor)) == list(range(12))
        assert peak_concurrency(log.entries, actor) == 1


async def test_max_concurrency_bounds_overlap(make_runtime: MakeRuntime, log: LogReader) -> None:
    async with runtime(make_runtime) as rt:
        await rt.create("wide", KIND, config={"max_concurrency": 3})
        for n in range(9):
            await rt.tell("wide", {"n": n, "sleep": 0.2})
        await log.count("end", 9)
    assert peak_concurrency(log.entries, "wide") == 3


async def test_ack_commits_with_the_handlers_transaction(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    async with runtime(make_runtime) as rt:
        await rt.create("acked", KIND)
        await rt.create("conflicted", KIND)
        await rt.tell("acked", {"n": "acked", "ack_then_raise": True})
        await rt.tell("conflicted", {"n": "conflicted", "conflict_until": 1})
        await log.until(lambda _: log.of("end", "conflicted"))
    await log.drained(mesh)
    # The ack landed with the effect: the handler raised after, and nothing came again.
    assert [e["attempt"] for e in log.of("start", "acked")] == [1]
    effect = await mesh.get(EFFECT_PREFIX + "acked")
    assert effect is not None and effect.value == 1
    # The transaction holding the ack failed: the message came again.
    assert [e["attempt"] for e in log.of("start", "conflicted")] == [1, 2]
    assert await mesh.get(EFFECT_PREFIX + "conflicted") is None


async def test_a_failed_message_is_delivered_again(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    async with runtime(make_runtime) as rt:
        await rt.create("f", KIND)
        await rt.tell("f", {"n": "job", "fail_until": 2})
        await log.count("end", 1)
    await log.drained(mesh)
    assert [e["attempt"] for e in log.of("start")] == [1, 2, 3]
    assert [e["attempt"] for e in log.of("end")] == [3]


async def test_a_dead_runtimes_message_goes_to_another(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    first = runtime(make_runtime, host="first", drain_timeout_s=0.05)
    async with first:
        await first.create("h", KIND)
        await first.tell("h", {"n": "job", "hang_until": 1})
        await log.count("start", 1)
    # ``first`` left the message unacked (its handler cancelled, as if its process died).
    async with runtime(make_runtime, host="second"):
        await log.count("end", 1)
    await log.drained(mesh)
    assert [(e["attempt"], e["host"]) for e in log.of("start")] == [(1, "first"), (2, "second")]


async def test_dead_letter_after_max_attempts_calls_the_hook(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    dead = mesh.subscribe(DEAD_LETTER_TOPIC, "audit", "c", start="begin")
    try:
        async with runtime(make_runtime, max_attempts=2) as rt:
            await rt.create("d", KIND)
            await rt.tell("d", {"n": "doomed", "fail_until": 99})
            await log.count("dead", 1)
            with anyio.fail_after(scaled(10)):
                letter = await dead.__anext__()
        await log.drained(mesh)
    finally:
        await dead.close()
    assert [e["attempt"] for e in log.of("start")] == [1, 2]
    hooked = log.of("dead")
    assert [(e["actor"], e["attempt"], e["reason"]) for e in hooked] == [("d", 3, "failed 2 times")]
    assert letter.data["data"]["to"] == "d" and letter.data["reason"] == "failed 2 times"


async def test_the_commit_time_hand_off(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    rt = runtime(make_runtime)
    assert rt.take_mail_in(rt.mesh.transact(), "c") is False  # not serving
    async with rt:
        await rt.create("c", KIND)
        await rt.tell("c", {"chain": 5})
        await log.until(lambda _: 0 in labels(log.of("end")))
    await log.drained(mesh)
    assert labels(log.of("start")) == [5, 4, 3, 2, 1, 0]
    assert {e["attempt"] for e in log.of("start")} == {1}
    sent = log.of("sent")
    assert [(e["took"], e["taken"]) for e in sent] == [(True, 1)] * 5
    assert rt.take_mail_in(rt.mesh.transact(), "c") is False  # closed


async def test_wait_idle_waits_for_handlers_in_flight(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    async with runtime(make_runtime) as rt:
        await rt.create("w", KIND, config={"max_concurrency": 4})
        for n in range(4):
            await rt.tell("w", {"n": n, "sleep": 0.3})
        await log.count("start", 4)
        with anyio.fail_after(scaled(10)):
            await rt.wait_idle()
        await mesh.publish(LOG_TOPIC, "idle", {"phase": "idle", "actor": "", "n": None})
        await log.count("idle", 1)
    # Every handler had finished (its last entry written) when wait_idle returned.
    phases = [e["phase"] for e in log.entries]
    assert phases.count("end") == 4 and phases[-1] == "idle"


async def test_a_stopped_actors_messages_are_dropped(
    mesh: Mesh, make_runtime: MakeRuntime, log: LogReader
) -> None:
    dead = mesh.subscribe(DEAD_LETTER_TOPIC, "audit", "c", start="begin")
    got: list[str] = []
    try:
        async with runtime(make_runtime) as rt:
            await rt.create("s", KIND)
            await rt.stop("s")
            await rt.tell("s", {"n": "ignored"})
            await rt.tell("nobody", {"n": "lost"})
            with anyio.fail_after(scaled(10)):
                while len(got) < 2:
                    got.append((await dead.__anext__()).data["data"]["to"])
        await log.drained(mesh)
    finally:
        await dead.close()
    assert sorted(got) == ["nobody", "s"]
    assert log.entries == []  # neither handled nor hooked


async def test_handlers_read_the_runtimes_services(
    make_runtime: MakeRuntime, log: LogReader
) -> None:
    async with runtime(make_runtime, services=Services("injected")) as rt:
        await rt.create("with", KIND)
        await rt.tell("with", {"n": 1, "service": True})
        await log.count("service", 1)
    async with runtime(make_runtime) as rt:
        await rt.create("without", KIND)
        await rt.tell("without", {"n": 2, "service": True})
        await log.count("service", 2)
    with_, without = log.of("service")
    assert with_["name"] == "injected"
    assert "needs a Services in its runtime's services" in without["error"]
