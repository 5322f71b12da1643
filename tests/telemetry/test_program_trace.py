"""A program node's nested ``agents.run`` turns are in its run's trace, under its visit."""

from __future__ import annotations

import pytest

from plait.agents import Agents
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.runs import Runs, serve
from tests._support.otlp import SpanRecord, traced
from tests.programs import sample_programs
from tests.runs.helpers import settle, store

pytestmark = pytest.mark.anyio

GRAPH = {
    "name": "spender",
    "agent": "assistant",
    "entry": "spend",
    "nodes": [
        {
            "id": "spend",
            "type": "program",
            "ref": "sample-spend",
            "input": {"task": "count {{input}}", "agent": "assistant", "times": 2},
        }
    ],
}


def ancestors(spans: list[SpanRecord], span: SpanRecord) -> list[str]:
    by_id = {s.span_id: s for s in spans}
    names, at = [], span
    while at.parent_id in by_id:
        at = by_id[at.parent_id]
        names.append(at.name)
    return names


async def test_agents_run_in_a_program_node_joins_the_runs_trace(mesh: Mesh) -> None:
    assert sample_programs.spend  # registers sample-spend in the default catalog
    await store(mesh, GRAPH)
    with traced() as finished:
        async with serve(mesh, model=ScriptedModel([{"text": "ok"}]), beat=False, agents=Agents):
            runs = Runs(mesh)
            done = await settle(runs, (await runs.start("assistant", "spender", "sheep")).run_id)
        spans = finished()
    assert done.status == "done", done.error
    (run,) = [s for s in spans if s.name == "run assistant/spender"]
    chats = [s for s in spans if s.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 2 and {s.trace_id for s in chats} == {run.trace_id}
    for chat in chats:
        assert ancestors(spans, chat)[-2:] == ["visit spend", "run assistant/spender"]
    assert sum(s.get("gen_ai.usage.output_tokens") for s in chats) == done.usage.output_tokens
