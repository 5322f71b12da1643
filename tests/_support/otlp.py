"""Spans as tests read them: from the in-memory exporter of this process, and from a
real OTLP/HTTP endpoint other processes export to (protobuf decoded with
``opentelemetry-proto``), in one shape.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plait import telemetry
from tests._support.timing import scaled


@dataclass(frozen=True)
class SpanRecord:
    """One finished span: ids as hex, attributes as plain values."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]
    links: list[tuple[str, str]] = field(default_factory=list)
    service: str = ""
    error: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        """An attribute's value."""
        return self.attributes.get(key, default)


def from_sdk(span: ReadableSpan) -> SpanRecord:
    """An SDK span (this process's) as a record."""
    ctx = span.context
    assert ctx is not None
    attributes = {
        k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()
    }
    return SpanRecord(
        name=span.name,
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_id=f"{span.parent.span_id:016x}" if span.parent is not None else None,
        attributes=attributes,
        links=[(f"{k.context.trace_id:032x}", f"{k.context.span_id:016x}") for k in span.links],
        service=str(span.resource.attributes.get("service.name", "")),
        error=span.status.status_code.name == "ERROR",
    )


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class OtlpReceiver:
    """An OTLP/HTTP trace endpoint on 127.0.0.1 in a thread; what it received."""

    def __init__(self) -> None:
        self.spans: list[SpanRecord] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, request: ExportTraceServiceRequest) -> None:
        """Keep every span of ``request``."""
        found = []
        for resource_spans in request.resource_spans:
            service = ""
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    service = _value(attribute.value)
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    found.append(
                        SpanRecord(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex() or None,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=[(k.trace_id.hex(), k.span_id.hex()) for k in span.links],
                            service=service,
                            error=span.status.code == 2,
                        )
                    )
        with self.lock:
            self.spans.extend(found)

    def received(self) -> list[SpanRecord]:
        """The spans received so far."""
        with self.lock:
            return list(self.spans)

    def wait_for(self, check: Callable[[list[SpanRecord]], Any], timeout: float = 20.0) -> Any:
        """Wait until ``check`` of the spans received is truthy; its value."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            found = check(self.received())
            if found:
                return found
            if time.monotonic() > deadline:
                names = sorted({s.name for s in self.received()})
                raise AssertionError(f"spans never arrived; received: {names}")
            time.sleep(0.05)

    def env(self, service: str) -> dict[str, str]:
        """The environment of a process that traces to this receiver as ``service``."""
        return {
            "PLAIT_OTEL": "1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_SERVICE_NAME": service,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A running :class:`OtlpReceiver`, shut down after."""
    receiver = OtlpReceiver()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


@contextmanager
def traced(*, capture_content: bool = False) -> Iterator[Callable[[], list[SpanRecord]]]:
    """Trace this process into memory for the block (each span exported as it ends);
    yields a function returning the spans finished so far."""
    exporter = InMemorySpanExporter()
    telemetry.enable_tracing(exporter, batch=False, capture_content=capture_content)
    try:
        yield lambda: [from_sdk(s) for s in exporter.get_finished_spans()]
    finally:
        telemetry.disable_tracing()


__all__ = ["OtlpReceiver", "SpanRecord", "from_sdk", "otlp_receiver", "traced"]
