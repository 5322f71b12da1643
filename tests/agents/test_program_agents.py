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
from tests.programs import sample_programs

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


async def test_a_program_looping_on_agents_run_spends_the_runs_budget(mesh: Mesh) -> None:
    # The program node's budget is the visit's: each agents.run turn is checked against
    # the run's budget.tokens and counted in its record, so the loop stops at the limit
    # and the run parks on its budget with the spend recorded.
    spec = {
        "name": "spender",
        "agent": "assistant",
        "entry": "spend",
        "budget": {"tokens": 100, "on_exhausted": "escalate"},
        "nodes": [
            {
                "id": "spend",
                "type": "program",
                "ref": "sample-spend",
                "input": {"agent": "helper", "task": "count", "times": 50},
            }
        ],
    }
    assert sample_programs.spend.__name__ == "spend"  # registered as sample-spend
    await import_graph(mesh, GraphSpec.model_validate(spec))
    await profile(mesh, "helper", [])
    usage = {"input_tokens": 20, "output_tokens": 5}
    async with serving(mesh, [{"node": "helper", "text": "counted", "usage": usage}]):
        runs = Runs(mesh)
        rec = await runs.start("assistant", "spender", input="go")
        parked = await runs.wait(rec.run_id, timeout=20)
    assert parked.status == "waiting_human", (parked.status, parked.error)
    assert parked.waiting is not None and parked.waiting.kind == "budget"
    assert (parked.usage.input_tokens, parked.usage.output_tokens) == (80, 20)  # 4 turns
