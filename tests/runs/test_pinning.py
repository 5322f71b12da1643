"""A run pins its graph version: new runs take the newest, running ones finish on theirs."""

from __future__ import annotations

import pytest

from plait.decisions import Human
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs

from .helpers import hosting, settle, store

pytestmark = pytest.mark.anyio


def graph(version: int, last_prompt: str) -> dict[str, object]:
    return {
        "name": "pinned",
        "agent": "assistant",
        "entry": "ask",
        "version": version,
        "nodes": [
            {"id": "ask", "type": "human", "ask": "Go on?", "next": "last"},
            {"id": "last", "type": "agent", "prompt": last_prompt},
        ],
    }


MODEL = [
    {"node": "last", "match": "version one", "text": "finished on v1"},
    {"node": "last", "match": "version two", "text": "finished on v2"},
]


async def test_a_parked_run_finishes_on_its_version_after_a_new_one_lands(mesh: Mesh) -> None:
    await store(mesh, graph(1, "version one"))
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel(MODEL)):
        old = await settle(runs, (await runs.start("assistant", "pinned", "x")).run_id)
        assert old.status == "waiting_human" and old.graph.version == 1
        await store(mesh, graph(2, "version two"))
        new = await settle(runs, (await runs.start("assistant", "pinned", "x")).run_id)
        assert new.graph.version == 2 and new.graph.sha256 != old.graph.sha256
        await runs.resume(old.run_id, "yes", by=Human("ana"))
        await runs.resume(new.run_id, "yes", by=Human("ana"))
        old_done = await settle(runs, old.run_id, since=old)
        new_done = await settle(runs, new.run_id, since=new)
    assert await runs.output(old_done) == "finished on v1"
    assert await runs.output(new_done) == "finished on v2"
