"""A run whose process is SIGKILLed mid-node is still one trace: the worker that takes
it over runs the node again as a second attempt, under the same run span.

``plait graph run`` traces to a real OTLP/HTTP endpoint until it is killed while the
slow second node runs; ``plait worker --otel`` finishes the run, tracing there too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.runs import RunRecord
from tests._support.otlp import SpanRecord, otlp_receiver
from tests.runs.helpers import DATA, Cli
from tests.runs.test_crash import SCRIPT, record_when, sigkill_when, stop

pytestmark = pytest.mark.slow


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``plait`` as a subprocess in this test's directory, on its own SQLite mesh."""
    return Cli(tmp_path)


def visit(spans: list[SpanRecord], node: str) -> list[SpanRecord]:
    return [s for s in spans if s.name == f"visit {node}"]


def test_a_run_killed_mid_node_is_one_trace_with_a_second_attempt(cli: Cli) -> None:
    with otlp_receiver() as receiver:
        cli.env.update(receiver.env("doomed"))
        cli.setup("graph", "import", str(DATA / "slow_chain.json"))
        doomed = cli.spawn(
            "graph", "run", "assistant", "slow-chain", "--input", "x",
            "--model", f"scripted:{SCRIPT}", "--json",
        )  # fmt: skip

        def second_in_flight() -> RunRecord:
            receiver.wait_for(lambda got: visit(got, "first"))
            return record_when(cli.mesh_url, lambda r: "second" in r.attempts)

        interrupted = sigkill_when(doomed, second_in_flight)
        assert "second" in interrupted.attempts and interrupted.status != "done"
        cli.env.update(receiver.env("worker"))
        worker = cli.spawn("worker", "--visibility-timeout", "1", "--otel")
        try:
            rec = record_when(cli.mesh_url, lambda r: r.terminal)
        finally:
            err = stop(worker)  # a drained worker flushes what it traced
        assert rec.status == "done", (rec, err)
        spans = receiver.wait_for(
            lambda got: got if [s for s in got if s.name == "run assistant/slow-chain"] else None
        )
    (run,) = [s for s in spans if s.name == "run assistant/slow-chain"]
    assert run.service == "worker" and run.parent_id is None
    assert run.get("plait.run.id") == interrupted.run_id
    assert {s.trace_id for s in spans} == {run.trace_id}
    (first,) = visit(spans, "first")
    (second,) = visit(spans, "second")  # the killed attempt never ended: no span
    (third,) = visit(spans, "third")
    assert first.service == "doomed" and {second.service, third.service} == {"worker"}
    assert {s.parent_id for s in (first, second, third)} == {run.span_id}
    assert second.get("plait.node.attempt") == 2 and second.get("plait.node.visit") == 1
    assert first.get("plait.node.attempt") == 1
    assert second.get("plait.on_indeterminate") == "retry"  # a model node's policy
    chats = [s for s in spans if s.get("gen_ai.operation.name") == "chat"]
    assert sum(s.get("gen_ai.usage.output_tokens") for s in chats) == rec.usage.output_tokens
