"""A subgraph node in a durable run: the stored child graph runs to completion."""

from __future__ import annotations

import pytest

from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs

from .helpers import agent_chain, hosting, settle, store

pytestmark = pytest.mark.anyio

CHILD = agent_chain("summarise", ["shorten", "polish"])
PARENT = {
    "name": "report",
    "agent": "assistant",
    "entry": "gather",
    "nodes": [
        {"id": "gather", "type": "agent", "prompt": "Gather {{input}}", "next": "child"},
        {"id": "child", "type": "subgraph", "graph": "summarise", "input": "{{gather}}",
         "next": "finish"},
        {"id": "finish", "type": "agent", "prompt": "Finish with {{child}}"},
    ],
}  # fmt: skip


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            {"node": "gather", "text": "raw notes"},
            {"node": "shorten", "match": "raw notes", "text": "short notes"},
            {"node": "polish", "match": "short notes", "text": "polished notes"},
            {"node": "finish", "match": "polished notes", "text": "the report"},
        ]
    )


async def test_a_subgraph_node_runs_its_stored_child(mesh: Mesh) -> None:
    await store(mesh, CHILD)
    await store(mesh, PARENT)
    runs = Runs(mesh)
    async with hosting(mesh, model()):
        rec = await settle(runs, (await runs.start("assistant", "report", "Q3")).run_id)
    assert rec.status == "done", rec.error
    assert await runs.output(rec) == "the report"
    steps = {s["node"]: s["output"] for s in await runs.trajectory(rec.run_id)}
    assert steps["child"] == "polished notes"


async def test_a_missing_child_version_fails_the_run_clearly(mesh: Mesh) -> None:
    await store(mesh, CHILD)
    pinned = [{**n, "version": 9} if n["id"] == "child" else n for n in PARENT["nodes"]]
    await store(mesh, {**PARENT, "name": "report-pinned", "nodes": pinned})
    runs = Runs(mesh)
    async with hosting(mesh, model()):
        rec = await settle(runs, (await runs.start("assistant", "report-pinned", "Q3")).run_id)
    assert rec.status == "failed"
    assert rec.error is not None and "summarise" in rec.error and "9" in rec.error
