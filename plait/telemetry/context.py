"""W3C trace contexts of runs: one trace per run, whichever process serves it.

A run's span id is derived from its run id, so every process that serves one of its
visits parents it under the same span without reading anything. Its trace id is that
of the context the run was started under (a parent run's visit, a program's node, an
agent turn: the record keeps it as ``trace``), or derived from the run id too when it
was started under none.
"""

from __future__ import annotations

import hashlib
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from plait.telemetry.state import STATE

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def _derived(prefix: str, run_id: str, bits: int) -> int:
    digest = hashlib.sha256(f"{prefix}:{run_id}".encode()).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1


def run_span_id(run_id: str) -> int:
    """The span id of run ``run_id``'s span."""
    return _derived("plait-run-span", run_id, 64)


def format_traceparent(ctx: SpanContext) -> str:
    """``ctx`` as a W3C ``traceparent`` header value."""
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The remote span context a W3C ``traceparent`` names (None: none, or malformed)."""
    if not value:
        return None
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 1))


def current_traceparent() -> str | None:
    """The ``traceparent`` of the span current here (None: tracing is off, or no span)."""
    if not STATE.tracing:
        return None
    ctx = trace.get_current_span().get_span_context()
    return format_traceparent(ctx) if ctx.is_valid else None


def with_traceparent(data: Any) -> Any:
    """A mailbox payload (``{"to", "body"}``) whose body, a dict, carries the
    ``traceparent`` of the span current here; anything else as it is."""
    tp = current_traceparent()
    body = data.get("body") if isinstance(data, dict) else None
    if tp is None or not isinstance(body, dict):
        return data
    return {**data, "body": {**body, "traceparent": tp}}


TRACE_KEY = "_traceparent"
"""The key of a published event's data (a dict) that carries its publisher's trace
context; a router moves it into the mailbox body it forwards (as ``traceparent``)."""


def carrying_trace(data: Any) -> Any:
    """Event data (a dict) carrying the ``traceparent`` of the span current here, under
    :data:`TRACE_KEY`; anything else as it is."""
    tp = current_traceparent()
    return {**data, TRACE_KEY: tp} if tp is not None and isinstance(data, dict) else data


def lift_trace(data: Any) -> tuple[Any, str | None]:
    """Event data without its :data:`TRACE_KEY`, and that trace context (if any)."""
    if isinstance(data, dict) and TRACE_KEY in data:
        rest = dict(data)
        tp = rest.pop(TRACE_KEY)
        return rest, tp if isinstance(tp, str) else None
    return data, None


def run_span_context(run_id: str, started_under: str | None) -> SpanContext:
    """The span context of run ``run_id``'s span, started under ``started_under``."""
    key = (run_id, started_under)
    found = _RUN_CONTEXTS.get(key)
    if found is None:
        if len(_RUN_CONTEXTS) >= _RUN_CONTEXTS_KEPT:
            _RUN_CONTEXTS.clear()  # a cache of derivations: dropping it costs a hash each
        found = _RUN_CONTEXTS[key] = _run_span_context(run_id, started_under)
    return found


_RUN_CONTEXTS: dict[tuple[str, str | None], SpanContext] = {}
_RUN_CONTEXTS_KEPT = 4096


def _run_span_context(run_id: str, started_under: str | None) -> SpanContext:
    parent = parse_traceparent(started_under)
    trace_id = parent.trace_id if parent is not None else _derived("plait-trace", run_id, 128)
    flags = parent.trace_flags if parent is not None else _SAMPLED
    return SpanContext(trace_id, run_span_id(run_id), is_remote=True, trace_flags=flags)


def run_context(run_id: str, started_under: str | None) -> Context:
    """A context whose current span is run ``run_id``'s (for its visits' spans)."""
    return trace.set_span_in_context(NonRecordingSpan(run_span_context(run_id, started_under)))


def remote_context(traceparent: str | None) -> Context | None:
    """A context whose current span is the remote one ``traceparent`` names, if any."""
    parent = parse_traceparent(traceparent)
    return None if parent is None else trace.set_span_in_context(NonRecordingSpan(parent))


__all__ = [
    "TRACE_KEY",
    "carrying_trace",
    "current_traceparent",
    "format_traceparent",
    "lift_trace",
    "parse_traceparent",
    "remote_context",
    "run_context",
    "run_span_context",
    "run_span_id",
    "with_traceparent",
]
