"""The graph spec: the pydantic models of a graph file.

A graph is a name, an agent, an entry (or a ``begin`` node and ``edges``), a budget and
nodes. Nodes are a union discriminated on ``type``; ``kind`` is accepted in its place,
as are the spellings ``tool_call`` (for ``tool``) and ``graph`` (for ``subgraph``), so
files in either form import. These models check field types only; the structure of a
graph (targets, reachability, tools, agents) is checked by
:func:`plait.graphs.validate.validate_graph`, which reports every problem at once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeAlias, Union

from pydantic import (
    BeforeValidator,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from plait.errors import GraphValidationError
from plait.graphs.nodes import KINDS, kind_of
from plait.graphs.nodes.agent import AgentNode, HistorySetting, LastTurns
from plait.graphs.nodes.base import (
    DEFAULT_RETRY,
    MAX_DOLLARS,
    MAX_RETRIES,
    MAX_TOKENS,
    MAX_VERSION,
    MAX_WALL_SECONDS,
    IndeterminatePolicy,
    NodeBase,
    RetryPolicy,
    SpecModel,
)
from plait.graphs.nodes.begin import BeginNode
from plait.graphs.nodes.end import EndNode
from plait.graphs.nodes.fan_in import FanInNode
from plait.graphs.nodes.fan_out import FanOutNode, FanOutSpec
from plait.graphs.nodes.human import HumanNode
from plait.graphs.nodes.parallel import ParallelNode
from plait.graphs.nodes.subgraph import SubgraphNode
from plait.graphs.nodes.tool import ToolNode
from plait.graphs.nodes.verifier import VerifierNode

NodeType: TypeAlias = str
"""A node type: a key of :data:`plait.graphs.nodes.KINDS`."""

NODE_TYPES: tuple[str, ...] = tuple(KINDS)
"""Every node type, in its canonical spelling."""

TYPE_ALIASES: Mapping[str, str] = {"tool_call": "tool", "graph": "subgraph"}
"""Other spellings of node types accepted on input."""

_Count = Annotated[int, Field(ge=0)]
_Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]

_Model = SpecModel


class Budget(_Model):
    """The limits of one run; spending past any of them ends the run.

    A bare integer stands for ``{"steps": n}``.

    Attributes:
        steps: node executions allowed (every revisit of a loop counts).
        tokens: model tokens, in and out; None = unlimited.
        dollars: model spend; None = unlimited.
        wall_seconds: seconds spent running nodes (time parked on a person does not
            count); None = unlimited.
        retries: re-executions of indeterminate or failed nodes; None = unlimited.
        on_exhausted: ``fail`` ends the run; ``escalate`` parks it for a human, who
            alone may raise the budget.
    """

    steps: int = Field(default=25, ge=1)
    tokens: Annotated[_Count, Field(le=MAX_TOKENS)] | None = None
    dollars: Annotated[_Amount, Field(le=MAX_DOLLARS)] | None = None
    wall_seconds: Annotated[_Amount, Field(le=MAX_WALL_SECONDS)] | None = None
    retries: Annotated[_Count, Field(le=MAX_RETRIES)] | None = None
    on_exhausted: Literal["fail", "escalate"] = "fail"

    @model_validator(mode="before")
    @classmethod
    def _int_shorthand(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"steps": data}
        return data


class Edge(_Model):
    """A static edge of the begin/end form: ``target`` becomes ready after ``source``."""

    source: str
    target: str


def normalize_node_data(data: Any) -> Any:
    """Return raw node data with ``kind`` moved to ``type`` and type aliases resolved."""
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    if "kind" in out:
        kind = out.pop("kind")
        if "type" in out and _canonical(out["type"]) != _canonical(kind):
            raise PydanticCustomError(
                "type_kind_mismatch",
                "type {type} and kind {kind} disagree",
                {"type": json.dumps(out["type"]), "kind": json.dumps(kind)},
            )
        out.setdefault("type", kind)
    if "type" in out:
        out["type"] = _canonical(out["type"])
    return out


def _canonical(node_type: Any) -> Any:
    """A node type's canonical spelling (a value that is no string, as it is: the
    model refuses it)."""
    return TYPE_ALIASES.get(node_type, node_type) if isinstance(node_type, str) else node_type


if TYPE_CHECKING:
    # Outside its kind's module a node is seen through what every node has; its own
    # fields are its kind's business (see plait.graphs.nodes).
    Node: TypeAlias = NodeBase
else:
    Node = Annotated[
        Union[tuple(kind.spec for kind in KINDS.values())],  # noqa: UP007 - built from the table
        Field(discriminator="type"),
        BeforeValidator(normalize_node_data),
    ]
"""Any node, discriminated on ``type`` over the kinds of :data:`plait.graphs.nodes.KINDS`."""


def default_on_indeterminate(node: Node, tool_is_read_only: bool = False) -> IndeterminatePolicy:
    """The policy a node gets when its ``on_indeterminate`` is left unset.

    Model calls, pure data-shaping nodes and human nodes (whose decision id is derived
    from run, node and visit, so raising it again is a no-op) are safe to run again. A
    tool call is retried only when the tool is read-only; an effect might have happened
    otherwise, so a human is asked.

    Args:
        node: the node.
        tool_is_read_only: for a tool node, whether its tool is read-only.
    """
    return kind_of(node).on_indeterminate(node, tool_is_read_only)


class GraphSpec(_Model):
    """A graph: its name, agent, entry, budget, nodes and edges.

    In the begin/end form the ``begin`` node is the entry and ``entry`` may be left out.
    The model checks field types only; use
    :func:`plait.graphs.validate.validate_graph` for the structure.
    """

    name: str = Field(min_length=1)
    agent: str = "assistant"
    entry: str | None = None
    version: int = Field(default=1, ge=1, le=MAX_VERSION)
    description: str = ""
    budget: Budget = Field(default_factory=Budget)
    nodes: list[Node]
    edges: list[Edge] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _drop_schema_key(cls, data: Any) -> Any:
        # Editors point "$schema" at graph_json_schema(); it is no part of the graph.
        if isinstance(data, Mapping) and "$schema" in data:
            return {k: v for k, v in data.items() if k != "$schema"}
        return data

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (see pydantic); a copy with ``update`` has its own :meth:`sha256`."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied.__dict__.pop("_digest", None)
        return copied

    def node(self, node_id: str) -> Node:
        """The node with this id; raises KeyError if there is none."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(f"graph {self.name!r} has no node {node_id!r}")

    def links(self) -> list[tuple[str, str]]:
        """Every static ``(source, target)``: ``next`` first, then edges (verdict routes
        and fan-out dispatch excluded)."""
        links = [(n.id, n.next) for n in self.nodes if n.next is not None]
        return links + [(e.source, e.target) for e in self.edges]

    @property
    def node_ids(self) -> list[str]:
        """Every node id, in file order."""
        return [n.id for n in self.nodes]

    @property
    def entry_id(self) -> str:
        """The first node: ``entry``, or the begin node's id."""
        if self.entry is not None:
            return self.entry
        for node in self.nodes:
            if node.type == "begin":
                return node.id
        raise GraphValidationError(["entry: no entry node (set entry, or add a begin node)"])

    def successors(self, node_id: str) -> list[str]:
        """The node's ``next`` and every edge target from it (verdict routes excluded)."""
        self.node(node_id)
        found: list[str] = []
        for source, target in self.links():
            if source == node_id and target not in found:
                found.append(target)
        return found

    def predecessors(self, node_id: str) -> list[str]:
        """Every node whose ``next`` or edge leads here (verdict routes excluded)."""
        self.node(node_id)
        found: list[str] = []
        for source, target in self.links():
            if target == node_id and source not in found:
                found.append(source)
        return found

    def canonical_json(self) -> str:
        """The spec as JSON with sorted keys, no whitespace and every default filled in."""
        return json.dumps(
            self.model_dump(mode="json"),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )

    def sha256(self) -> str:
        """The hex SHA-256 of :meth:`canonical_json`: the identity a run pins."""
        return self._digest

    @cached_property
    def _digest(self) -> str:
        # Worked out once per spec: a spec is frozen, and a copy with changes drops it.
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()


def graph_json_schema() -> dict[str, Any]:
    """The JSON Schema of graph files, for editors (``"$schema"`` may point at it)."""
    schema = GraphSpec.model_json_schema()
    schema["properties"]["$schema"] = {"type": "string"}
    budget = schema["properties"]["budget"]
    schema["properties"]["budget"] = {
        "anyOf": [{"type": "integer", "minimum": 1}, {"$ref": "#/$defs/Budget"}],
        "description": "the run's limits; a bare integer is the step budget",
        **{k: v for k, v in budget.items() if k not in ("$ref", "allOf")},
    }
    defs = schema["$defs"]
    reverse: dict[str, list[str]] = {}
    for alias, canonical in TYPE_ALIASES.items():
        reverse.setdefault(canonical, []).append(alias)
    for ref in schema["properties"]["nodes"]["items"]["oneOf"]:
        node_def = defs[ref["$ref"].rsplit("/", 1)[1]]
        canonical = node_def["properties"]["type"]["const"]
        spelled = {"enum": [canonical, *reverse.get(canonical, [])]}
        node_def["properties"]["type"] = dict(spelled)
        node_def["properties"]["kind"] = dict(spelled)
        node_def["required"] = [r for r in node_def["required"] if r != "type"]
        node_def["anyOf"] = [{"required": ["type"]}, {"required": ["kind"]}]
    schema["properties"]["nodes"]["minItems"] = 1  # validate_graph: at least one node
    # The discriminator mapping names only the canonical spellings; plain oneOf works.
    schema["properties"]["nodes"]["items"].pop("discriminator", None)
    return schema


__all__ = [
    "DEFAULT_RETRY",
    "NODE_TYPES",
    "TYPE_ALIASES",
    "AgentNode",
    "BeginNode",
    "Budget",
    "Edge",
    "EndNode",
    "FanInNode",
    "FanOutNode",
    "FanOutSpec",
    "GraphSpec",
    "HistorySetting",
    "HumanNode",
    "IndeterminatePolicy",
    "LastTurns",
    "Node",
    "NodeType",
    "ParallelNode",
    "RetryPolicy",
    "SubgraphNode",
    "ToolNode",
    "VerifierNode",
    "default_on_indeterminate",
    "graph_json_schema",
    "normalize_node_data",
]
