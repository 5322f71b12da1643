"""The run state: everything the engine needs to decide what runs next.

Drawn before any node runs (the state schema is the architecture). The same model is
the in-session runner's memory and the durable run record at ``runs/<run_id>``; the
record stays small because large values (outputs, prompts) may live under their own
keys, with :attr:`NodeOutput.ref` pointing at them.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from plait.ids import DecisionId, RunId

RunStatus = Literal[
    "ready",
    "running",
    "waiting_human",
    "waiting_approval",
    "waiting_child",
    "done",
    "failed",
    "cancelled",
]
"""Where a run stands.

- ``ready``: a node may run; nothing is in flight.
- ``running``: a node is in flight.
- ``waiting_human``: parked on a decision a person must answer.
- ``waiting_approval``: parked on a tool call a person must approve.
- ``waiting_child``: parked while the child run of a subgraph node runs (durable runs).
- ``done``: finished; ``output`` holds the result.
- ``failed``: ended without a result; ``ended_detail`` says why.
- ``cancelled``: stopped by a person.
"""

TERMINAL: frozenset[str] = frozenset({"done", "failed", "cancelled"})
"""Statuses after which nothing runs again."""

_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__

WaitingKind = Literal["human", "approval", "budget", "indeterminate", "subgraph"]
"""What a parked run waits for: a human node's answer, a tool approval, a budget raise,
a person's call on an interrupted node, or a subgraph node's child run."""


def copied(model: _M, changes: dict[str, Any]) -> _M:
    """A shallow copy of ``model`` with ``changes`` (field values, not validated).

    What ``model_copy(update=changes)`` does, for the engine's few copies per step:
    pydantic's copy goes through ``copy.copy`` for each of its four slots, which is
    most of its cost on the hot path. Models here have no extra fields and no private
    attributes, so the copy is their ``__dict__`` and the set of fields given.
    """
    new = model.__class__.__new__(model.__class__)
    values = model.__dict__.copy()
    values.update(changes)
    _set(new, "__dict__", values)
    _set(new, "__pydantic_fields_set__", model.__pydantic_fields_set__ | changes.keys())
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


class GraphRef(BaseModel):
    """The graph version a run is pinned to."""

    model_config = ConfigDict(frozen=True)

    agent: str
    name: str
    version: int
    sha256: str


class RunUsage(BaseModel):
    """What a run has spent; budgets are checked against it before a transition commits."""

    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    wall_seconds: float = 0.0
    retries: int = 0

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class NodeOutput(BaseModel):
    """The latest output of a node (or fan-out instance).

    Attributes:
        value: the output value, unless it lives under ``ref``.
        ref: the mesh key holding the value, when stored apart from the record.
        error: set when the node failed (a failed instance kept by ``collect``).
        visit: the visit that produced it (1-based).
        seq: the run's transition number at which it was committed.
        verdict: a verifier's verdict word.
        tainted: the value carries outside content (see :mod:`plait.tools.trust`).
        at: commit time, epoch seconds.
    """

    value: Any = None
    ref: str | None = None
    error: str | None = None
    visit: int = 1
    seq: int = 0
    verdict: str | None = None
    tainted: bool = False
    at: float = 0.0


class Attempt(BaseModel):
    """A node claimed and in flight: the fence a commit must still hold.

    Attributes:
        node: the node or instance id.
        visit: the visit it runs as; a retry of an interrupted attempt keeps it.
        nonce: fresh per claim; only the holder of this nonce may commit the node.
        host: who claimed it.
        wake: the id of the mailbox message whose handling claimed it; that message
            arriving again means the claimer died before committing.
        started_at: epoch seconds.
        begun: False while a commit has claimed it and no handler has started it yet;
            True once a handler recorded that it started (done only for nodes whose
            ``on_indeterminate`` asks a check or a person, whom an attempt that did
            nothing must not trouble); None when not recorded.
    """

    node: str
    visit: int
    nonce: str
    host: str = ""
    wake: str | None = None
    started_at: float = 0.0
    begun: bool | None = None


class Waiting(BaseModel):
    """What a parked run waits on."""

    node: str
    kind: WaitingKind
    ask: str
    decision_id: DecisionId | None = None
    options: list[str] | None = None
    tool: str | None = None
    """For an approval: the tool whose call waits."""
    visit: int | None = None
    """The visit of ``node`` that asks (None for a budget)."""
    child: RunId | None = None
    """For a subgraph: the child run it waits on."""


class InstancePlan(BaseModel):
    """One fan-out instance: the node it runs and, for a map, its list index."""

    target: str
    index: int
    item_index: int | None = None


class FanOutState(BaseModel):
    """The instances a fan-out node spawned and how their failures are handled."""

    node: str
    instances: dict[str, InstancePlan] = Field(default_factory=dict)
    policies: dict[str, str] = Field(default_factory=dict)
    """on_failure per target node id."""
    items: dict[str, list[Any]] = Field(default_factory=dict)
    """map targets: the list the instances were made from."""


class RunState(BaseModel):
    """The run record: the single source of truth of a run."""

    run_id: RunId
    graph: GraphRef
    input: Any = None
    input_tainted: bool = False
    """The input came from outside (``input_untrusted``): what reads it is tainted."""
    status: RunStatus = "ready"
    ready: list[str] = Field(default_factory=list)
    attempts: dict[str, Attempt] = Field(default_factory=dict)
    outputs: dict[str, NodeOutput] = Field(default_factory=dict)
    tainted_history: list[str] = Field(default_factory=list)
    """Keys whose carried conversation holds outside content (see :mod:`plait.tools.trust`)."""
    visits: dict[str, int] = Field(default_factory=dict)
    decisions: dict[str, str] = Field(default_factory=dict)
    fanouts: dict[str, FanOutState] = Field(default_factory=dict)
    waiting: Waiting | None = None
    usage: RunUsage = Field(default_factory=RunUsage)
    budget_extra: dict[str, float] = Field(default_factory=dict)
    """Limits raised by a person on top of the graph's budget (steps, tokens, ...)."""
    output_node: str | None = None
    """The node whose output is the run's output."""
    ended_detail: str | None = None
    error: str | None = None
    error_node: str | None = None
    """The node (or instance) whose failure ended the run, if one did."""
    error_visit: int | None = None
    """That node's visit."""
    retrying: dict[str, int] = Field(default_factory=dict)
    """Failed tries so far of each node being retried after a transient error."""
    seq: int = 0
    """Committed transitions so far (also the audit event count)."""
    last_hash: str = ""
    """Hash of the newest audit event."""
    created_at: float = 0.0
    updated_at: float = 0.0
    parent: str | None = None
    """``<run_id>/<node>`` of the subgraph node that started this run, if any."""

    @property
    def terminal(self) -> bool:
        """True once the run is done, failed or cancelled."""
        return self.status in TERMINAL

    def instance_of(self, key: str) -> InstancePlan | None:
        """The fan-out plan of an instance id, or None for a plain node."""
        for fanout in self.fanouts.values():
            plan = fanout.instances.get(key)
            if plan is not None:
                return plan
        return None


__all__ = [
    "TERMINAL",
    "Attempt",
    "FanOutState",
    "GraphRef",
    "InstancePlan",
    "NodeOutput",
    "RunState",
    "RunStatus",
    "RunUsage",
    "Waiting",
    "WaitingKind",
    "copied",
]
