"""A turn a crash interrupted after a tool with effects outside the mesh follows the
actor's ``on_indeterminate``: ``skip`` acks it unhandled; ``escalate`` parks the actor
until a person says ``retry`` (the turn runs again) or ``skip``."""

from __future__ import annotations

from typing import Any

import pytest

from plait.agents import Agents
from plait.agents.store import InFlight, inflight_key, read_state
from plait.decisions import DecisionAnswerer, DecisionId, Human
from plait.mesh import Mesh

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio

RULES = [{"node": "careful", "text": "handled {{prompt}}"}]


async def crashed_message(mesh: Mesh, agents: Agents, text: str) -> str:
    """Tell the actor while nothing serves, and mark the message as a turn that crashed
    after running a program (as a killed worker leaves it)."""
    message_id = await agents.tell("careful", text)
    marker = InFlight(host="dead-host", attempt=1, effects=["programs_run"])
    await mesh.put(inflight_key("careful", message_id), marker.model_dump())
    return message_id


async def test_skip_acks_the_interrupted_message_unhandled(mesh: Mesh) -> None:
    await profile(mesh, "careful", ["programs_run"])
    agents = Agents(mesh)
    await agents.start("careful", on_indeterminate="skip")
    await crashed_message(mesh, agents, "first")
    await agents.tell("careful", "second")
    async with serving(mesh, RULES):

        async def both() -> Any:
            shown = await agents.show("careful")
            return len(shown.turns) == 2 and shown

        shown = await eventually(both)
    assert [(t.outcome, t.prompt) for t in shown.turns] == [
        ("skipped", "first"),
        ("answered", "second"),
    ]
    assert shown.backlog == 0


async def test_escalate_parks_until_a_person_says_retry(mesh: Mesh) -> None:
    await profile(mesh, "careful", ["programs_run"])
    agents = Agents(mesh)
    await agents.start("careful", on_indeterminate="escalate")
    await crashed_message(mesh, agents, "first")
    async with serving(mesh, RULES):

        async def parked() -> Any:
            state, _ = await read_state(mesh, "careful")
            return state.parked == "indeterminate" and state

        state = await eventually(parked)
        await agents.tell("careful", "second")  # held while parked
        desk = DecisionAnswerer(mesh)
        decision = await desk.get(DecisionId(state.decision))
        assert decision.options == ["retry", "skip"] and "programs_run" in decision.title
        await eventually(lambda: _count(mesh, "agent-actors/careful/held/", 2))
        await desk.answer(decision.id, option="retry", by=Human("ana"))

        async def both() -> Any:
            shown = await agents.show("careful")
            return len(shown.turns) == 2 and not shown.backlog and shown

        shown = await eventually(both)
    assert [t.text for t in shown.turns] == ["handled first", "handled second"]


async def _count(mesh: Mesh, prefix: str, count: int) -> bool:
    return len([e async for e in mesh.scan(prefix)]) >= count


async def test_a_message_that_keeps_failing_is_noted_and_dead_lettered(mesh: Mesh) -> None:
    await profile(mesh, "careful", [])
    agents = Agents(mesh)
    async with serving(mesh, [{"node": "careful", "error": "provider melted"}]):
        await agents.start("careful")
        await agents.tell("careful", "doomed")

        async def noted() -> Any:
            shown = await agents.show("careful")
            return shown.turns and not shown.backlog and shown  # two reads: wait for both

        shown = await eventually(noted, timeout_s=60)
    assert shown.turns[-1].outcome == "failed" and shown.backlog == 0
