"""Wakes: the mailbox messages of a run's owner, as one typed model.

A wake names its run and why it was sent; the record, never the wake, decides what
runs (see :mod:`plait.runs.owner`). Every sender builds a :class:`Wake` and sends
:meth:`Wake.body`; the owner parses it once per message with :meth:`Wake.parse`.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ValidationError

from plait.ids import RunId
from plait.telemetry import STATE, current_traceparent

WakeReason: TypeAlias = Literal[
    "start", "next", "retry", "tick", "budget", "child", "decision", "approval", "takeover"
]
"""Why a wake was sent:

- ``start``: the run was started (its entry node is claimed for this wake);
- ``next``: a commit claimed a node for this wake;
- ``retry``: as ``next``, for a node retried after its backoff;
- ``tick``: the fallback re-check of a parked run (``backoff`` says how many before);
- ``budget``: a person raised the run's budget;
- ``child``: a child run of a subgraph node ended;
- ``decision``, ``approval``: a decision the run waits on closed;
- ``takeover``: a runtime took over the run's partition (see :mod:`plait.runs.live`).
"""


class Wake(BaseModel):
    """One wake of a run's owner.

    Attributes:
        run: the run.
        why: why it was sent (see :data:`WakeReason`); a reason this version does not
            know (a wake sent by an older one) reads as ``next``: the record decides.
        backoff: for a ``tick``: how many ticks found the run still parked before it.
        traceparent: the W3C trace context of whoever sent it, so the run's work joins
            that trace (None: none).
    """

    run: RunId
    why: WakeReason = "next"
    backoff: int = 0
    traceparent: str | None = None

    def body(self) -> dict[str, Any]:
        """The message body as sent: ``run`` and ``why``, the rest only when set."""
        body: dict[str, Any] = {"run": self.run, "why": self.why}
        if self.backoff:
            body["backoff"] = self.backoff
        if self.traceparent is not None:
            body["traceparent"] = self.traceparent
        return body

    @classmethod
    def parse(cls, body: Any, run: str) -> Wake:
        """The wake a message body holds; ``run`` (from the owner's id) where it names
        none, and a plain ``next`` for a body that is no wake at all."""
        if isinstance(body, dict):
            fields = {**body, "run": body.get("run") or run}
            if fields.get("why") not in _REASONS:
                fields["why"] = "next"
            try:
                return cls.model_validate(fields)
            except ValidationError:
                pass
        return cls(run=RunId(run))


_REASONS = frozenset(get_args(WakeReason))


def wake(run: str, why: WakeReason, *, backoff: int = 0) -> dict[str, Any]:
    """The body of a wake of ``run`` for ``why``: :meth:`Wake.body` of that wake, built
    without the model (every commit sends one or more, and they are typed here)."""
    body: dict[str, Any] = {"run": run, "why": why}
    if backoff:
        body["backoff"] = backoff
    if STATE.tracing and why not in _WITHIN_RUN and (sender := current_traceparent()):
        body["traceparent"] = sender  # the visit it wakes links to its sender
    return body


_WITHIN_RUN = frozenset(("start", "next", "retry", "tick", "takeover"))
"""Reasons whose wakes come from the run's own course (or its start, whose sender is
the run span's parent already): the visits they cause link to no sender."""


__all__ = ["Wake", "WakeReason", "wake"]
