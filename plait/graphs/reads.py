"""Which outputs a node reads: what its templates name, and what its kind consumes.

Runners load exactly these values before a visit (a durable run keeps outputs under
their own keys), and the trust rule taints a node by them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from plait.graphs.spec import (
    AgentNode,
    FanInNode,
    FanOutNode,
    GraphSpec,
    HumanNode,
    Node,
    ParallelNode,
    SubgraphNode,
    ToolNode,
    VerifierNode,
)
from plait.graphs.template import parse_path, references

_NOT_OUTPUTS = frozenset({"input", "item"})
_CACHE: OrderedDict[int, tuple[GraphSpec, dict[str, frozenset[str]]]] = OrderedDict()
_CACHE_SIZE = 64


def node_reads(spec: GraphSpec, node: Node) -> frozenset[str]:
    """The node and instance ids whose outputs ``node`` reads (cached per spec)."""
    cached = _CACHE.get(id(spec))
    if cached is None or cached[0] is not spec:
        cached = (spec, {n.id: frozenset(_reads(spec, n)) for n in spec.nodes})
        _CACHE[id(spec)] = cached
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(id(spec))
    return cached[1][node.id]


def reads_input(node: Node) -> bool:
    """Whether ``node`` reads the run's input: its templates name ``input``, or it is
    the begin node (whose output is the input)."""
    if node.type == "begin":
        return True
    if any(ref.name == "input" for t in _templates(node) for ref in references(t)):
        return True
    return (
        isinstance(node, ParallelNode)
        and isinstance(node.tasks, str)
        and parse_path(node.tasks)[0] == "input"
    )


def incoming(spec: GraphSpec, node_id: str) -> list[str]:
    """Nodes that lead to ``node_id``: by ``next``, by edge, or by a verdict."""
    found = list(spec.predecessors(node_id))
    for other in spec.nodes:
        if isinstance(other, VerifierNode) and node_id in other.verdicts.values():
            if other.id not in found:
                found.append(other.id)
    return found


def _templates(node: Node) -> Iterator[str]:
    if isinstance(node, AgentNode | VerifierNode):
        yield node.prompt
    elif isinstance(node, HumanNode):
        yield node.ask
    elif isinstance(node, ParallelNode):
        yield node.prompt
        if isinstance(node.tasks, list):
            yield from node.tasks
    elif isinstance(node, ToolNode):
        yield from _strings(node.args)
    elif isinstance(node, FanInNode) and node.aggregate_template:
        yield node.aggregate_template
    elif isinstance(node, SubgraphNode):
        yield from _strings(node.input)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _reads(spec: GraphSpec, node: Node) -> set[str]:
    named = {ref.name for t in _templates(node) for ref in references(t)}
    names = named - _NOT_OUTPUTS
    if "item" in named:  # a map instance's item is an element of its source's output
        names.update(
            s.source_node_id
            for other in spec.nodes
            if isinstance(other, FanOutNode)
            for s in other.specs
            if s.kind == "map" and s.target_node_id == node.id and s.source_node_id
        )
    if isinstance(node, ParallelNode) and isinstance(node.tasks, str):
        head = parse_path(node.tasks)[0]
        if head not in _NOT_OUTPUTS:
            names.add(str(head))
    if isinstance(node, FanOutNode):
        names.update(s.source_node_id for s in node.specs if s.source_node_id)
    if isinstance(node, FanInNode) or node.type == "end":
        names.update(incoming(spec, node.id))
    return names


__all__ = ["incoming", "node_reads", "reads_input"]
