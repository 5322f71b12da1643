"""The ``agents`` capability programs get: create and tell an agent actor (served like any
other), and run one turn on an agent in this process."""

from __future__ import annotations

import pytest

from plait.agents import Agents
from plait.errors import BudgetExhausted, ConfigError
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.programs import SharedBudget, grant_all, run_source

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
        assert out["status"] == "completed" and isinstance(out["told"], str)

        async def both() -> object:
            shown = await agents.show("helper")
            return len(shown.turns) == 2 and shown

        shown = await eventually(both)
    assert sorted(t.text for t in shown.turns) == ["noted the news", "summary done"]


async def test_a_task_a_program_runs_spends_the_programs_budget_and_reports_it(
    mesh: Mesh,
) -> None:
    await profile(mesh, "helper", [])
    usage = {"input_tokens": 3, "output_tokens": 2}
    agents = Agents(mesh, model=ScriptedModel([{"node": "helper", "text": "ok", "usage": usage}]))
    budget = SharedBudget(tokens=12)
    grants = grant_all(mesh, agents=agents, budget=budget)
    once = await run_source("return await agents.run('go', agent='helper')", None, grants)
    assert once["usage"] == {"input_tokens": 3, "output_tokens": 2, "dollars": 0.0}
    loop = "while True:\n    await agents.run('go', agent='helper')"
    with pytest.raises(BudgetExhausted, match="12 token"):
        await run_source(loop, None, grants)
    assert budget.used_tokens == 15  # the turn that passed 12 was paid for; none after
    with pytest.raises(ConfigError, match="no budget="):
        await run_source("await agents.run('go', budget=None)", None, grants)
