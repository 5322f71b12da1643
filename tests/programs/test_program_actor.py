"""Program actors: ``agents.create(name, program=REF)`` makes an agent actor whose every
message runs REF once (promoted, if saved), not a model turn."""

from __future__ import annotations

from typing import Any

import pytest

from plait.agents import Agents
from plait.agents.store import last_turns
from plait.decisions import Human
from plait.errors import ProgramNotFound, ProgramNotPromoted
from plait.mesh import Mesh
from plait.programs import promote, save_program
from tests.agents.conftest import eventually, serving

pytestmark = pytest.mark.anyio

COUNT = """
me = await mesh.self()
entry = await mesh.get("counts/" + payload.name)
seen = entry["value"] if entry else []
await mesh.put("counts/" + payload.name, seen + [payload.message],
               if_version=entry["version"] if entry else 0)
return {"me": me["id"], "seen": len(seen) + 1}
"""

LOSE_A_RACE = """
await mesh.put("taken", 1, if_version=0)
return "took it"
"""


async def test_each_message_runs_the_program_once_with_its_input(mesh: Mesh) -> None:
    await save_program(mesh, "count", COUNT)
    await promote(mesh, "count", 1, by=Human("ana"))
    agents = Agents(mesh)
    made = await agents.create("counter", program="count", input={"name": "c"})
    assert made["id"] == "agent:counter"
    async with serving(mesh, []):  # no model rule: a model turn would fail
        await agents.tell("agent:counter", "one")  # its actor id, as mesh.self() names it
        await agents.tell("counter", "two")

        async def handled() -> Any:
            turns = await last_turns(mesh, "counter", 10)
            return len(turns) == 2 and turns

        turns = await eventually(handled)
    counted = await mesh.get("counts/c")
    assert counted is not None and counted.value == ["one", "two"]
    assert [t.text for t in turns] == [
        '{"me": "agent:counter", "seen": 1}',
        '{"me": "agent:counter", "seen": 2}',
    ]


async def test_a_program_that_loses_a_race_settles_its_message(mesh: Mesh) -> None:
    await save_program(mesh, "race", LOSE_A_RACE)
    await promote(mesh, "race", 1, by=Human("ana"))
    await mesh.put("taken", 0)
    agents = Agents(mesh)
    await agents.create("racer", program="race")
    async with serving(mesh, []):
        await agents.tell("racer", "go")

        async def settled() -> Any:
            return await last_turns(mesh, "racer", 10)

        turns = await eventually(settled)
    assert turns[0].outcome == "conflict" and "taken" in turns[0].text
    assert (await agents.show("racer")).backlog == 0


async def test_the_program_must_exist_and_be_promoted(mesh: Mesh) -> None:
    agents = Agents(mesh)
    with pytest.raises(ProgramNotFound):
        await agents.create("ghost", program="no-such-program")
    await save_program(mesh, "count", COUNT)
    with pytest.raises(ProgramNotPromoted, match="--version 1"):
        await agents.create("counter", program="count")
