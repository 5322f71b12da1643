"""``agents show`` gives one coherent picture of a busy actor: each message told is in
its backlog or among its turns, never both or neither, and its figures count the turns
listed."""

from __future__ import annotations

import pytest

from plait.agents import Agents
from plait.mesh import Mesh

from .conftest import eventually, profile, serving

pytestmark = pytest.mark.anyio

MESSAGES = 25


async def test_show_reads_backlog_turns_and_state_as_one(mesh: Mesh) -> None:
    await profile(mesh, "busy", [])
    agents = Agents(mesh)
    await agents.start("busy", turns_kept=MESSAGES)
    told = {await agents.tell("busy", f"task {i}") for i in range(MESSAGES)}
    shows = 0
    async with serving(mesh, [{"text": "ok"}]):

        async def coherent_until_done() -> bool:
            nonlocal shows
            shown = await agents.show("busy", turns=MESSAGES)
            shows += 1
            waiting = {e.key.rsplit("/", 1)[1] for e in shown.messages}
            handled = {t.message for t in shown.turns}
            assert waiting.isdisjoint(handled), waiting & handled
            assert waiting | handled == told
            assert shown.backlog == len(waiting)
            assert shown.state.turns == len(shown.turns)
            assert shown.conversation == 2 * len(shown.turns)
            return not waiting

        await eventually(coherent_until_done)
    assert shows > 1
