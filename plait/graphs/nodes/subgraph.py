"""The ``subgraph`` kind: runs a child graph to completion; its result is the output."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import Field

from plait.errors import GraphError
from plait.graphs.nodes.base import (
    MAX_VERSION,
    NodeBase,
    NodeKind,
    TemplateField,
    Visit,
    named_agent,
)
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState, Waiting
from plait.graphs.template import TemplateContext, render_value


class SubgraphNode(NodeBase):
    """Runs a child graph to completion; its result is the node's output.

    Attributes:
        graph: the child graph's name, under ``agent`` (default: the parent's agent).
        version: the pinned version; None = the newest at the time the node runs.
        input: the template rendered as the child's input.
    """

    type: Literal["subgraph"]
    graph: str
    agent: str | None = None
    version: int | None = Field(default=None, ge=1, le=MAX_VERSION)
    input: str = "{{input}}"


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, SubgraphNode)
    if env.subgraphs is None:
        raise GraphError(
            f"node {v.key!r}: no graph store is available to run subgraph {node.graph!r}"
        )
    child_input = render_value(node.input, ctx, node=v.key)
    value = await env.subgraphs(
        node.agent or v.graph.agent,
        node.graph,
        node.version,
        child_input,
        v.key,
        v.visit,
        not v.trusted,
    )
    if isinstance(value, Waiting):  # the child runs on its own: park until it ends
        return NodeResult(waiting=value)
    if isinstance(value, NodeResult):  # a child run's output, with what it spent
        return value
    return NodeResult(value=value)


def _templates(node: SubgraphNode) -> Iterator[TemplateField]:
    yield ".input", node.input, False


KIND = NodeKind(
    type="subgraph",
    calls_model=True,
    spec=SubgraphNode,
    execute=_execute,
    shape=("[[", "]]"),
    templates=_templates,
    agent=named_agent,
)
"""The subgraph kind."""

__all__ = ["KIND", "SubgraphNode"]
