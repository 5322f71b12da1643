"""Model spans carry message content only when the operator asks, and then escaped and
cut; with tracing off, nothing is traced at all."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plait import telemetry
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.runs import Runs
from tests._support.otlp import SpanRecord, traced
from tests.runs.helpers import hosting, settle, store

pytestmark = pytest.mark.anyio

GRAPH = {
    "name": "one",
    "agent": "assistant",
    "entry": "a",
    "nodes": [{"id": "a", "type": "agent", "prompt": "Say {{input}}"}],
}
INPUT = "\x1b[31mred\x1b[0m " + "word " * 1000


async def run_once(mesh: Mesh) -> None:
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    async with hosting(mesh, ScriptedModel([{"text": "reply \x07 text"}])):
        rec = await settle(runs, (await runs.start("assistant", "one", INPUT)).run_id)
    assert rec.status == "done"


def chat(spans: list[SpanRecord]) -> SpanRecord:
    (found,) = [s for s in spans if s.get("gen_ai.operation.name") == "chat"]
    return found


async def test_no_content_in_spans_by_default(mesh: Mesh) -> None:
    with traced() as finished:
        await run_once(mesh)
        spans = finished()
    span = chat(spans)
    assert span.get("gen_ai.input.messages") is None and span.get("gen_ai.output.messages") is None
    assert not [s for s in spans if "word word" in repr(s.attributes)]


async def test_content_when_asked_is_escaped_and_cut(mesh: Mesh) -> None:
    with traced(capture_content=True) as finished:
        await run_once(mesh)
        span = chat(finished())
    sent, replied = span.get("gen_ai.input.messages"), span.get("gen_ai.output.messages")
    assert "\\u001b[31mred" in sent and "\x1b" not in sent  # escaped, not raw
    assert sent.endswith("...(truncated)")
    assert len(sent) <= telemetry.STATE.content_chars + len("...(truncated)")
    assert "reply \\u0007 text" in replied and "\x07" not in replied


async def test_tracing_off_traces_nothing(mesh: Mesh) -> None:
    exporter = InMemorySpanExporter()
    telemetry.enable_tracing(exporter, batch=False)
    telemetry.disable_tracing()
    assert not telemetry.STATE.tracing
    await run_once(mesh)
    assert exporter.get_finished_spans() == ()
