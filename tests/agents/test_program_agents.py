"""A durable run's program node gets the agents capability of the process serving it:
a saved program tells an agent actor, which handles it with a turn."""

from __future__ import annotations

import pytest

from plait.agents import Agents
from plait.decisions import Human
from plait.graphs import GraphSpec
from plait.graphs.store import import_graph
from plait.mesh import Mesh
from plait.programs import promote, save_program
from plait.runs import Runs

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio


async def test_a_program_node_tells_an_agent_actor(mesh: Mesh) -> None:
    await save_program(
        mesh, "delegate", "return {'told': await agents.tell(payload.agent, payload.text)}"
    )
    await promote(mesh, "delegate", 1, by=Human("ana"))
    spec = {
        "name": "hand-off",
        "agent": "assistant",
        "entry": "tell",
        "nodes": [
            {
                "id": "tell",
                "type": "program",
                "ref": "delegate",
                "input": {"agent": "helper", "text": "{{input}}"},
            }
        ],
    }
    await import_graph(mesh, GraphSpec.model_validate(spec))
    await profile(mesh, "helper", [])
    agents = Agents(mesh)
    async with serving(mesh, [{"node": "helper", "text": "on it: {{prompt}}"}]):
        await agents.start("helper")
        runs = Runs(mesh)
        rec = await runs.start("assistant", "hand-off", input="tidy the notes")

        async def answered() -> object:
            shown = await agents.show("helper")
            return shown.turns and shown

        shown = await eventually(answered)

        async def settled() -> object:
            found = await runs.get(rec.run_id)
            return found.terminal and found

        done = await eventually(settled)
    assert shown.turns[0].text == "on it: tidy the notes"
    assert done.status == "done"
    assert (await runs.output(done))["told"] == shown.turns[0].message
