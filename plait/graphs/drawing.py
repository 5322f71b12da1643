"""A graph spec as data to draw: its nodes in layers, its edges, each node's kind.

What :mod:`plait.graphs.mermaid` writes as a flowchart, given as a structure a client
draws itself (the web console draws it as SVG): no client parses Mermaid back.
Layers are the breadth-first distance from the entry node (nodes it never reaches
come last, one layer of their own), slots the order within a layer.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from pydantic import BaseModel, Field

from plait.graphs.compiled import compile_graph
from plait.graphs.nodes import kind_of
from plait.graphs.spec import GraphSpec

EdgeKind = Literal["next", "route", "dispatch"]
"""How an edge leads on:

- ``next``: the node's ``next`` or an edge of the graph (drawn solid, unlabelled).
- ``route``: a verdict's target (drawn solid, labelled by its word).
- ``dispatch``: a fan-out's target (drawn dotted, labelled by its strategy).
"""


class DrawnNode(BaseModel):
    """One node of a drawing."""

    id: str = Field(description="The node's id.")
    kind: str = Field(description="Its type: agent, human, tool, fan_out, ...")
    entry: bool = Field(description="Whether the graph starts here.")
    layer: int = Field(ge=0, description="Its row: the steps from the entry node.")
    slot: int = Field(ge=0, description="Its place within the row, from 0.")


class DrawnEdge(BaseModel):
    """One edge of a drawing."""

    source: str = Field(description="The node it leaves.")
    target: str = Field(description="The node it leads to.")
    kind: EdgeKind
    label: str | None = Field(default=None, description="A verdict word or a strategy.")


class GraphDrawing(BaseModel):
    """A graph version as nodes and edges to draw."""

    agent: str
    name: str
    version: int
    sha256: str
    entry: str = Field(description="The entry node's id.")
    layers: int = Field(ge=0, description="How many rows the nodes take.")
    nodes: list[DrawnNode]
    edges: list[DrawnEdge]


def edges_of(spec: GraphSpec) -> list[DrawnEdge]:
    """Every edge of ``spec``: routes (verdicts, dispatch), then plain links not
    already drawn as a route between the same two nodes."""
    graph = compile_graph(spec)
    found: list[DrawnEdge] = []
    routed: set[tuple[str, str]] = set()
    for node in spec.nodes:
        for route in kind_of(node).routes(node):
            kind: EdgeKind = "dispatch" if route.dispatch else "route"
            found.append(
                DrawnEdge(source=node.id, target=route.target, kind=kind, label=route.label)
            )
            routed.add((node.id, route.target))
    for node in spec.nodes:
        for target in graph.successors(node.id):
            if (node.id, target) not in routed:
                found.append(DrawnEdge(source=node.id, target=target, kind="next"))
                routed.add((node.id, target))
    return found


def draw(spec: GraphSpec, *, version: int, sha256: str) -> GraphDrawing:
    """``spec`` (stored as ``version`` with ``sha256``) as a drawing."""
    edges = edges_of(spec)
    entry = spec.entry_id
    out: dict[str, list[str]] = {}
    for edge in edges:
        out.setdefault(edge.source, []).append(edge.target)
    layer: dict[str, int] = {entry: 0}
    queue = deque([entry])
    while queue:
        here = queue.popleft()
        for target in out.get(here, []):
            if target not in layer:
                layer[target] = layer[here] + 1
                queue.append(target)
    last = max(layer.values(), default=-1)
    slots: dict[int, int] = {}
    nodes: list[DrawnNode] = []
    for node in spec.nodes:
        row = layer.get(node.id, last + 1)
        slot = slots.get(row, 0)
        slots[row] = slot + 1
        nodes.append(
            DrawnNode(id=node.id, kind=node.type, entry=node.id == entry, layer=row, slot=slot)
        )
    return GraphDrawing(
        agent=spec.agent,
        name=spec.name,
        version=version,
        sha256=sha256,
        entry=entry,
        layers=max(slots, default=-1) + 1,
        nodes=nodes,
        edges=edges,
    )


__all__ = ["DrawnEdge", "DrawnNode", "EdgeKind", "GraphDrawing", "draw", "edges_of"]
