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
from plait.profiles import AgentProfile

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
        agents: the graph's agent and every agent a node names.
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
    agents: frozenset[str]

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

    def tools_named(self, node_id: str) -> list[str]:
        """The tools node ``node_id`` names itself (its kind says where)."""
        node = self.node(node_id)
        return [tool for _, tool in self.kinds[node_id].tools(node)]

    def tools_needed(self, profiles: Mapping[str, AgentProfile]) -> set[str]:
        """Every tool a run of this graph may call: those its nodes name (their
        ``verify`` checks too), and for a node that names none but runs an agent's turn
        with its profile's tools, that profile's (``profiles``: the profiles of
        :attr:`agents`; one missing gives nothing)."""
        needed: set[str] = set()
        for node_id, node in self.nodes.items():
            kind = self.kinds[node_id]
            needed.update(tool for _, tool in kind.tools(node))
            if node.verify:
                needed.add(node.verify)
            if kind.agent_tools(node):
                profile = profiles.get(kind.agent(node) or self.agent)
                if profile is not None:
                    needed.update(profile.tools)
        return needed


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
        agents=frozenset(
            a for a in (spec.agent, *(kinds[i].agent(n) for i, n in nodes.items())) if a
        ),
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


def compile_graph(spec: GraphSpec, *, sha256: str | None = None) -> CompiledGraph:
    """The compiled graph of ``spec``, from the cache when its identity is there.

    Call it once where a graph enters (a run's start, a serving process's read of a
    pinned version, the in-session runner) and pass the compiled graph on: the engine
    and the executors take nothing else.

    Args:
        spec: the spec.
        sha256: the spec's hash when the caller knows it already (a stored version).
    """
    return _compile_cached(spec, sha256)


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


__all__ = [
    "CompiledGraph",
    "GraphKey",
    "cached_graph",
    "compile_graph",
]
