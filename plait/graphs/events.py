"""The engine's events: what a transition did, as typed records.

:func:`plait.graphs.engine.complete` returns them beside the new state; the in-session
runner builds its trajectory from them, a durable run writes them to its audit chain
(through :meth:`as_data`, the stored form).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeAlias


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


class _Stored:
    """The stored form of an event: a dict of its fields, ``type`` first."""

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


@dataclass(frozen=True, slots=True)
class NodeWaiting(_Stored):
    """A visit parked the run on a person (a decision, an approval) or a child run."""

    node: str
    visit: int
    ask: str
    decision_id: str | None
    usage: VisitUsage
    type: Literal["node.waiting"] = "node.waiting"


@dataclass(frozen=True, slots=True)
class NodeBudgetExhausted(_Stored):
    """A call inside a visit was refused by the budget; nothing was committed."""

    node: str
    visit: int
    error: str | None
    usage: VisitUsage
    type: Literal["node.budget_exhausted"] = "node.budget_exhausted"


@dataclass(frozen=True, slots=True)
class NodeRetrying(_Stored):
    """A visit failed on a transient error and is tried again after ``delay_s``."""

    node: str
    visit: int
    error: str | None
    failures: int
    delay_s: float
    type: Literal["node.retrying"] = "node.retrying"


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
        """The stored form, a dict with ``type`` first (``waiting`` only when parked)."""
        data = _Stored.as_data(self)
        if self.waiting is None:
            del data["waiting"]
        return data


Event: TypeAlias = (
    NodeCommitted | NodeWaiting | NodeBudgetExhausted | NodeRetrying | RunStatusChanged
)
"""An engine event."""


def as_data(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Events in their stored form (see each event's ``as_data``)."""
    return [event.as_data() for event in events]


__all__ = [
    "Event",
    "NodeBudgetExhausted",
    "NodeCommitted",
    "NodeRetrying",
    "NodeWaiting",
    "RunEventType",
    "RunStatusChanged",
    "VisitUsage",
    "as_data",
]
