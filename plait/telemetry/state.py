"""Whether this process traces and counts, set once by :mod:`plait.telemetry.setup`.

Every instrumented place asks :data:`STATE` first: with tracing and metrics off (the
default) that is one attribute read, and nothing of the SDK runs on the hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TelemetryState:
    """This process's telemetry switches.

    Attributes:
        tracing: spans are made and exported.
        metrics: the Prometheus metrics count.
        capture_content: model spans carry prompt and completion text (escaped and cut
            to ``content_chars``); off by default.
        content_chars: the most characters of content a span attribute carries.
        provider: the SDK tracer provider this process set up, if any (its span
            processor is the one plait's spans go to).
        emit: hands an ended :class:`~plait.telemetry.light.LightSpan` and its end time
            (epoch ns) to the SDK (set while ``tracing``).
        sample_root: whether a new trace (its id, its root span's name) is sampled, as
            the configured sampler says (None: every one).
    """

    tracing: bool = False
    metrics: bool = False
    capture_content: bool = False
    content_chars: int = 2000
    provider: Any = None
    emit: Callable[[Any, int], None] | None = None
    sample_root: Callable[[int, str], bool] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


STATE = TelemetryState()
"""The one state of this process."""

__all__ = ["STATE", "TelemetryState"]
