"""Observing a mesh commit: its span and its metrics, around the backend's commit."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from opentelemetry import trace

import plait.telemetry.metrics as metrics
from plait.errors import VersionConflict
from plait.telemetry.spans import commit_span
from plait.telemetry.state import STATE

T = TypeVar("T")


async def observed_commit(
    backend: str, ops: Sequence[Any], commit: Callable[[], Awaitable[T]]
) -> T:
    """``await commit()`` of ``ops`` on ``backend``, in a span (while tracing, inside
    traced work) and timed (while counting); a VersionConflict is marked as the conflict
    it is and raised."""
    started = time.perf_counter()
    parent = trace.get_current_span().get_span_context() if STATE.tracing else None
    # A commit outside any traced work (a lease renewal, a heartbeat) would be a trace
    # of its own every few seconds: it is only timed.
    span = commit_span(parent, backend, ops) if parent is not None and parent.is_valid else None
    conflict = False
    try:
        return await commit()
    except VersionConflict:
        conflict = True
        if span is not None:
            span.set_attribute("plait.mesh.conflict", True)
        raise
    finally:
        if span is not None:
            span.end()
        if STATE.metrics:
            metrics.commit(backend, time.perf_counter() - started, conflict)


__all__ = ["observed_commit"]
