"""The spans plait makes: recorded in a few attributes, handed to the SDK at their end.

The SDK's own ``Span`` takes a lock, a sampler call and a validation of every attribute
per span; on a transition of a durable run (a visit, a model call, a commit) that was
most of tracing's cost. A :class:`LightSpan` is an API ``Span`` kept in plain fields;
when it ends, :data:`~plait.telemetry.state.STATE` ``.emit`` (set up with the SDK by
:func:`~plait.telemetry.setup.enable_tracing`) queues it for the export thread, which
makes the SDK's ``ReadableSpan`` of it (:mod:`plait.telemetry.export`), so exporters
see ordinary SDK spans.

Sampling follows the parent's flag (the ``parentbased_*`` samplers' rule); a root span
asks the configured sampler (``OTEL_TRACES_SAMPLER``) through ``STATE.sample_root``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.util import types

from plait.telemetry.state import STATE

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSAMPLED = TraceFlags(TraceFlags.DEFAULT)
_UNSET = Status(StatusCode.UNSET)  # immutable: every span starts with this one


class LightSpan(Span):
    """A recording span in plain fields (see the module docstring).

    Attributes:
        name: the span's name.
        context: its own span context.
        parent: its parent's span context (None: a root span).
        attributes: its attributes, values already of the types OpenTelemetry takes.
        links: its links.
        kind: its kind.
        start_ns: when it started, in epoch nanoseconds.
        status: its status.
        events: ``(name, attributes, time_ns)`` of the events added to it.
    """

    __slots__ = (
        "attributes",
        "context",
        "ended",
        "events",
        "kind",
        "links",
        "name",
        "parent",
        "start_ns",
        "status",
    )

    def __init__(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, Any],
        links: Sequence[Link],
        kind: SpanKind,
        start_ns: int,
    ) -> None:
        self.name = name
        self.context = context
        self.parent = parent
        self.attributes = attributes
        self.links = links
        self.kind = kind
        self.start_ns = start_ns
        self.status = _UNSET
        self.events: list[tuple[str, dict[str, Any], int]] = []
        self.ended = False

    def end(self, end_time: int | None = None) -> None:
        """End it and hand it to the SDK (once)."""
        if self.ended:
            return
        self.ended = True
        emit = STATE.emit
        if emit is not None:
            emit(self, end_time if end_time is not None else time.time_ns())

    def get_span_context(self) -> SpanContext:
        """Its span context."""
        return self.context

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        """Set ``attributes`` (None values are left out)."""
        for key, value in attributes.items():
            if value is not None:
                self.attributes[key] = value

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        """Set one attribute."""
        if value is not None:
            self.attributes[key] = value

    def add_event(
        self, name: str, attributes: types.Attributes = None, timestamp: int | None = None
    ) -> None:
        """Add an event."""
        self.events.append((name, dict(attributes or {}), timestamp or time.time_ns()))

    def update_name(self, name: str) -> None:
        """Rename it."""
        self.name = name

    def is_recording(self) -> bool:
        """Whether it still records (until it ends)."""
        return not self.ended

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """Set its status."""
        self.status = status if isinstance(status, Status) else Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """Add an ``exception`` event for ``exception``."""
        self.add_event(
            "exception",
            {
                "exception.type": type(exception).__name__,
                "exception.message": str(exception)[:500],
                **dict(attributes or {}),
            },
            timestamp,
        )


def start(
    name: str,
    attributes: Mapping[str, Any],
    parent: SpanContext,
    *,
    links: Sequence[Link] = (),
    kind: SpanKind = SpanKind.INTERNAL,
    start_time: float | None = None,
    ids: tuple[int, int] | None = None,
) -> Span:
    """A span under ``parent`` (an invalid context: a root span), with ``ids`` (trace id,
    span id) if given; a non-recording one where the trace is not sampled.

    ``attributes`` may hold None values (left out); the span keeps its own copy."""
    valid = parent[5]  # is_valid, trace_id, trace_flags: read without property calls
    if valid:
        trace_id, flags = parent[0], parent[3]
    else:
        trace_id = ids[0] if ids is not None else random.getrandbits(128) or 1
        sample = STATE.sample_root
        flags = _SAMPLED if sample is None or sample(trace_id, name) else _UNSAMPLED
    span_id = ids[1] if ids is not None else random.getrandbits(64) or 1
    context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags)
    if not flags & 1:  # not sampled: a context to pass on, and no span work
        return NonRecordingSpan(context) if STATE.tracing else INVALID_SPAN
    return LightSpan(
        name,
        context,
        parent if valid else None,
        {k: v for k, v in attributes.items() if v is not None},
        links,
        kind,
        time.time_ns() if start_time is None else int(start_time * 1e9),
    )


__all__ = ["LightSpan", "start"]
