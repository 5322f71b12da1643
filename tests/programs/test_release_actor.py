"""The resumable release graph as a program actor: one node per message, the record at
``runs/<run>/graph`` deciding what runs, one decision a person answers, one keyed tick."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from plait.agents import Agents
from plait.agents.store import last_turns
from plait.decisions import DecisionAnswerer, Human
from plait.errors import ProgramNotPromoted, VersionConflict
from plait.ids import DecisionId
from plait.mesh import Mesh
from plait.programs import save_program
from tests.agents.conftest import eventually, serving

from .release_actor import save_and_promote, start

pytestmark = pytest.mark.anyio


async def record(mesh: Mesh, run: str) -> dict[str, Any]:
    entry = await mesh.get(f"runs/{run}/graph")
    assert entry is not None
    return dict(entry.value)


async def ticks(mesh: Mesh, topic: str) -> list[Any]:
    """Every ``graph.tick`` published on ``topic`` so far (read by a group of our own)."""
    found: list[Any] = []
    async with mesh.subscribe(topic, "tick-count", "c", start="begin") as sub:
        with anyio.move_on_after(0.5):
            async for delivery in sub:
                if delivery.kind == "graph.tick":
                    found.append(delivery.data)
                await delivery.ack()
    return found


async def test_the_graph_runs_one_node_per_wake_and_ticks_once_while_open(mesh: Mesh) -> None:
    await save_and_promote(mesh)
    async with serving(mesh, []):
        report = await start(mesh, run="r1", wait_ms="50", tick_ms="3000")
        assert report == {
            "run": "r1",
            "key": "runs/r1/graph",
            "actor": "agent:graph-r1",
            "topic": "graph.r1",
        }

        async def parked() -> Any:
            found = await record(mesh, "r1")
            turns = await last_turns(mesh, "graph-r1", 20)
            waiting = [t for t in turns if '"waiting"' in t.text]
            return found.get("decisionId") and waiting and found

        at_approve = await eventually(parked)
        assert at_approve["node"] == "approve" and at_approve["status"] == "ready"
        assert set(at_approve["results"]) == {"fetch", "test"}
        agents = Agents(mesh)
        for n in range(3):  # wakes while open each schedule the tick again, under one key
            await agents.tell("agent:graph-r1", f"nudge {n}")

        async def nudged() -> Any:
            turns = await last_turns(mesh, "graph-r1", 20)
            return len([t for t in turns if '"waiting"' in t.text]) == 4 and turns

        await eventually(nudged)
        desk = DecisionAnswerer(mesh)
        await desk.answer(DecisionId(at_approve["decisionId"]), option="yes", by=Human("bo"))

        async def finished() -> Any:
            found = await record(mesh, "r1")
            return found["status"] == "done" and found

        done = await eventually(finished)
    assert done["node"] == "done"
    assert list(done["results"]) == ["fetch", "test", "approve", "release"]
    assert done["results"]["approve"]["ok"] is True and done["results"]["approve"]["by"] == "bo"
    assert done["results"]["test"] == {"ok": True, "checked": 3, "unnamed": []}
    # four wakes scheduled the tick under one key; the answer woke the actor (the
    # decision it raised tells it when it closes), so the graph need not wait for it
    assert len(await ticks(mesh, "graph.r1")) <= 1
    woken = [t for t in await last_turns(mesh, "graph-r1", 20) if "has closed" in t.prompt]
    assert len(woken) == 1
    decisions = [d for d in await desk.list() if d.id == at_approve["decisionId"]]
    assert len(decisions) == 1 and decisions[0].status == "answered"
    for node in ("fetch", "test", "release"):
        effect = await mesh.get(f"releases/r1/{node}")
        assert effect is not None and effect.version == 1  # each node's effect once
    turns = await last_turns(mesh, "graph-r1", 20)
    assert all(t.outcome == "answered" for t in turns)


async def test_a_rejected_release_fails_the_graph_with_its_evidence(mesh: Mesh) -> None:
    await save_and_promote(mesh)
    async with serving(mesh, []):
        await start(mesh, run="r2", wait_ms="20000")

        async def raised() -> Any:
            return (await record(mesh, "r2")).get("decisionId")

        did = await eventually(raised)
        await DecisionAnswerer(mesh).answer(DecisionId(did), option="no", by=Human("bo"))

        async def ended() -> Any:
            found = await record(mesh, "r2")
            return found["status"] == "failed" and found

        failed = await eventually(ended)
    assert failed["node"] == "approve"
    assert failed["results"]["approve"]["ok"] is False
    assert await mesh.get("releases/r2/release") is None


async def test_an_interrupted_node_is_verified_not_repeated(mesh: Mesh) -> None:
    # as a wake SIGKILLed after recording its release but before moving the record on
    await save_and_promote(mesh)
    await mesh.put("releases/r3/fetch", {"version": "r3", "changes": ["a: b"]})
    await mesh.put("releases/r3/release", {"version": "r3", "changes": ["a: b"]})
    results = {"fetch": {}, "test": {}, "approve": {"ok": True}}
    await mesh.put("runs/r3/graph", {"node": "release", "status": "running", "results": results})
    await Agents(mesh).create("graph-r3", program="graph-step", input={"run": "r3"})
    async with serving(mesh, []):
        await Agents(mesh).tell("graph-r3", "Continue.")

        async def finished() -> Any:
            found = await record(mesh, "r3")
            return found["status"] == "done" and found

        done = await eventually(finished)
    assert done["results"]["release"]["verified"] is True
    release = await mesh.get("releases/r3/release")
    assert release is not None and release.version == 1


async def test_the_graph_is_seeded_once_and_its_programs_must_be_promoted(mesh: Mesh) -> None:
    await save_program(mesh, "graph-step", "return 1\n")
    with pytest.raises(ProgramNotPromoted, match="graph-step"):
        await start(mesh, run="r4")
    await save_and_promote(mesh)
    with pytest.raises(VersionConflict):  # the record was seeded by the first try
        await start(mesh, run="r4")
