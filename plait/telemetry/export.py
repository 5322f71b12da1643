"""Batching ended spans to the exporter, off the serving thread.

What the SDK's ``BatchSpanProcessor`` does, with the per-span work moved off the thread
that ends spans: ending a :class:`~plait.telemetry.light.LightSpan` appends it to a
deque (nothing else: no ``ReadableSpan`` built, no sampled flag read through three
properties, no ``getpid`` system call), and the export thread builds the SDK's spans a
batch at a time, then exports them. On a durable run's path (three spans a transition)
that is most of what ending a span cost there, where cold caches made each step dear.

The standard variables apply: ``OTEL_BSP_SCHEDULE_DELAY`` (ms between exports),
``OTEL_BSP_MAX_QUEUE_SIZE`` (spans held at most; the oldest are dropped beyond it),
``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` and ``OTEL_BSP_EXPORT_TIMEOUT``.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

log = logging.getLogger("plait.telemetry")


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


class SpanBatcher:
    """Ended spans, exported in batches by a thread of its own.

    Args:
        exporter: the SDK ``SpanExporter`` spans go to.
        readable: builds the SDK's ``ReadableSpan`` of a plait span and its end time.
    """

    def __init__(self, exporter: Any, readable: Callable[[Any, int], ReadableSpan]) -> None:
        self.exporter = exporter
        self.readable = readable
        self.schedule_s = _env_int("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        self.batch_size = _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
        self.timeout_ms = _env_int("OTEL_BSP_EXPORT_TIMEOUT", 30000)
        # deque append and popleft are atomic: the one lock is the export's.
        self.queue: collections.deque[Any] = collections.deque(
            maxlen=max(self.batch_size, _env_int("OTEL_BSP_MAX_QUEUE_SIZE", 2048))
        )
        self._wake = threading.Event()
        self._exporting = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="plait-span-export", daemon=True)
        self._thread.start()

    def add(self, span: Any, end_ns: int | None) -> None:
        """Queue an ended span: a plait span and its end time (epoch ns), or an SDK span
        (``end_ns`` None). A full batch wakes the export thread."""
        queue = self.queue
        queue.append((span, end_ns))
        if len(queue) >= self.batch_size and not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.schedule_s)
            self._wake.clear()
            self.export_queued()

    def export_queued(self) -> None:
        """Export every span queued so far, a batch at a time."""
        with self._exporting:
            queue = self.queue
            while queue:
                batch = []
                for _ in range(min(len(queue), self.batch_size)):
                    span, end_ns = queue.popleft()
                    batch.append(span if end_ns is None else self.readable(span, end_ns))
                try:
                    self.exporter.export(batch)
                except Exception:  # an exporter's failure must not end the export thread
                    log.exception("exporting %d spans failed", len(batch))

    def flush(self, timeout_ms: int | None = None) -> bool:
        """Export what is queued now; whether the exporter flushed in time."""
        self.export_queued()
        flush = getattr(self.exporter, "force_flush", None)
        return True if flush is None else bool(flush(timeout_ms or self.timeout_ms))

    def shutdown(self) -> None:
        """Stop the thread after a last export, and shut the exporter down."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join(self.timeout_ms / 1000)
        self.export_queued()
        self.exporter.shutdown()


class BatchedProcessor(SpanProcessor):
    """The tracer provider's processor: the SDK's own spans (an instrumented library's,
    through the global provider) join plait's in ``batcher``, and shutting the provider
    down (at exit too) shuts the batcher down after a last export."""

    def __init__(self, batcher: SpanBatcher) -> None:
        self.batcher = batcher

    def on_end(self, span: ReadableSpan) -> None:
        """Queue an SDK span that ended (if sampled)."""
        if span.context is not None and span.context.trace_flags.sampled:
            self.batcher.add(span, None)

    def shutdown(self) -> None:
        """Export what is queued and stop."""
        self.batcher.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued now."""
        return self.batcher.flush(timeout_millis)


__all__ = ["BatchedProcessor", "SpanBatcher"]
