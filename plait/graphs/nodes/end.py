"""The ``end`` kind: a sink of the begin/end form; reaching any end node ends that path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from plait.graphs.nodes.base import GraphView, NodeBase, NodeKind, Visit
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext


class EndNode(NodeBase):
    """A sink of the begin/end form; reaching any end node ends that path."""

    type: Literal["end"]


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    # The output of whichever node leading here committed last.
    preds = [p for p in v.graph.incoming(v.key) if p in state.outputs]
    if not preds:
        return NodeResult(value=None)
    latest = max(preds, key=lambda p: state.outputs[p].seq)
    return NodeResult(value=v.values.get(latest))


def _reads(node: EndNode, graph: GraphView) -> Iterator[str]:
    yield from graph.incoming(node.id)


KIND = NodeKind(
    type="end",
    spec=EndNode,
    execute=_execute,
    shape=("([", "])"),
    reads=_reads,
    sink=True,
    no_next="an end node has no successor",
    no_edges="an end node has no outgoing edges ({link})",
)
"""The end kind."""

__all__ = ["KIND", "EndNode"]
