"""Node kinds: one module each, found through one table.

Each module holds a kind's spec model and its :class:`~plait.graphs.nodes.base.NodeKind`:
its templates, validation, what it reads, how it executes, where it routes and how it
is drawn. :data:`KINDS` is the only list of kinds; the spec's node union, the validator,
the compiled graph, the executors, the engine and the drawing all look a node's kind up
here. Adding a kind is one new module and one line below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.graphs.nodes import (
    agent,
    begin,
    end,
    fan_in,
    fan_out,
    human,
    parallel,
    program,
    subgraph,
    tool,
    verifier,
    workflow,
)
from plait.graphs.nodes.base import NodeBase, NodeKind

KINDS: Mapping[str, NodeKind[Any]] = {
    kind.type: kind
    for kind in (
        agent.KIND,
        verifier.KIND,
        human.KIND,
        parallel.KIND,
        tool.KIND,
        begin.KIND,
        end.KIND,
        fan_out.KIND,
        fan_in.KIND,
        subgraph.KIND,
        program.KIND,
        workflow.KIND,
    )
}
"""Every node kind by its canonical type, in the order the file format documents them."""


def kind_of(node: NodeBase) -> NodeKind[Any]:
    """The kind of a parsed node."""
    return KINDS[node.type]


__all__ = ["KINDS", "NodeKind", "kind_of"]
