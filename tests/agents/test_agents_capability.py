"""The ``agents`` capability programs get: create and tell an agent actor (served like any
other), and run one turn on an agent in this process."""

from __future__ import annotations

import pytest

from plait.agents import Agents
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.programs import grant_all, run_source

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio

PROGRAM = """
made = await agents.create("helper", topics=["news"])
told = await agents.tell("helper", "summarise " + payload["what"])
quick = await agents.run("review it", agent="helper")
await mesh.publish("news", "item", {"n": 1})
return {"actor": made["id"], "told": told, "quick": quick["text"], "status": quick["status"]}
"""


async def test_a_program_creates_tells_and_runs_agents(mesh: Mesh) -> None:
    await profile(mesh, "helper", ["mesh_get"])
    rules = [
        {"node": "helper", "match": "summarise", "text": "summary done"},
        {"node": "helper", "match": "review", "text": "looks fine"},
        {"node": "helper", "match": "news", "text": "noted the news"},
    ]
    agents = Agents(mesh, model=ScriptedModel(rules))
    async with serving(mesh, rules):
        out = await run_source(PROGRAM, {"what": "the week"}, grant_all(mesh, agents=agents))
        assert out["actor"] == "agent:helper" and out["quick"] == "looks fine"
        assert out["status"] == "done" and isinstance(out["told"], str)

        async def both() -> object:
            shown = await agents.show("helper")
            return len(shown.turns) == 2 and shown

        shown = await eventually(both)
    assert sorted(t.text for t in shown.turns) == ["noted the news", "summary done"]
