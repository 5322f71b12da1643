"""The engine's events: what a transition did, as typed records.

:func:`plait.graphs.engine.complete` (and the owner's decisions: ``recheck``,
``escalate``, ``status_events``) return them beside the new state; the in-session
runner builds its trajectory from them, and a durable run hands them as they are to
:meth:`plait.runs.commit.RunCommit.step`, which chains each into the audit log from its
:meth:`~_Stored.audit` parts in one pass. ``as_data`` is the flat form tests and tools
print; no commit goes through it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, NamedTuple, TypeAlias


@dataclass(frozen=True, slots=True)
class VisitUsage:
    """What one visit spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0

    def as_data(self) -> dict[str, float]:
        """The stored form: ``{input_tokens, output_tokens, dollars}``."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "dollars": self.dollars,
        }


class AuditParts(NamedTuple):
    """What the audit chain records of an engine event, beside its ``type``.

    Attributes:
        node, visit: the node visit it is about, if any.
        verdict, error: a verifier's verdict; a failure's message.
        usage: what the visit spent (None: nothing).
        detail: every other field, as the audit event's ``detail`` holds it.
    """

    node: str | None
    visit: int | None
    verdict: str | None
    error: str | None
    usage: VisitUsage | None
    detail: dict[str, Any]


class _Stored:
    """The flat form of an event: a dict of its fields, ``type`` first."""

    __slots__ = ()
    type: str

    def as_data(self) -> dict[str, Any]:
        """The stored form, a dict with ``type`` first."""
        data: dict[str, Any] = {"type": self.type}
        for name in _field_names(type(self)):
            value = getattr(self, name)
            data[name] = value.as_data() if isinstance(value, VisitUsage) else value
        return data


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """The field names of an event class, found once (``fields`` builds them per call)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


@dataclass(frozen=True, slots=True)
class NodeCommitted(_Stored):
    """A visit committed its output (or its error)."""

    node: str
    visit: int
    seq: int
    verdict: str | None
    error: str | None
    usage: VisitUsage
    started_at: float
    ended_at: float
    type: Literal["node.committed"] = "node.committed"

    def audit(self) -> AuditParts:
        """What the audit chain records (the state's ``seq`` is not: the chain has its own)."""
        detail = {"started_at": self.started_at, "ended_at": self.ended_at}
        return AuditParts(self.node, self.visit, self.verdict, self.error, self.usage, detail)


@dataclass(frozen=True, slots=True)
class NodeWaiting(_Stored):
    """A visit parked the run on a person (a decision, an approval) or a child run."""

    node: str
    visit: int
    ask: str
    decision_id: str | None
    usage: VisitUsage
    type: Literal["node.waiting"] = "node.waiting"

    def audit(self) -> AuditParts:
        """What the audit chain records: the ask and its decision in ``detail``."""
        detail = {"ask": self.ask, "decision_id": self.decision_id}
        return AuditParts(self.node, self.visit, None, None, self.usage, detail)


@dataclass(frozen=True, slots=True)
class NodeBudgetExhausted(_Stored):
    """A call inside a visit was refused by the budget; nothing was committed."""

    node: str
    visit: int
    error: str | None
    usage: VisitUsage
    type: Literal["node.budget_exhausted"] = "node.budget_exhausted"

    def audit(self) -> AuditParts:
        """What the audit chain records."""
        return AuditParts(self.node, self.visit, None, self.error, self.usage, {})


@dataclass(frozen=True, slots=True)
class NodeRetrying(_Stored):
    """A visit failed on a transient error and is tried again after ``delay_s``."""

    node: str
    visit: int
    error: str | None
    failures: int
    delay_s: float
    type: Literal["node.retrying"] = "node.retrying"

    def audit(self) -> AuditParts:
        """What the audit chain records: the failure count and the delay in ``detail``."""
        detail = {"failures": self.failures, "delay_s": self.delay_s}
        return AuditParts(self.node, self.visit, None, self.error, None, detail)


@dataclass(frozen=True, slots=True)
class NodeIndeterminate(_Stored):
    """A visit interrupted mid-flight, its effect unknown, parked on a person's choice
    to retry it (its node's ``on_indeterminate`` is ``escalate``)."""

    node: str
    visit: int
    type: Literal["node.indeterminate"] = "node.indeterminate"

    def audit(self) -> AuditParts:
        """What the audit chain records."""
        return AuditParts(self.node, self.visit, None, None, None, {})


@dataclass(frozen=True, slots=True)
class RunResumed(_Stored):
    """A parked run goes on (or ends): what it waited on closed.

    For a run parked on a child run, ``child`` names it and ``status`` is its status;
    otherwise ``status`` is the decision's, with its ``answer`` and who closed it
    (``by``; ``expiry`` for an expired one).
    """

    node: str
    status: str
    child: str | None = None
    decision_id: str | None = None
    answer: str | None = None
    by: str | None = None
    type: Literal["run.resumed"] = "run.resumed"

    def as_data(self) -> dict[str, Any]:
        """The flat form: a child run's fields, or a decision's."""
        if self.child is not None:
            return {
                "type": self.type,
                "node": self.node,
                "child": self.child,
                "status": self.status,
            }
        return {"type": self.type, "node": self.node, **self._decision()}

    def audit(self) -> AuditParts:
        """What the audit chain records: the child's or the decision's fields in ``detail``."""
        detail = (
            {"child": self.child, "status": self.status}
            if self.child is not None
            else self._decision()
        )
        return AuditParts(self.node, None, None, None, None, detail)

    def _decision(self) -> dict[str, Any]:
        return {
            "decision_id": self.decision_id,
            "status": self.status,
            "answer": self.answer,
            "by": self.by,
        }


RunEventType: TypeAlias = Literal["run.done", "run.failed", "run.waiting", "run.cancelled"]
"""The types of a run's status changes."""


@dataclass(frozen=True, slots=True)
class RunStatusChanged(_Stored):
    """The run ended, or parked: ``type`` is ``run.`` and the first word of ``status``."""

    type: RunEventType
    status: str
    ended_detail: str | None
    error: str | None
    waiting: dict[str, Any] | None = None

    def as_data(self) -> dict[str, Any]:
        """The flat form, a dict with ``type`` first (``waiting`` only when parked)."""
        data = _Stored.as_data(self)
        if self.waiting is None:
            del data["waiting"]
        return data

    def audit(self) -> AuditParts:
        """What the audit chain records: the status (and what it waits on) in ``detail``."""
        detail: dict[str, Any] = {"status": self.status, "ended_detail": self.ended_detail}
        if self.waiting is not None:
            detail["waiting"] = self.waiting
        return AuditParts(None, None, None, self.error, None, detail)


Event: TypeAlias = (
    NodeCommitted
    | NodeWaiting
    | NodeBudgetExhausted
    | NodeRetrying
    | NodeIndeterminate
    | RunResumed
    | RunStatusChanged
)
"""An engine event."""


__all__ = [
    "AuditParts",
    "Event",
    "NodeBudgetExhausted",
    "NodeCommitted",
    "NodeIndeterminate",
    "NodeRetrying",
    "NodeWaiting",
    "RunEventType",
    "RunResumed",
    "RunStatusChanged",
    "VisitUsage",
]
