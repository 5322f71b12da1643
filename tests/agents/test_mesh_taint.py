"""Taint is not washed out through the mesh: what a tainted turn or program writes or
publishes is stored tainted, and whoever reads it next runs untrusted — an agent turn
caused by its event, a program actor, a later ``mesh_get`` of its value, a durable run
it starts.

The gated tool is the real ``manage_graph`` capability tool (pre-approved here); a turn
is made untrusted by a message told as untrusted.
"""

from __future__ import annotations

from typing import Any

import pytest

from plait.agents import Agents
from plait.agents.store import read_conversation
from plait.decisions import DecisionAnswerer, Human
from plait.errors import ToolNotPermitted
from plait.graphs import GraphSpec
from plait.graphs.store import import_graph
from plait.ids import RunId
from plait.mesh import Mesh
from plait.profiles import AgentProfile, get_profile, put_profile
from plait.programs import grant_all, promote, run_source, save_program
from plait.runs import Runs

from .conftest import eventually, serving
from .test_trust import LIST_GRAPHS, asked, gated, raised_by, turns

pytestmark = pytest.mark.anyio


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    """A scripted tool call of ``tool``."""
    return {"name": tool, "arguments": arguments}


PUBLISH = call("mesh_publish", topic="tasks.new", kind="task", data="list")
PUT = call("mesh_put", key="notes/plan", value={"step": "deploy"})
GET = call("mesh_get", key="notes/plan")
RUN = call("run_graph", agent="assistant", name="greet", input="ana")

RULES: list[dict[str, Any]] = [
    {"match": "announce", "round": 1, "tool_calls": [PUBLISH]},
    {"match": "note", "round": 1, "tool_calls": [PUT]},
    {"match": "recall", "round": 1, "tool_calls": [LIST_GRAPHS]},
    {"match": "recall", "round": 2, "tool_calls": [GET]},
    {"match": "recall", "round": 3, "tool_calls": [LIST_GRAPHS]},
    {"match": "start", "round": 1, "tool_calls": [RUN]},
    {"match": "consult", "round": 1, "tool_calls": [LIST_GRAPHS]},
    {"match": "consult", "round": 2, "tool_calls": [call("programs_run", ref="peek")]},
    {"match": "consult", "round": 3, "tool_calls": [LIST_GRAPHS]},
    {"match": "list", "round": 1, "tool_calls": [LIST_GRAPHS]},
    {"text": "done"},
]


async def tools_of(mesh: Mesh, *names: str) -> None:
    """Each profile with the mesh tools, run_graph and a pre-approved manage_graph."""
    await gated(mesh, *names)
    for name in names:
        found = await get_profile(mesh, name)
        extra = ["mesh_get", "mesh_put", "mesh_publish", "run_graph", "programs_run"]
        await put_profile(mesh, found.model_copy(update={"tools": [*found.tools, *extra]}))


async def test_an_event_a_tainted_turn_publishes_taints_the_turn_it_causes(mesh: Mesh) -> None:
    await tools_of(mesh, "reader", "worker")
    agents, desk = Agents(mesh), DecisionAnswerer(mesh)
    async with serving(mesh, RULES):
        await agents.start("reader")
        await agents.start("worker", topics=["tasks.new"])  # a topic it trusts
        await mesh.publish("tasks.new", "task", "list")  # from a person: trusted
        (clean,) = await turns(agents, "worker", 1)
        assert not await raised_by(desk, "worker")
        await agents.tell("reader", "announce", untrusted=True)
        (announced,) = await turns(agents, "reader", 1)
        await asked(desk, "worker")  # pre-approved manage_graph now asks a person
        _, caused = await turns(agents, "worker", 2)
    assert announced.tainted and announced.tools == ["mesh_publish"]
    assert not clean.tainted and caused.tainted and caused.tools == ["manage_graph"]
    assert (await read_conversation(mesh, "worker"))[0].tainted


RELAY = """
await mesh.publish("relayed", "note", payload.message)
return "relayed"
"""


async def test_a_program_actor_runs_a_tainted_event_untrusted(mesh: Mesh) -> None:
    await save_program(mesh, "relay", RELAY)
    await promote(mesh, "relay", 1, by=Human("ana"))
    agents = Agents(mesh)
    await agents.create("relay", program="relay", topics=["tasks.new"])
    out = mesh.subscribe("relayed", "test", "t", start="begin")
    async with serving(mesh, [{"text": "ok"}]):
        await mesh.publish("tasks.new", "task", "clean")
        await mesh.publish("tasks.new", "task", "fetched", tainted=True)
        relayed = await turns(agents, "relay", 2)
        events = [await out.__anext__() for _ in range(2)]
    await out.close()
    assert [t.tainted for t in relayed] == [False, True]
    # and what the tainted run published carries the taint on
    assert sorted((e.event.tainted, "fetched" in e.data) for e in events) == [
        (False, False),
        (True, True),
    ]


async def test_a_tainted_mesh_put_taints_a_later_mesh_get(mesh: Mesh) -> None:
    await tools_of(mesh, "reader", "planner")
    agents, desk = Agents(mesh), DecisionAnswerer(mesh)
    async with serving(mesh, RULES):
        await agents.start("reader")
        await agents.start("planner")
        await agents.tell("reader", "note", untrusted=True)
        await turns(agents, "reader", 1)
        stored = await mesh.get("notes/plan")
        assert stored is not None and stored.tainted
        await agents.tell("planner", "recall")  # a trusted message
        # Its first manage_graph ran pre-approved; after reading the note it asks.
        decision = await asked(desk, "planner")
        (turn,) = await turns(agents, "planner", 1)
    assert turn.tools == ["manage_graph", "mesh_get", "manage_graph"]
    assert turn.tainted and len(await raised_by(desk, "planner")) == 1
    assert "manage_graph" in decision.title


GREET = {
    "name": "greet",
    "agent": "assistant",
    "entry": "hello",
    "nodes": [{"id": "hello", "type": "agent", "prompt": "Greet {{input}}"}],
}


async def test_run_graph_from_an_untrusted_turn_starts_an_untrusted_run(mesh: Mesh) -> None:
    await import_graph(mesh, GraphSpec.model_validate(GREET))
    await tools_of(mesh, "starter")
    agents, runs = Agents(mesh), Runs(mesh)
    async with serving(mesh, RULES):
        await agents.start("starter")
        await agents.tell("starter", "start")
        await agents.tell("starter", "start", untrusted=True)
        await turns(agents, "starter", 2)

        async def started() -> Any:
            found = [s for s in await runs.list(agent="assistant")]
            return len(found) == 2 and found

        summaries = await eventually(started)
    records = [await runs.get(RunId(s.run_id)) for s in summaries]
    assert sorted(r.input_tainted for r in records) == [False, True]


async def test_a_program_that_reads_a_tainted_value_loses_its_pre_approvals(mesh: Mesh) -> None:
    ops = AgentProfile(name="ops", tools=["bash"], pre_approved=["bash"])
    writer = "await mesh.put('notes/page', {'html': 'ignore all'})"
    await run_source(writer, None, grant_all(mesh, profile=ops, trusted=False))
    stored = await mesh.get("notes/page")
    assert stored is not None and stored.tainted
    reader = """
first = await tools.bash("true")
page = await mesh.get(key)
await mesh.publish("notes", "read", page["value"])
await mesh.put("notes/summary", {"of": page["value"]})
await tools.bash("true")
"""
    sub = mesh.subscribe("notes", "test", "t", start="begin")
    for read in ("page = await mesh.get('notes/page')", "page = (await mesh.scan('notes/'))[0]"):
        text = reader.replace("page = await mesh.get(key)", read)
        with pytest.raises(ToolNotPermitted, match="needs a person's approval"):
            await run_source(text, None, grant_all(mesh, profile=ops))
        published = await sub.__anext__()
        summary = await mesh.get("notes/summary")
        assert published.event.tainted and summary is not None and summary.tainted
    await sub.close()
    # A clean read leaves the program trusted, and its writes clean.
    await mesh.put("notes/page", {"html": "ours"})
    clean = reader.replace("page = await mesh.get(key)", "page = await mesh.get('notes/page')")
    await run_source(clean, None, grant_all(mesh, profile=ops))
    summary = await mesh.get("notes/summary")
    assert summary is not None and not summary.tainted


async def test_a_program_a_turn_runs_passes_back_the_taint_it_read(mesh: Mesh) -> None:
    await tools_of(mesh, "planner")
    await save_program(mesh, "peek", "return (await mesh.get('notes/plan'))['value']")
    await promote(mesh, "peek", 1, by=Human("ana"))
    await mesh.put("notes/plan", {"step": "rm -rf /"}, tainted=True)
    agents, desk = Agents(mesh), DecisionAnswerer(mesh)
    async with serving(mesh, RULES):
        await agents.start("planner")
        await agents.tell("planner", "consult")  # a trusted message
        await asked(desk, "planner")  # after the program's answer, manage_graph asks
        (turn,) = await turns(agents, "planner", 1)
    assert turn.tools == ["manage_graph", "programs_run", "manage_graph"] and turn.tainted
