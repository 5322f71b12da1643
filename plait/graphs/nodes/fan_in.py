"""The ``fan_in`` kind: waits for every incoming branch, then fires."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from plait.graphs.nodes.base import GraphView, NodeBase, NodeKind, TemplateField, Visit
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext, render


class FanInNode(NodeBase):
    """Waits for every incoming branch (every instance of a fan-out target), then fires."""

    type: Literal["fan_in"]
    aggregate_template: str | None = None


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, FanInNode)
    if node.aggregate_template:
        return NodeResult(value=render(node.aggregate_template, ctx, node=v.key))
    combined: list[Any] = []
    for pred in v.graph.predecessors(v.key):
        value = ctx.outputs.get(pred)
        is_fanned = any(pred in f.policies for f in state.fanouts.values())
        combined.extend(value if is_fanned and isinstance(value, list) else [value])
    return NodeResult(value=combined)


def _templates(node: FanInNode) -> Iterator[TemplateField]:
    if node.aggregate_template is not None:
        yield ".aggregate_template", node.aggregate_template, False


def _reads(node: FanInNode, graph: GraphView) -> Iterator[str]:
    yield from graph.incoming(node.id)


KIND = NodeKind(
    type="fan_in",
    spec=FanInNode,
    execute=_execute,
    shape=("[\\", "/]"),
    templates=_templates,
    reads=_reads,
    joins=True,
)
"""The fan-in kind."""

__all__ = ["KIND", "FanInNode"]
