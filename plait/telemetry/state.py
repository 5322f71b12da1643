"""Whether this process traces and counts, set once by :mod:`plait.telemetry.setup`.

Every instrumented place asks :data:`STATE` first: with tracing and metrics off (the
default) that is one attribute read, and nothing of the SDK runs on the hot path.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Tracer


@dataclass
class TelemetryState:
    """This process's telemetry switches.

    Attributes:
        tracing: spans are made and exported.
        metrics: the Prometheus metrics count.
        capture_content: model spans carry prompt and completion text (escaped and cut
            to ``content_chars``); off by default.
        content_chars: the most characters of content a span attribute carries.
        tracer: the tracer spans are made with (set while ``tracing``).
        provider: the SDK tracer provider this process set up, if any.
    """

    tracing: bool = False
    metrics: bool = False
    capture_content: bool = False
    content_chars: int = 2000
    tracer: Tracer | None = None
    provider: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


STATE = TelemetryState()
"""The one state of this process."""

FORCED_IDS: ContextVar[tuple[int, int] | None] = ContextVar("plait_forced_ids", default=None)
"""The trace id and span id the next span made in this context must take (a run's
span, whose ids are fixed by its run id so every process parents its visits under it)."""

__all__ = ["FORCED_IDS", "STATE", "TelemetryState"]
