"""An agent actor's turns on its live channel, on every mesh backend: a watcher sees
each turn start, its reply piece by piece, then its summary; nothing is written while
nobody watches; a try after a cut-off one is marked as a restart."""

from __future__ import annotations

import asyncio

import pytest

from plait.agents import Agents
from plait.agents.live import AgentEvent, agent_channel, agent_channels, follow_agent
from plait.agents.store import TurnSummary
from plait.mesh import Mesh
from tests._support.timing import scaled

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio

TEXT = "".join(f"piece{n} " for n in range(40))
RULES = [{"node": "helper", "text": TEXT, "chunks": 40, "chunk_delay_ms": 1}]


async def collect(mesh: Mesh, name: str, turns: int, after: int | None = None) -> list[AgentEvent]:
    return [e async for e in follow_agent(mesh, name, after=after, turns=turns)]


async def until_watched(mesh: Mesh, channel: str) -> None:
    assert mesh.live is not None
    live = mesh.live

    async def watched() -> bool:
        return live.watched(channel)

    await eventually(watched)


async def test_a_watcher_sees_each_turn_streamed_then_its_summary(mesh: Mesh) -> None:
    await profile(mesh, "helper", [])
    agents = Agents(mesh)
    async with serving(mesh, RULES):
        await agents.start("helper")
        watching = asyncio.create_task(collect(mesh, "helper", 2))
        await until_watched(mesh, agent_channel("helper"))
        first = await agents.tell("helper", "one")
        second = await agents.tell("helper", "two")
        events = await asyncio.wait_for(watching, scaled(30))
        shown = await agents.show("helper")
    assert [e.offset for e in events] == sorted({e.offset for e in events})
    for message, prompt in ((first, "one"), (second, "two")):
        mine = [e for e in events if e.message == message]
        assert mine[0].kind == "turn" and mine[0].prompt == prompt
        assert mine[0].attempt == 1 and not mine[0].restart
        deltas = [e.text for e in mine if e.kind == "delta"]
        assert len(deltas) == 40 and "".join(t or "" for t in deltas) == TEXT
        assert mine[-1].kind == "end" and mine[-1].summary is not None
        # the summary is the committed turn, and the streamed text is its answer
        committed = next(t for t in shown.turns if t.message == message)
        assert mine[-1].summary == committed and committed.text == TEXT
    # a watcher that comes back with an offset gets what followed it
    k = events[len(events) // 2].offset
    again = await asyncio.wait_for(collect(mesh, "helper", 1, after=k), scaled(30))
    assert [e.offset for e in again] == [e.offset for e in events if e.offset > k]


async def test_nothing_is_written_while_nobody_watches(mesh: Mesh) -> None:
    assert mesh.live is not None
    await profile(mesh, "helper", [])
    agents = Agents(mesh)
    async with serving(mesh, RULES):
        await agents.start("helper")
        await agents.tell("helper", "one")

        async def answered() -> bool:
            return bool((await agents.show("helper")).turns)

        await eventually(answered)
    assert (await mesh.live.read(agent_channel("helper"))).last == 0


async def test_a_try_after_a_cut_off_one_is_marked_restarted(mesh: Mesh) -> None:
    channels = agent_channels(mesh)
    assert channels is not None and mesh.live is not None
    async with mesh.live.watch(agent_channel("a")):
        await until_watched(mesh, agent_channel("a"))
        channels.turn("a", "m1", 1, "do it").delta("a", 1, "half an ans")
        channels.stopped("a", "m1", "stopped: ModelError")
        channels.turn("a", "m1", 2, "do it").delta("a", 1, "a whole answer")
        channels.end("a", TurnSummary(seq=1, message="m1", prompt="do it", text="a whole answer"))
        events = await asyncio.wait_for(collect(mesh, "a", 1, after=0), scaled(30))
    assert [(e.kind, e.attempt, e.restart, e.text) for e in events] == [
        ("turn", 1, False, None),
        ("delta", None, False, "half an ans"),
        ("end", None, False, "stopped: ModelError"),  # no summary: nothing committed
        ("turn", 2, True, None),
        ("delta", None, False, "a whole answer"),
        ("end", None, False, None),
    ]
    assert events[2].summary is None and events[-1].summary is not None
