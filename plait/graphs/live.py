"""What an in-session run shows as it happens: its models' replies as they stream and
each visit as it commits (``run_graph(..., on_event=)``, ``Graph.stream(input)``).

A durable run's watchers read its live channel instead (:mod:`plait.runs.channel`);
here the run is in this process, so its events go straight to a callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from plait.graphs.trajectory import TrajectoryStep

SessionEventKind = Literal["delta", "step", "end"]
"""What a session event is.

- ``"delta"``: a piece of the reply a node's model streams (``text``).
- ``"step"``: a visit committed (``step``).
- ``"end"``: the run stopped: done, failed or waiting on a person (``run``); the last.
"""


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One event of an in-session run.

    Attributes:
        kind: what it is (see :data:`SessionEventKind`).
        node: the node (or fan-out instance) it is about, for ``delta`` and ``step``.
        visit: that node's visit.
        text: for ``delta``: the piece of text.
        step: for ``step``: the committed visit.
        run: for ``end``: the :class:`~plait.graphs.session.GraphRun`, as
            :func:`~plait.graphs.session.run_graph` returns it (typed loosely here: the
            session module imports this one).
    """

    kind: SessionEventKind
    node: str | None = None
    visit: int | None = None
    text: str | None = None
    step: TrajectoryStep | None = None
    run: Any = None


OnEvent = Callable[[SessionEvent], None]
"""Called with each event of an in-session run, in order; it must not block."""


class SessionLive:
    """The :class:`~plait.graphs.ports.LivePort` of an in-session run: each streamed
    piece becomes a ``delta`` event."""

    def __init__(self, on_event: OnEvent) -> None:
        self.on_event = on_event

    def delta(self, key: str, visit: int, text: str) -> None:
        """Hand one streamed piece on as a ``delta`` event."""
        self.on_event(SessionEvent("delta", node=key, visit=visit, text=text))


__all__ = ["OnEvent", "SessionEvent", "SessionEventKind", "SessionLive"]
