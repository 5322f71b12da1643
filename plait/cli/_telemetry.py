"""The telemetry options of the serving commands: ``--otel`` and ``--metrics-port``."""

from __future__ import annotations

from typing import Annotated

import typer

from plait.cli._common import fail
from plait.errors import ConfigError
from plait.telemetry import configure, metrics

OtelOption = Annotated[
    bool,
    typer.Option(
        "--otel",
        help="Export OpenTelemetry traces over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT; "
        "also turned on by PLAIT_OTEL=1). Needs the otel extra.",
    ),
]
"""``--otel``: trace this process."""


def observe(*, otel: bool, metrics_port: int | None = None, metrics_on: bool = False) -> None:
    """Turn on what the options ask for: tracing, and metrics (served on
    ``metrics_port`` if given); exits 2 with one line if the SDK is missing."""
    try:
        configure(otel=otel, metrics=metrics_on or metrics_port is not None)
    except ConfigError as exc:
        fail(str(exc), 2)
    if metrics_port is not None:
        try:
            metrics.serve_http(metrics_port)
        except OSError as exc:
            fail(f"--metrics-port {metrics_port}: {exc.strerror or exc}", 2)


count_leases = metrics.LeaseTally()
"""Set the partitions-held gauge, counting leases gained and lost since last time."""


__all__ = ["OtelOption", "count_leases", "observe"]
