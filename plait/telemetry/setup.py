"""Turning telemetry on in a process: the SDK, its exporter, and the standard env.

The SDK and the OTLP exporter are an extra (``pip install 'plait[otel]'``); only this
module imports them, and only when tracing is turned on. The standard variables are
the SDK's own: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the process,
``OTEL_TRACES_SAMPLER`` (``_ARG``) samples, ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, headers, timeouts) say where spans go over
OTLP/HTTP, and ``OTEL_SDK_DISABLED=true`` wins over everything. ``PLAIT_OTEL=1`` turns
tracing on where no flag does; ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``
puts prompt and completion text into model spans.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace

from plait.errors import ConfigError
from plait.telemetry.state import STATE

MISSING = "tracing needs the otel extra: pip install 'plait[otel]'"
"""The one-line error when the SDK is not installed."""

ENV_ON = "PLAIT_OTEL"
"""The variable that turns tracing on (``1``, ``true``)."""

ENV_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' variable that puts message content into spans."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def wanted(flag: bool = False) -> bool:
    """Whether tracing is asked for: by ``flag`` (``--otel``) or :data:`ENV_ON`, and
    not disabled by ``OTEL_SDK_DISABLED``."""
    if _truthy(os.environ.get("OTEL_SDK_DISABLED")):
        return False
    return flag or _truthy(os.environ.get(ENV_ON))


def enable_tracing(
    exporter: Any = None,
    *,
    batch: bool = True,
    capture_content: bool | None = None,
    service_name: str | None = None,
) -> None:
    """Trace this process: spans go to ``exporter`` (default: OTLP over HTTP, as the
    standard variables say), through a batch processor (or one span at a time).

    Calling it again replaces the exporter (the old one is flushed and shut down).

    Raises:
        ConfigError: the SDK or the exporter is not installed.
    """
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        from plait.telemetry.export import BatchedProcessor, SpanBatcher
    except ImportError as exc:
        raise ConfigError(MISSING) from exc
    if exporter is None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ConfigError(MISSING) from exc
        exporter = OTLPSpanExporter()
    disable_tracing()
    attributes = {"service.name": service_name} if service_name else {}
    if not service_name and not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = "plait"
    # The provider reads OTEL_TRACES_SAMPLER; plait's spans go to its processor.
    provider = TracerProvider(resource=Resource.create(attributes))
    readable = _readable(provider)
    if batch:
        batcher = SpanBatcher(exporter, readable)
        provider.add_span_processor(BatchedProcessor(batcher))
        STATE.emit = batcher.add  # the serving thread only queues (see plait.telemetry.export)
    else:
        processor = SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        STATE.emit = lambda span, end_ns: processor.on_end(readable(span, end_ns))
    STATE.provider = provider
    STATE.sample_root = _root_sampler(provider)
    STATE.capture_content = (
        _truthy(os.environ.get(ENV_CONTENT)) if capture_content is None else capture_content
    )
    STATE.tracing = True


def _readable(provider: Any) -> Any:
    """What builds the SDK span an ended :class:`~plait.telemetry.light.LightSpan`
    stands for, given its end time (epoch ns)."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    scope = InstrumentationScope("plait")
    resource = provider.resource

    def readable(span: Any, end_ns: int) -> ReadableSpan:
        return ReadableSpan(
            span.name,
            context=span.context,
            parent=span.parent,
            resource=resource,
            attributes=span.attributes,
            events=[Event(name, attrs, at) for name, attrs, at in span.events]
            if span.events
            else (),
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_ns,
            end_time=end_ns,
            instrumentation_scope=scope,
        )

    return readable


def _root_sampler(provider: Any) -> Any:
    """Whether a new trace is sampled, as ``provider``'s sampler decides for a root span
    (None where it samples every one: the default)."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

    sampler = provider.sampler
    if sampler is ALWAYS_ON or (isinstance(sampler, ParentBased) and sampler._root is ALWAYS_ON):
        return None

    def sample(trace_id: int, name: str) -> bool:
        return bool(sampler.should_sample(None, trace_id, name).decision.is_sampled())

    return sample


def disable_tracing() -> None:
    """Stop tracing: flush and shut down the provider this process set up."""
    STATE.tracing = False
    provider, STATE.provider, STATE.emit, STATE.sample_root = STATE.provider, None, None, None
    if provider is not None:
        provider.shutdown()


def flush(timeout_ms: int = 5000) -> bool:
    """Export the spans ended so far (True: all went out in time)."""
    provider = STATE.provider
    return True if provider is None else bool(provider.force_flush(timeout_ms))


def install_global() -> None:
    """Make this process's provider the global one, so libraries that trace through the
    OpenTelemetry API (an HTTP client's instrumentation) join the same traces."""
    if STATE.provider is not None:
        trace.set_tracer_provider(STATE.provider)


def enable_metrics() -> None:
    """Count this process's metrics (see :mod:`plait.telemetry.metrics`)."""
    STATE.metrics = True


def configure(*, otel: bool = False, metrics: bool = False) -> bool:
    """Turn on what a serving command asks for: tracing if :func:`wanted` (``otel``, or
    the env), metrics if ``metrics``. Returns whether tracing is on.

    Raises:
        ConfigError: tracing is asked for and the SDK is not installed.
    """
    if metrics:
        enable_metrics()
    if wanted(otel) and not STATE.tracing:
        enable_tracing()
        install_global()
    return STATE.tracing


__all__ = [
    "ENV_CONTENT",
    "ENV_ON",
    "MISSING",
    "configure",
    "disable_tracing",
    "enable_metrics",
    "enable_tracing",
    "flush",
    "install_global",
    "wanted",
]
