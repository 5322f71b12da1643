"""A run owner's wake that the runtime dead-letters fails its run with the reason.

The wake's host dies mid-node as many times as the runtime allows deliveries, so the
handler never succeeds and the runtime moves the wake to the dead letters itself: the
owner kind's ``on_dead_letter`` hook ends the run instead of leaving it ``running``.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from plait.actors import DEAD_LETTER_TOPIC
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Mesh
from plait.profiles import AgentProfile, put_profile
from plait.runs import Runs, serve
from plait.tools import ToolContext, ToolRegistry, tool
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio

GRAPH = {
    "name": "pay",
    "agent": "assistant",
    "entry": "pay",
    "nodes": [{"id": "pay", "type": "tool", "tool": "charge"}],
}


def hanging_charge(calls: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @tool("charge")
    async def charge(args: dict[str, Any], ctx: ToolContext) -> str:
        calls.append(ctx.node)
        await anyio.sleep_forever()
        return "never"

    registry.register(charge)
    return registry


async def test_a_dead_lettered_wake_fails_its_run(mesh: Mesh) -> None:
    await put_profile(mesh, AgentProfile(name="assistant", tools=["charge"]))
    await import_graph(mesh, load_graph(GRAPH))
    runs = Runs(mesh)
    calls: list[str] = []
    async with serve(
        mesh,
        tools=hanging_charge(calls),
        visibility_timeout_ms=300,
        drain_timeout_s=0.01,
        max_attempts=1,
        beat=False,
    ):
        run_id = (await runs.start("assistant", "pay", "x")).run_id
        with anyio.fail_after(scaled(10)):
            while not calls:  # the charge is under way when its host dies
                await anyio.sleep(0.01)
    assert (await runs.get(run_id)).status == "running"

    dead = mesh.subscribe(DEAD_LETTER_TOPIC, "audit", "c", start="begin")
    try:
        async with serve(
            mesh,
            tools=hanging_charge(calls),
            visibility_timeout_ms=300,
            max_attempts=1,
            beat=False,
        ):
            rec = await runs.wait(run_id, timeout=10)
            with anyio.fail_after(scaled(10)):
                letter = await dead.__anext__()
    finally:
        await dead.close()
    assert calls == ["pay"]  # the node did not run again
    assert rec.status == "failed" and rec.ended_detail == "dead_lettered"
    assert rec.error == "the wake was dead-lettered: failed 1 times"
    assert letter.data["data"]["to"] == f"run:{run_id}"
    await runs.verify(run_id)
