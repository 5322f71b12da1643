"""The run environment's answers about a run's nodes, without serving it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from plait.decisions import DecisionAsker
from plait.graphs import engine
from plait.graphs.compiled import compile_graph
from plait.graphs.spec import GraphSpec
from plait.graphs.state import Attempt
from plait.mesh.memory import MemoryMesh
from plait.runs.env import RunEnvironment
from plait.runs.record import RunRecord
from plait.runs.store import RunStore
from plait.tools import ToolContext, ToolRegistry, tool

GRAPH = {
    "name": "mixed",
    "entry": "look",
    "nodes": [
        {"id": "look", "type": "tool", "tool": "peek", "next": "pay"},
        {"id": "pay", "type": "tool", "tool": "charge", "next": "put"},
        {"id": "put", "type": "tool", "tool": "files.put", "next": "think"},
        {"id": "think", "type": "agent", "prompt": "go", "next": "careful"},
        {"id": "careful", "type": "agent", "prompt": "go", "on_indeterminate": "escalate"},
    ],
}


def environment() -> RunEnvironment:
    registry = ToolRegistry()

    @tool("peek", read_only=True)
    async def peek(args: dict[str, Any], ctx: ToolContext) -> str:
        return "seen"

    @tool("charge")
    async def charge(args: dict[str, Any], ctx: ToolContext) -> str:
        return "charged"

    @tool("files.put", idempotent=True)
    async def put(args: dict[str, Any], ctx: ToolContext) -> str:
        return "put (twice is as once)"

    registry.register(peek)
    registry.register(charge)
    registry.register(put)
    mesh = MemoryMesh()
    return RunEnvironment(
        mesh, RunStore(mesh), DecisionAsker(mesh), tools=registry, model=None, cwd=Path.cwd()
    )


@pytest.mark.parametrize(
    ("node", "policy"),
    [
        ("look", "retry"),
        ("pay", "escalate"),
        ("put", "retry"),  # idempotent (an MCP tool's idempotentHint): retried
        ("think", "retry"),
        ("careful", "escalate"),
    ],
)
def test_a_crashed_visit_gets_its_nodes_policy_or_its_kinds_default(node: str, policy: str) -> None:
    spec = compile_graph(GraphSpec.model_validate(GRAPH))
    state = engine.start(spec, run_id="r1", input=None, now=time.time())
    rec = RunRecord.model_validate(state.model_dump())
    crashed = Attempt(node=node, visit=1, nonce="n", host="h", wake="w", started_at=0.0)
    assert environment().on_indeterminate(spec, rec, crashed) == policy
