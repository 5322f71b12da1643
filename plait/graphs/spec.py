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
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from plait.errors import GraphValidationError

IndeterminatePolicy: TypeAlias = Literal["retry", "verify", "escalate"]
"""What to do with a node found claimed but without an output after a crash.

``retry`` runs it again; ``verify`` runs the node's check tool first and retries only
if the effect is absent; ``escalate`` asks a human.
"""

NodeType: TypeAlias = Literal[
    "agent",
    "verifier",
    "human",
    "parallel",
    "tool",
    "begin",
    "end",
    "fan_out",
    "fan_in",
    "subgraph",
]

NODE_TYPES: tuple[str, ...] = (
    "agent",
    "verifier",
    "human",
    "parallel",
    "tool",
    "begin",
    "end",
    "fan_out",
    "fan_in",
    "subgraph",
)
"""Every node type, in its canonical spelling."""

TYPE_ALIASES: Mapping[str, str] = {"tool_call": "tool", "graph": "subgraph"}
"""Other spellings of node types accepted on input."""

_Count = Annotated[int, Field(ge=0)]
_Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]

# Upper bounds of numeric fields: far above any sane graph, low enough that one
# visit or one fan-out cannot run away with a typo'd or hostile number.
MAX_TOKENS = 1_000_000_000
MAX_DOLLARS = 100_000.0
MAX_WALL_SECONDS = 30 * 24 * 3600.0
MAX_RETRIES = 1_000
MAX_ROUNDS = 100
MAX_ATTEMPTS = 20
MAX_CONCURRENCY = 256
MAX_FAN_OUT_COUNT = 10_000
MAX_EXPIRES_AFTER_S = 366 * 24 * 3600.0
MAX_VERSION = 1_000_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class RetryPolicy(_Model):
    """How a node's visit is tried again after a transient error (429, 5xx, a timeout,
    a connection refused): up to ``attempts`` tries in all, waiting ``initial_s``,
    then twice as long each time up to ``max_s``, with jitter. Each try after the first
    counts against the run's ``retries`` budget. Configuration errors are never retried.

    Attributes:
        attempts: tries in all, the first included (1 = never retry).
        initial_s: seconds before the first retry.
        max_s: the longest wait between tries.
    """

    attempts: int = Field(default=5, ge=1, le=100)
    initial_s: float = Field(default=1.0, gt=0, le=3600, allow_inf_nan=False)
    max_s: float = Field(default=60.0, gt=0, le=86_400, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> RetryPolicy:
        if self.max_s < self.initial_s:
            raise ValueError(f"max_s ({self.max_s:g}) is below initial_s ({self.initial_s:g})")
        return self


DEFAULT_RETRY = RetryPolicy()
"""The retry policy of a node that sets none: 5 tries, 1 s doubling up to 60 s."""


class Edge(_Model):
    """A static edge of the begin/end form: ``target`` becomes ready after ``source``."""

    source: str
    target: str


class _NodeBase(_Model):
    """Fields common to every node.

    Attributes:
        id: unique within the graph; other nodes read its output as ``{{id}}``.
        description: free text for people.
        next: the node that runs after this one; None ends this path (or leaves the
            routing to ``edges`` or verdicts).
        on_indeterminate: the policy after a crash mid-node; None = the type's default
            (see :func:`default_on_indeterminate`).
        verify: the name of a check tool run first under the ``verify`` policy.
        retry: how transient errors are retried; None = :data:`DEFAULT_RETRY`.
        timeout_s: seconds each model call of the node may take; None = the model
            adapter's own timeout.
    """

    id: str
    description: str = ""
    next: str | None = None
    on_indeterminate: IndeterminatePolicy | None = None
    verify: str | None = None
    retry: RetryPolicy | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)


class LastTurns(_Model):
    """Carry only the last ``last`` turns (a user message and what answered it)."""

    last: int = Field(ge=1)


HistorySetting: TypeAlias = Literal["all", "none"] | LastTurns
"""How much of an agent node's conversation its next visit carries: ``all``, ``none``
(each visit starts afresh), or ``{last: N}`` turns (the system prompt stays)."""


class AgentNode(_NodeBase):
    """A model turn (a bounded loop of model calls and tool calls) on a rendered prompt.

    Attributes:
        history: how much of the conversation so far the next visit carries.
    """

    type: Literal["agent"]
    prompt: str
    response_format: dict[str, Any] | None = None
    agent: str | None = None
    tools: list[str] | None = None
    max_rounds: int = Field(default=8, ge=1, le=MAX_ROUNDS)
    history: HistorySetting = "all"


class VerifierNode(_NodeBase):
    """A model call whose reply ends on a verdict word that routes the flow.

    Attributes:
        verdicts: verdict word -> the node to run next (possibly an earlier one).
        max_attempts: total tries for a reply that ends on a valid verdict.
    """

    type: Literal["verifier"]
    prompt: str
    verdicts: dict[str, str] = Field(default_factory=dict)
    agent: str | None = None
    max_attempts: int = Field(default=2, ge=1, le=MAX_ATTEMPTS)


class HumanNode(_NodeBase):
    """A question to a person; the run parks until the answer arrives.

    Attributes:
        options: the allowed answers; None = free text.
        expires_after_s: seconds until the question expires; None = never.
        on_expire: ``fail`` ends the run; ``default`` takes ``default`` as the answer.
    """

    type: Literal["human"]
    ask: str
    options: list[str] | None = None
    expires_after_s: float | None = Field(
        default=None, gt=0, le=MAX_EXPIRES_AFTER_S, allow_inf_nan=False
    )
    on_expire: Literal["fail", "default"] = "fail"
    default: str | None = None


def _tasks(value: Any) -> str | list[str]:
    # One clear message instead of one error per member of ``str | list[str]``.
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise PydanticCustomError(
        "tasks_type", "expected a list of task templates, or a path like researcher.urls"
    )


_Tasks = Annotated[
    str | list[str],
    PlainValidator(_tasks),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
]


class ParallelNode(_NodeBase):
    """Read-only workers, one per task; the combined answers are the node's output.

    Attributes:
        tasks: task templates, or a path to a list in an upstream output
            (``"researcher.urls"``).
        prompt: the worker prompt per task; ``{{item}}`` is the task.
    """

    type: Literal["parallel"]
    tasks: _Tasks
    prompt: str = "{{item}}"
    agent: str | None = None
    max_concurrency: int = Field(default=4, ge=1, le=MAX_CONCURRENCY)


class ToolNode(_NodeBase):
    """One direct call of a tool the graph's agent has; string args are templates."""

    type: Literal["tool"]
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class BeginNode(_NodeBase):
    """The entry of the begin/end form; its output is the run's input."""

    type: Literal["begin"]
    input_schema: dict[str, Any] | None = None


class EndNode(_NodeBase):
    """A sink of the begin/end form; reaching any end node ends that path."""

    type: Literal["end"]


class FanOutSpec(_Model):
    """One dispatch strategy of a fan-out node.

    Attributes:
        kind: ``broadcast`` runs ``target_node_id`` ``count`` times; ``tee`` runs each
            of ``targets`` once; ``map`` runs ``target_node_id`` once per element of the
            list at ``source_path`` in ``source_node_id``'s output.
        source_path: a dotted path (``"urls"``, ``"a.b[2]"``); ``""`` is the output itself.
        on_failure: ``fail_fast`` ends the run at the first failed instance;
            ``drain_then_fail`` waits for all siblings first; ``collect`` records the
            error in the aggregated list and goes on.
        max_concurrency: instances in flight at once; None = all.
    """

    kind: Literal["broadcast", "tee", "map"]
    target_node_id: str | None = None
    count: int | None = Field(default=None, ge=1, le=MAX_FAN_OUT_COUNT)
    targets: list[str] | None = None
    source_node_id: str | None = None
    source_path: str = ""
    on_failure: Literal["fail_fast", "drain_then_fail", "collect"] = "fail_fast"
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)


class FanOutNode(_NodeBase):
    """A pure dispatcher: its targets live on ``specs``, never on edges or ``next``."""

    type: Literal["fan_out"]
    specs: list[FanOutSpec] = Field(min_length=1)


class FanInNode(_NodeBase):
    """Waits for every incoming branch (every instance of a fan-out target), then fires."""

    type: Literal["fan_in"]
    aggregate_template: str | None = None


class SubgraphNode(_NodeBase):
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


def normalize_node_data(data: Any) -> Any:
    """Return raw node data with ``kind`` moved to ``type`` and type aliases resolved."""
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    if "kind" in out:
        kind = out.pop("kind")
        if "type" in out and TYPE_ALIASES.get(out["type"], out["type"]) != TYPE_ALIASES.get(
            kind, kind
        ):
            raise PydanticCustomError(
                "type_kind_mismatch",
                "type {type} and kind {kind} disagree",
                {"type": json.dumps(out["type"]), "kind": json.dumps(kind)},
            )
        out.setdefault("type", kind)
    if isinstance(out.get("type"), str):
        out["type"] = TYPE_ALIASES.get(out["type"], out["type"])
    return out


Node: TypeAlias = Annotated[
    AgentNode
    | VerifierNode
    | HumanNode
    | ParallelNode
    | ToolNode
    | BeginNode
    | EndNode
    | FanOutNode
    | FanInNode
    | SubgraphNode,
    Field(discriminator="type"),
    BeforeValidator(normalize_node_data),
]
"""Any node, discriminated on ``type``."""


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
    if isinstance(node, ToolNode) and not tool_is_read_only:
        return "escalate"
    return "retry"


def on_indeterminate_policy(node: Node, tool_is_read_only: bool = False) -> IndeterminatePolicy:
    """The node's own ``on_indeterminate``, or its type's default."""
    return node.on_indeterminate or default_on_indeterminate(node, tool_is_read_only)


@dataclass
class _Index:
    """Lookups the engine makes on every step, built once per node and edge list."""

    nodes: list[Node]
    edges: list[Edge]
    by_id: dict[str, Node] = field(default_factory=dict)
    succ: dict[str, list[str]] = field(default_factory=dict)
    pred: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes: list[Node], edges: list[Edge]) -> _Index:
        index = cls(nodes, edges)
        for node in nodes:
            index.by_id.setdefault(node.id, node)
            index.succ.setdefault(node.id, [])
            index.pred.setdefault(node.id, [])
        links = [(n.id, n.next) for n in nodes if n.next is not None]
        links += [(e.source, e.target) for e in edges]
        for source, target in links:
            succ = index.succ.setdefault(source, [])
            if target not in succ:
                succ.append(target)
                index.pred.setdefault(target, []).append(source)
        return index


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

    _index: _Index | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _drop_schema_key(cls, data: Any) -> Any:
        # Editors point "$schema" at graph_json_schema(); it is no part of the graph.
        if isinstance(data, Mapping) and "$schema" in data:
            return {k: v for k, v in data.items() if k != "$schema"}
        return data

    def _indexed(self) -> _Index:
        # Built on first use and again whenever model_copy(update=...) swapped the lists.
        index = self._index
        if index is None or index.nodes is not self.nodes or index.edges is not self.edges:
            index = self._index = _Index.build(self.nodes, self.edges)
        return index

    def node(self, node_id: str) -> Node:
        """The node with this id; raises KeyError if there is none."""
        try:
            return self._indexed().by_id[node_id]
        except KeyError:
            raise KeyError(f"graph {self.name!r} has no node {node_id!r}") from None

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
        return list(self._indexed().succ[node_id])

    def predecessors(self, node_id: str) -> list[str]:
        """Every node whose ``next`` or edge leads here (verdict routes excluded)."""
        self.node(node_id)
        return list(self._indexed().pred[node_id])

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
    "on_indeterminate_policy",
]
