"""A task published on a topic and the agent turn it causes share a trace: the
publisher's context rides with the event, the router's delivery is its child, and the
subscriber's turn the delivery's child. The subscriber sees the event's data as
published, without the context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait.agents import Agents
from plait.mesh import open_mesh
from plait.models import ScriptedModel
from plait.profiles import AgentProfile, put_profile
from plait.runs import serve
from tests._support.otlp import SpanRecord, traced
from tests.runs.helpers import eventually

pytestmark = pytest.mark.anyio

RULES: list[dict[str, Any]] = [
    {
        "node": "dispatcher",
        "round": 1,
        "tool_calls": [
            {
                "name": "mesh_publish",
                "arguments": {"topic": "tasks.new", "kind": "task", "data": {"id": "t1"}},
            }
        ],
    },
    {"node": "dispatcher", "round": 2, "text": "dispatched"},
    {"node": "worker", "text": "did {{prompt.data.id}}"},
]


def one(spans: list[SpanRecord], name: str) -> SpanRecord:
    (found,) = [s for s in spans if s.name == name]
    return found


async def test_a_published_task_and_the_turn_it_causes_share_a_trace(tmp_path: Path) -> None:
    with traced() as finished:
        async with open_mesh(f"sqlite:///{tmp_path / 'mesh.db'}") as mesh:
            await put_profile(mesh, AgentProfile(name="dispatcher", tools=["mesh_publish"]))
            await put_profile(mesh, AgentProfile(name="worker"))
            agents = Agents(mesh)
            async with serve(mesh, model=ScriptedModel(RULES), beat=False, agents=Agents):
                await agents.start("dispatcher")
                await agents.start("w1", profile="worker", topics=["tasks.new"])
                await agents.tell("dispatcher", "hand out t1")

                async def worked() -> Any:
                    shown = await agents.show("w1")
                    return shown if shown.turns else None

                shown = await eventually(worked)
                await eventually(
                    lambda: _async([s for s in finished() if s.name == "invoke_agent w1"])
                )
        spans = finished()
    assert shown.turns[0].text == "did t1"
    assert json.loads(shown.turns[0].prompt)["data"] == {"id": "t1"}  # no context in it

    dispatcher = one(spans, "invoke_agent dispatcher")
    publish = one(spans, "execute_tool mesh_publish")
    delivery = one(spans, "deliver tasks.new")
    worker = one(spans, "invoke_agent w1")
    assert publish.parent_id == dispatcher.span_id
    assert delivery.parent_id == publish.span_id
    assert worker.parent_id == delivery.span_id
    assert len({s.trace_id for s in (dispatcher, publish, delivery, worker)}) == 1
    assert worker.get("gen_ai.operation.name") == "invoke_agent"
    assert worker.get("messaging.destination.name") == "tasks.new"
    chat = [s for s in spans if s.name.startswith("chat ") and s.parent_id == worker.span_id]
    assert chat and chat[0].trace_id == dispatcher.trace_id


async def _async(value: Any) -> Any:
    return value
