"""What every node kind shares: the base spec model and the :class:`NodeKind` contract.

A kind is one module of :mod:`plait.graphs.nodes`: its spec model and a
:class:`NodeKind` saying how the rest of the package treats it — which templates it
holds, what it checks, what it reads, how it runs, where it routes, how it is drawn.
Everything outside the kind's module asks the kind through this contract rather than
testing the node's class.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypeVar

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, model_validator

from plait.graphs.budget import VisitBudget
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext

IndeterminatePolicy: TypeAlias = Literal["retry", "verify", "escalate"]
"""What to do with a node found claimed but without an output after a crash.

``retry`` runs it again; ``verify`` runs the node's check tool first and retries only
if the effect is absent; ``escalate`` asks a human.
"""

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


class SpecModel(BaseModel):
    """A part of a graph file: unknown fields refused, frozen once parsed."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RetryPolicy(SpecModel):
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


class NodeBase(SpecModel):
    """Fields common to every node.

    Attributes:
        id: unique within the graph; other nodes read its output as ``{{id}}``.
        type: the node's kind (a key of :data:`plait.graphs.nodes.KINDS`).
        description: free text for people.
        next: the node that runs after this one; None ends this path (or leaves the
            routing to ``edges`` or verdicts).
        on_indeterminate: the policy after a crash mid-node; None = the kind's default
            (see :func:`plait.graphs.spec.default_on_indeterminate`).
        verify: the name of a check tool run first under the ``verify`` policy.
        retry: how transient errors are retried; None = :data:`DEFAULT_RETRY`.
        timeout_s: seconds each model call of the node may take; None = the model
            adapter's own timeout.
    """

    id: str
    type: str
    description: str = ""
    next: str | None = None
    on_indeterminate: IndeterminatePolicy | None = None
    verify: str | None = None
    retry: RetryPolicy | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)


class GraphView(Protocol):
    """What a kind may ask of the compiled graph its node is part of."""

    @property
    def agent(self) -> str:
        """The graph's agent."""
        ...

    def predecessors(self, node_id: str) -> Sequence[str]:
        """Every node whose ``next`` or edge leads to ``node_id``."""
        ...

    def incoming(self, node_id: str) -> Sequence[str]:
        """Every node leading to ``node_id``: by ``next``, by edge or by a verdict."""
        ...


class Checks(Protocol):
    """What a kind's validation may report to, and ask of, the whole-graph check."""

    def problem(self, path: str, message: str, hint: str | None = None) -> None:
        """Report a problem at ``path``."""
        ...

    def unknown(self, path: str, what: str, name: str, *, route: bool = True) -> None:
        """Report an unknown node name at ``path``, with the closest known id as a hint;
        ``route`` says the name is a route target (followed when guessing reach)."""
        ...

    def known(self, node_id: str) -> bool:
        """Whether the graph has a node ``node_id``."""
        ...

    def tool_schema(self, tool: str) -> Mapping[str, Any] | None:
        """The JSON schema of ``tool``'s arguments, when known."""
        ...


@dataclass(frozen=True, slots=True)
class Route:
    """A route out of a node besides ``next`` and edges.

    Attributes:
        target: the node it leads to.
        label: what it is drawn with (a verdict word, a fan-out strategy).
        dispatch: a fan-out dispatch (drawn dotted), not a verdict.
    """

    target: str
    label: str
    dispatch: bool = False


@dataclass(frozen=True, slots=True)
class Spawn:
    """One target a fan-out node starts instances of.

    Attributes:
        target: the node each instance runs.
        count: how many instances.
        on_failure: the failure policy of those instances.
        items: for a ``map``, the list the instances run over (one element each).
    """

    target: str
    count: int
    on_failure: str
    items: list[Any] | None = None


@dataclass(frozen=True, slots=True)
class Visit:
    """One node visit to execute: which key, as which visit, over which outputs.

    Attributes:
        key: the node id, or the fan-out instance id.
        node: the spec node it runs.
        visit: the visit number (a retry keeps its visit).
        values: the output values the node's templates may read, by node or instance
            id (the runner loads at least those the compiled graph's ``reads`` names).
        graph: the graph the node is part of.
        trusted: the node reads no tainted output, and carries no tainted conversation
            (see :mod:`plait.tools.trust`).
        budget: what the visit may still spend, checked before every model and tool call.
    """

    key: str
    node: NodeBase
    visit: int
    values: Mapping[str, Any]
    graph: GraphView
    trusted: bool = True
    budget: VisitBudget = field(default_factory=VisitBudget)


N = TypeVar("N", bound=NodeBase)

TemplateField: TypeAlias = tuple[str, str, bool]
"""``(path under the node, template, {{item}} allowed by the field itself)``."""

Executor: TypeAlias = Callable[[ExecEnv, RunState, Visit, TemplateContext], Awaitable[NodeResult]]
"""Runs one visit of a node: the I/O of its kind."""


def _nothing(node: Any, *_: Any) -> Iterator[Any]:
    return iter(())


def _no_check(node: Any, path: str, checks: Checks) -> None:
    return None


def _no_items(node: Any, outputs: Mapping[str, Any], key: str) -> dict[str, list[Any]]:
    return {}


def _false(node: Any) -> bool:
    return False


def _static(node: Any, result: NodeResult, successors: Sequence[str]) -> Sequence[str]:
    return successors


def _retry(node: Any, tool_is_read_only: bool) -> IndeterminatePolicy:
    return "retry"


def _no_agent(node: Any) -> str | None:
    return None


def named_agent(node: Any) -> str | None:
    """The ``agent`` a node of a kind that names one holds (its ``agent`` field)."""
    agent: str | None = node.agent
    return agent


@dataclass(frozen=True)
class NodeKind(Generic[N]):
    """One node kind: its spec model and how every part of plait treats it.

    Attributes:
        type: the canonical spelling of the kind (the spec's ``type``).
        spec: the pydantic model of its nodes.
        execute: runs one visit.
        shape: the Mermaid brackets it is drawn in.
        templates: every template the node holds, each as a :data:`TemplateField`.
        validate: kind-specific checks of one parsed node, reported to ``checks``.
        validate_routes: checks of the node's own routes, run before any node's
            ``validate`` (in file order), so a fan-out's problems come first.
        reads: node ids read besides the templates' references (``graph`` for the
            topology around it).
        reads_input: the node reads the run's input besides through templates.
        routes: its routes besides ``next`` and edges (verdicts, fan-out dispatch).
        feeds: ``(target, source)`` for each target whose ``{{item}}`` is an element
            of ``source``'s output (a ``map`` fan-out).
        tools: ``(path under the node, tool)`` for every tool it names.
        agent: the agent it names, if any (the profile its turns run as; a subgraph's
            graph agent); None for the graph's own.
        agent_tools: it may call every tool of its agent's profile (it names none).
        spawn: for a dispatcher, the instances a committed visit starts.
        items: for a dispatcher, the elements each of its targets runs over, read from
            the outputs (``TemplateError`` if they cannot be read); what a replay of a
            committed visit hands back as its result's items.
        next_nodes: where a committed visit leads, given the static successors.
        carries_history: a later visit carries this visit's conversation.
        on_indeterminate: the default policy after a crash mid-node, given whether
            its tool (if any) is read-only.
        joins: it runs once every predecessor has a newer output (fan-in).
        sink: reaching it ends its path, and its output is the run's.
        no_next: why it takes no ``next`` (None: it may).
        no_edges: why it takes no outgoing edge, with ``{link}`` (None: it may).
        calls_model: a visit may call a model (a subgraph's child graph may: it counts).
    """

    type: str
    spec: builtins.type[N]
    execute: Executor
    shape: tuple[str, str]
    templates: Callable[[N], Iterator[TemplateField]] = _nothing
    validate: Callable[[N, str, Checks], None] = _no_check
    validate_routes: Callable[[N, str, Checks], None] = _no_check
    reads: Callable[[N, GraphView], Iterator[str]] = _nothing
    reads_input: Callable[[N], bool] = _false
    routes: Callable[[N], Iterator[Route]] = _nothing
    feeds: Callable[[N], Iterator[tuple[str, str]]] = _nothing
    tools: Callable[[N], Iterator[tuple[str, str]]] = _nothing
    agent: Callable[[N], str | None] = _no_agent
    agent_tools: Callable[[N], bool] = _false
    spawn: Callable[[N, NodeResult], list[Spawn]] | None = None
    items: Callable[[N, Mapping[str, Any], str], dict[str, list[Any]]] = _no_items
    next_nodes: Callable[[N, NodeResult, Sequence[str]], Sequence[str]] = _static
    carries_history: Callable[[N], bool] = _false
    on_indeterminate: Callable[[N, bool], IndeterminatePolicy] = _retry
    joins: bool = False
    sink: bool = False
    no_next: str | None = None
    no_edges: str | None = None
    calls_model: bool = False


def strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """``(path, text)`` for every string inside ``value`` (dicts and lists walked)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from strings(item, f"{path}[{k}]")


def check_schema(checks: Checks, path: str, schema: dict[str, Any] | None) -> None:
    """Report ``schema`` at ``path`` unless it is a valid JSON schema (or None)."""
    if schema is None:
        return
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        checks.problem(path, f"not a valid JSON schema: {exc.message}")


def quoted(value: object) -> str:
    """``value`` in double quotes, as problems name what a file holds."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = [
    "DEFAULT_RETRY",
    "MAX_ATTEMPTS",
    "MAX_CONCURRENCY",
    "MAX_DOLLARS",
    "MAX_EXPIRES_AFTER_S",
    "MAX_FAN_OUT_COUNT",
    "MAX_RETRIES",
    "MAX_ROUNDS",
    "MAX_TOKENS",
    "MAX_VERSION",
    "MAX_WALL_SECONDS",
    "Checks",
    "Executor",
    "GraphView",
    "IndeterminatePolicy",
    "NodeBase",
    "NodeKind",
    "RetryPolicy",
    "Route",
    "Spawn",
    "SpecModel",
    "TemplateField",
    "Visit",
    "check_schema",
    "named_agent",
    "quoted",
    "strings",
]
