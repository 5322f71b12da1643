"""The compiled graph: what every step asks of a spec, worked out once per stored version.

:func:`compile_graph` turns a :class:`~plait.graphs.spec.GraphSpec` into an immutable
:class:`CompiledGraph` — the nodes by id, successors and predecessors, what leads into
each node, the fan-out dispatch, what each node reads — and keeps it in one cache keyed
by the graph's identity ``(agent, name, version, sha256)``. Two specs with that identity
are the same graph, so they share one compiled graph wherever they came from.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

from plait.graphs.nodes import kind_of
from plait.graphs.nodes.base import NodeKind
from plait.graphs.spec import Budget, GraphSpec, Node
from plait.graphs.template import references

GraphKey: TypeAlias = tuple[str, str, int, str]
"""A graph's identity: ``(agent, name, version, sha256)``."""

_NOT_OUTPUTS = frozenset({"input", "item"})


@dataclass(frozen=True, eq=False, slots=True)
class CompiledGraph:
    """A graph version, compiled: its spec and the lookups every step makes.

    Build one with :func:`compile_graph`, never by hand.

    Attributes:
        spec: the spec it was compiled from.
        sha256: the spec's hash (its identity with agent, name and version).
        nodes: every node by id (the first of a duplicated id).
        kinds: every node's kind by id.
        succ: each node's ``next`` and edge targets (verdict routes excluded).
        pred: each node's sources by ``next`` and edge.
        into: each node's sources by ``next``, edge or verdict.
        dispatch: each fan-out node's targets.
        read: each node's reads (node and instance ids whose outputs it reads).
        reads_run_input: the nodes that read the run's input.
    """

    spec: GraphSpec
    sha256: str
    nodes: Mapping[str, Node]
    kinds: Mapping[str, NodeKind[Any]]
    succ: Mapping[str, tuple[str, ...]]
    pred: Mapping[str, tuple[str, ...]]
    into: Mapping[str, tuple[str, ...]]
    dispatch: Mapping[str, tuple[str, ...]]
    read: Mapping[str, frozenset[str]]
    reads_run_input: frozenset[str]

    @property
    def key(self) -> GraphKey:
        """The graph's identity, the cache key."""
        return (self.spec.agent, self.spec.name, self.spec.version, self.sha256)

    @property
    def agent(self) -> str:
        """The graph's agent."""
        return self.spec.agent

    @property
    def budget(self) -> Budget:
        """The graph's budget."""
        return self.spec.budget

    @property
    def entry_id(self) -> str:
        """The first node (see :attr:`GraphSpec.entry_id`)."""
        return self.spec.entry_id

    def node(self, node_id: str) -> Node:
        """The node with this id; raises KeyError naming the graph if there is none."""
        node = self.nodes.get(node_id)
        if node is None:
            raise KeyError(f"graph {self.spec.name!r} has no node {node_id!r}")
        return node

    def kind(self, node_id: str) -> NodeKind[Any]:
        """The kind of node ``node_id``."""
        self.node(node_id)
        return self.kinds[node_id]

    def successors(self, node_id: str) -> Sequence[str]:
        """The node's ``next`` and every edge target from it (verdict routes excluded)."""
        self.node(node_id)
        return self.succ[node_id]

    def predecessors(self, node_id: str) -> Sequence[str]:
        """Every node whose ``next`` or edge leads here (verdict routes excluded)."""
        self.node(node_id)
        return self.pred[node_id]

    def incoming(self, node_id: str) -> Sequence[str]:
        """Nodes that lead to ``node_id``: by ``next``, by edge, or by a verdict."""
        self.node(node_id)
        return self.into[node_id]

    def reads(self, node_id: str) -> frozenset[str]:
        """The node and instance ids whose outputs node ``node_id`` reads."""
        self.node(node_id)
        return self.read[node_id]

    def reads_input(self, node_id: str) -> bool:
        """Whether node ``node_id`` reads the run's input."""
        return node_id in self.reads_run_input


Graph: TypeAlias = GraphSpec | CompiledGraph
"""A graph as the engine and executors take it: a spec is compiled through the cache."""


def _build(spec: GraphSpec, sha256: str) -> CompiledGraph:
    nodes: dict[str, Node] = {}
    for node in spec.nodes:
        nodes.setdefault(node.id, node)
    kinds = {i: kind_of(n) for i, n in nodes.items()}
    succ: dict[str, list[str]] = {i: [] for i in nodes}
    pred: dict[str, list[str]] = {i: [] for i in nodes}
    for source, target in spec.links():
        out = succ.setdefault(source, [])
        if target not in out:
            out.append(target)
            pred.setdefault(target, []).append(source)
    into = {i: list(p) for i, p in pred.items()}
    dispatch: dict[str, tuple[str, ...]] = {}
    feeds: dict[str, list[str]] = {}
    for i, node in nodes.items():
        kind = kinds[i]
        for route in kind.routes(node):
            if route.dispatch:
                dispatch[i] = (*dispatch.get(i, ()), route.target)
            elif route.target in into and i not in into[route.target]:
                into[route.target].append(i)
        for target, source in kind.feeds(node):
            if source:
                feeds.setdefault(target, []).append(source)
    topology = _Topology(spec.agent, pred, into)
    read: dict[str, frozenset[str]] = {}
    reads_run_input: set[str] = set()
    for i, node in nodes.items():
        kind = kinds[i]
        named = {ref.name for _, text, _ in kind.templates(node) for ref in references(text)}
        names = named - _NOT_OUTPUTS
        if "item" in named:  # a map instance's item is an element of its source's output
            names.update(feeds.get(i, []))
        names.update(kind.reads(node, topology))
        read[i] = frozenset(names)
        if "input" in named or kind.reads_input(node):
            reads_run_input.add(i)
    return CompiledGraph(
        spec=spec,
        sha256=sha256,
        nodes=MappingProxyType(nodes),
        kinds=MappingProxyType(kinds),
        succ=MappingProxyType({i: tuple(t) for i, t in succ.items()}),
        pred=MappingProxyType({i: tuple(t) for i, t in pred.items()}),
        into=MappingProxyType({i: tuple(t) for i, t in into.items()}),
        dispatch=MappingProxyType(dispatch),
        read=MappingProxyType(read),
        reads_run_input=frozenset(reads_run_input),
    )


@dataclass(frozen=True, slots=True)
class _Topology:
    """The graph as a kind's ``reads`` sees it while the compiled graph is being built."""

    agent: str
    pred: Mapping[str, list[str]]
    into: Mapping[str, list[str]]

    def predecessors(self, node_id: str) -> Sequence[str]:
        return self.pred.get(node_id, [])

    def incoming(self, node_id: str) -> Sequence[str]:
        return self.into.get(node_id, [])


_CACHE: OrderedDict[GraphKey, CompiledGraph] = OrderedDict()
_CACHE_SIZE = 256
_LOCK = threading.Lock()


def compile_graph(graph: Graph, *, sha256: str | None = None) -> CompiledGraph:
    """The compiled graph of ``graph``, from the cache when its identity is there.

    Args:
        graph: a spec (a compiled graph is returned as it is).
        sha256: the spec's hash when the caller knows it already (a stored version).
    """
    if isinstance(graph, CompiledGraph):
        return graph
    # A spec is frozen, so the compiled graph it was last found as rides on it: each
    # step of a run asks several times, and skips the hash, the lock and the lookup.
    # Like a cached_property it is kept in the instance's __dict__, which pydantic does
    # not serialize; GraphSpec.model_copy drops it with changes.
    riding: _Riding | None = graph.__dict__.get(_ON_SPEC)
    if riding is not None and riding.graph is not None:
        if sha256 is None or riding.graph.sha256 == sha256:
            return riding.graph
    found = _compile_cached(graph, sha256)
    graph.__dict__[_ON_SPEC] = _Riding(found)
    return found


_ON_SPEC = "_compiled"


class _Riding:
    """The compiled graph riding on its spec: compared by identity (so specs still
    compare by their fields), and neither pickled nor deep-copied (a copy compiles
    again where it is used)."""

    __slots__ = ("graph",)

    def __init__(self, graph: CompiledGraph | None = None) -> None:
        self.graph = graph

    def __reduce__(self) -> tuple[type[_Riding], tuple[()]]:
        return _Riding, ()

    def __deepcopy__(self, memo: dict[int, Any]) -> _Riding:
        return _Riding()


def _compile_cached(graph: GraphSpec, sha256: str | None) -> CompiledGraph:
    sha = sha256 or graph.sha256()
    key = (graph.agent, graph.name, graph.version, sha)
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
            return found
    found = _build(graph, sha)
    with _LOCK:
        found = _CACHE.setdefault(key, found)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return found


def cached_graph(key: GraphKey) -> CompiledGraph | None:
    """The compiled graph of identity ``key`` if the cache holds it."""
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
        return found


def node_reads(graph: Graph, node: Node) -> frozenset[str]:
    """The node and instance ids whose outputs ``node`` reads."""
    return compile_graph(graph).reads(node.id)


__all__ = [
    "CompiledGraph",
    "Graph",
    "GraphKey",
    "cached_graph",
    "compile_graph",
    "node_reads",
]
