"""Capability tools are gated like any tool: ``manage_graph`` waits for a person's
approval unless the agent has it pre-approved; an agent defines a graph and runs it."""

from __future__ import annotations

from typing import Any

import pytest

from plait.agents import Agents
from plait.decisions import DecisionAnswerer, Human
from plait.graphs.store import get_graph
from plait.mesh import Mesh

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio

SPEC = {
    "name": "shout",
    "agent": "assistant",
    "entry": "loud",
    "nodes": [{"id": "loud", "type": "agent", "prompt": "Shout {{input}}"}],
}
RULES: list[dict[str, Any]] = [
    {"node": "loud", "text": "HELLO"},
    {
        "node": "builder",
        "round": 1,
        "tool_calls": [{"name": "manage_graph", "arguments": {"action": "put", "spec": SPEC}}],
    },
    {
        "node": "builder",
        "round": 2,
        "tool_calls": [
            {
                "name": "run_graph",
                "arguments": {"agent": "assistant", "name": "shout", "input": "hi"},
            }
        ],
    },
    {"node": "builder", "round": 3, "text": "started {{tool_result.run_id}}"},
]


@pytest.mark.parametrize("pre_approved", [False, True])
async def test_manage_graph_needs_approval_unless_pre_approved(
    mesh: Mesh, pre_approved: bool
) -> None:
    tools = ["manage_graph", "run_graph"]
    await profile(mesh, "builder", tools, pre_approved=["manage_graph"] if pre_approved else [])
    agents = Agents(mesh)
    desk = DecisionAnswerer(mesh)
    async with serving(mesh, RULES):
        await agents.start("builder")
        await agents.tell("builder", "make a graph that shouts, and run it")
        if not pre_approved:

            async def asked() -> Any:
                return [d for d in await desk.list() if d.raised_by == "agent:builder"]

            (decision,) = await eventually(asked)
            assert "manage_graph" in decision.title
            await desk.answer(decision.id, option="approve", by=Human("ana"))
        shown = await eventually(lambda: _turns(agents))
    assert shown.turns[0].text.startswith("started grun_")
    assert shown.turns[0].tools == ["manage_graph", "run_graph"]
    assert (await get_graph(mesh, "assistant", "shout")).spec.name == "shout"
    raised = [d for d in await desk.list() if d.raised_by == "agent:builder"]
    assert len(raised) == (0 if pre_approved else 1)


async def _turns(agents: Agents) -> Any:
    shown = await agents.show("builder")
    return shown.turns and shown
