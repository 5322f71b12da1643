"""Telemetry: OpenTelemetry traces of runs, visits, model and tool calls, mesh commits,
topic deliveries and agent turns, and Prometheus metrics for operators.

Off by default, and then nothing of the SDK runs: every instrumented place tests
``STATE.tracing`` or ``STATE.metrics`` first. The OpenTelemetry API is a dependency of
plait; the SDK and the OTLP/HTTP exporter are the ``otel`` extra, imported only by
:func:`enable_tracing`. One trace per run, across processes: see
:mod:`plait.telemetry.context`.
"""

import plait.telemetry.metrics as metrics
from plait.telemetry.commits import observed_commit
from plait.telemetry.context import (
    TRACE_KEY,
    carrying_trace,
    current_traceparent,
    format_traceparent,
    lift_trace,
    parse_traceparent,
    run_context,
    run_span_context,
    with_traceparent,
)
from plait.telemetry.genai import end_model_span, escaped, model_span, tool_span
from plait.telemetry.setup import (
    configure,
    disable_tracing,
    enable_metrics,
    enable_tracing,
    flush,
    install_global,
    wanted,
)
from plait.telemetry.spans import (
    annotate,
    current,
    delivery_span,
    fail,
    in_run,
    link_to,
    observe_delivery,
    run_span,
    start_span,
    turn_span,
    visit_span,
)
from plait.telemetry.state import STATE, TelemetryState

__all__ = [
    "STATE",
    "TRACE_KEY",
    "TelemetryState",
    "annotate",
    "carrying_trace",
    "configure",
    "current",
    "current_traceparent",
    "delivery_span",
    "disable_tracing",
    "enable_metrics",
    "enable_tracing",
    "end_model_span",
    "escaped",
    "fail",
    "flush",
    "format_traceparent",
    "in_run",
    "install_global",
    "lift_trace",
    "link_to",
    "metrics",
    "model_span",
    "observe_delivery",
    "observed_commit",
    "parse_traceparent",
    "run_context",
    "run_span",
    "run_span_context",
    "start_span",
    "tool_span",
    "turn_span",
    "visit_span",
    "wanted",
    "with_traceparent",
]
