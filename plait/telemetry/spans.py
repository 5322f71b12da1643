"""Spans of plait's work: runs, visits, mesh commits, topic deliveries, agent turns.

Every helper here is called only behind a check of ``STATE.tracing`` (the callers'
one-attribute test, so nothing of this runs while tracing is off). Attribute names
follow the OpenTelemetry conventions where one exists; plait's own are ``plait.*``:
the dollars a visit spent and the budget left, taint, the audit event's hash (which
links a span to the verified record) and the decision a run waits on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace import Link, Span, SpanContext, SpanKind
from opentelemetry.trace.span import NonRecordingSpan
from opentelemetry.trace.status import Status, StatusCode

import plait.telemetry.light as light
import plait.telemetry.metrics as metrics
from plait.telemetry.context import (
    format_traceparent,
    parse_traceparent,
    remote_context,
    run_span_context,
)
from plait.telemetry.state import STATE

Attributes = Mapping[str, Any]
"""Span attributes: a str, bool, int or float, or a list of one of those, each."""


def _clean(attributes: Attributes) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}


def start_span(
    name: str,
    attributes: Attributes = {},  # noqa: B006 (read, never changed)
    *,
    context: Context | None = None,
    links: Sequence[Link] = (),
    kind: SpanKind = SpanKind.INTERNAL,
    start_time: float | None = None,
    ids: tuple[int, int] | None = None,
) -> Span:
    """A new span (not made current) under the current span, or the one ``context``
    holds (an empty context: a root span, with ``ids`` if given); a no-op span while
    tracing is off."""
    if not STATE.tracing:
        return trace.INVALID_SPAN
    parent = trace.get_current_span(context).get_span_context()
    return light.start(
        name, attributes, parent, links=links, kind=kind, start_time=start_time, ids=ids
    )


class CurrentSpan:
    """A span made current for a ``with`` block, and ended after it unless told not to
    (what :func:`current` and :func:`in_run` return).

    What ``opentelemetry.trace.use_span`` does, without its two generator frames per
    block (on a durable run's path, once per visit): one context attached and detached,
    and an error escaping the block recorded on the span and marking it failed.
    """

    __slots__ = ("_end", "_token", "span")

    def __init__(self, span: Span, *, end: bool = True) -> None:
        self.span = span
        self._end = end
        self._token: Any = None

    def __enter__(self) -> Span:
        self._token = attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        detach(self._token)
        span = self.span
        # Only errors: a cancellation or GeneratorExit passing through is no failure.
        if isinstance(exc, Exception) and span.is_recording():
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))
        if self._end:
            span.end()


def current(span: Span) -> CurrentSpan:
    """Make ``span`` current for the block and end it after (an error ends it failed)."""
    return CurrentSpan(span)


def in_run(run_id: str, started_under: str | None) -> CurrentSpan:
    """Make run ``run_id``'s span current for the block (its work outside any visit:
    its start, a claim, a park), so that work joins the run's trace."""
    return CurrentSpan(NonRecordingSpan(run_span_context(run_id, started_under)), end=False)


def link_to(traceparent: str | None, **attributes: Any) -> list[Link]:
    """A link to the span ``traceparent`` names (none if it names none)."""
    ctx = parse_traceparent(traceparent)
    return [] if ctx is None else [Link(ctx, _clean(attributes))]


def annotate(attributes: Attributes) -> None:
    """Set ``attributes`` on the span current here (if tracing and it records; None
    values are left out)."""
    if not STATE.tracing:
        return
    span = trace.get_current_span()
    if span.is_recording():
        set_on(span, attributes)


def set_on(span: Span, attributes: Attributes) -> None:
    """Set ``attributes`` on ``span``, None values left out."""
    span.set_attributes(attributes if isinstance(span, light.LightSpan) else _clean(attributes))


def recording_span() -> Span | None:
    """The span current here if tracing and it records (None: nothing to annotate, so
    a caller builds no attributes for it)."""
    if not STATE.tracing:
        return None
    span = trace.get_current_span()
    return span if span.is_recording() else None


def current_span() -> Span:
    """The span current here (a no-op span if none)."""
    return trace.get_current_span()


def fail(span: Span, message: str) -> None:
    """Mark ``span`` failed with ``message``."""
    span.set_status(Status(StatusCode.ERROR, message[:500]))


def visit_span(
    run_id: str,
    started_under: str | None,
    node: str,
    visit: int,
    *,
    attempt: int = 1,
    caused_by: str | None = None,
    attributes: Attributes = {},  # noqa: B006 (read, never changed)
) -> Span:
    """The span of one visit of ``node`` in run ``run_id``: a child of the run's span;
    linked to ``caused_by`` (the wake's sender: a person's answer, a budget raise) where
    a parent would be wrong, since the run had parked."""
    if not STATE.tracing:
        return trace.INVALID_SPAN
    return light.start(
        f"visit {node}",
        {
            "plait.run.id": run_id,
            "plait.node.id": node,
            "plait.node.visit": visit,
            "plait.node.attempt": attempt,
            **attributes,
        },
        run_span_context(run_id, started_under),  # its parent, with no Context built
        links=link_to(caused_by, **{"plait.link": "woken_by"}) if caused_by else (),
    )


def run_span(
    run_id: str,
    started_under: str | None,
    *,
    name: str,
    started_at: float,
    status: str,
    attributes: Attributes = {},  # noqa: B006 (read, never changed)
) -> None:
    """Emit run ``run_id``'s span, from its start to now, once it ended ``status``.

    Its span id is the one every visit was parented under (derived from the run id);
    its parent is the context the run was started under, if any.
    """
    if not STATE.tracing:
        return
    parent = remote_context(started_under)
    own = run_span_context(run_id, started_under)
    span = start_span(
        f"run {name}",
        {"plait.run.id": run_id, "plait.run.status": status, **attributes},
        context=parent if parent is not None else Context(),
        start_time=started_at,
        ids=(own.trace_id, own.span_id),
    )
    if status in ("failed", "cancelled"):
        fail(span, f"the run ended {status}")
    span.end()


def commit_span(parent: SpanContext, backend: str, ops: Sequence[Any]) -> Span:
    """A mesh commit's span under ``parent`` (not made current: nothing is traced
    inside a commit): backend, operations and bytes written; its caller marks a
    compare-and-swap that found the data moved (``plait.mesh.conflict``) and ends it."""
    span = light.start(
        "mesh commit",
        {"db.system": f"plait.mesh.{backend}", "plait.mesh.ops": len(ops)},
        parent,
        kind=SpanKind.CLIENT,
    )
    if span.is_recording():  # the bytes are summed only for a span that keeps them
        span.set_attribute("plait.mesh.bytes", written(ops))
    return span


def written(ops: Sequence[Any]) -> int:
    """The bytes the puts among ``ops`` write."""
    return sum([len(data) for op in ops if isinstance(data := getattr(op, "data", None), bytes)])


def delivery_span(topic: str, kind: str, event: str, traceparent: str | None) -> Span:
    """A topic event's delivery into a mailbox: a child of who published it."""
    return start_span(
        f"deliver {topic}",
        {
            "messaging.system": "plait",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "messaging.message.id": event,
            "plait.topic.kind": kind,
        },
        context=remote_context(traceparent),
        kind=SpanKind.CONSUMER,
    )


def observe_delivery(delivery: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Count a topic event's forward into mailboxes, and (while tracing) record it as a
    span under its publisher's context; the body then carries the span's own context,
    so the turn it causes is its child. ``delivery`` is a :class:`plait.mesh.Delivery`.
    """
    metrics.topic_delivery(delivery.attempt > 1)
    if not STATE.tracing:
        return body
    event = delivery.event
    span = delivery_span(event.topic, event.kind, event.id, body.get("traceparent"))
    span.set_attribute("messaging.delivery.attempt", delivery.attempt)
    ctx = span.get_span_context()
    span.end()
    return {**body, "traceparent": format_traceparent(ctx)} if ctx.is_valid else body


def turn_span(actor: str, traceparent: str | None, *, attributes: Attributes = {}) -> Span:  # noqa: B006
    """An agent actor's turn (``invoke_agent``): a child of the message's sender."""
    return start_span(
        f"invoke_agent {actor}",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": actor, **attributes},
        context=remote_context(traceparent),
    )


def now() -> float:
    """Epoch seconds, for a span's explicit start."""
    return time.time()


__all__ = [
    "Attributes",
    "CurrentSpan",
    "annotate",
    "commit_span",
    "current",
    "current_span",
    "delivery_span",
    "fail",
    "in_run",
    "link_to",
    "now",
    "observe_delivery",
    "recording_span",
    "run_span",
    "set_on",
    "start_span",
    "turn_span",
    "visit_span",
    "written",
]
