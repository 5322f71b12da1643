"""Transient model errors are retried under the node's policy; others fail at once.

A real local server speaks the OpenAI wire format and answers 429 or 500 a few times;
each request it receives is one model call, so the tests count exactly how many
calls a run made, in session and durable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from plait.cli.runs import _progress_printer
from plait.graphs import run_graph
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Mesh
from plait.models import OpenAIModel
from plait.runs import Runs, serve
from plait.runs.progress import Progress
from tests._support.timing import scaled

from .wire_servers import OpenAIWireServer

pytestmark = pytest.mark.anyio

FAST = {"attempts": 4, "initial_s": 0.01, "max_s": 0.05}


def graph(retry: dict[str, Any] | None = FAST, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"id": "a", "type": "agent", "prompt": "hi", **extra}
    if retry is not None:
        node["retry"] = retry
    return {"name": "flaky", "agent": "assistant", "entry": "a", "nodes": [node], **{}}


async def in_session(server: OpenAIWireServer, spec: dict[str, Any]) -> dict[str, Any]:
    model = OpenAIModel("gpt-test", base_url=server.base_url)
    async with model:
        run = await run_graph(spec, "x", model=model)
    return {"status": run.status, "detail": run.ended_detail, "error": run.error,
            "retries": run.usage.retries, "output": run.output}  # fmt: skip


async def durable(server: OpenAIWireServer, spec: dict[str, Any], mesh: Mesh) -> dict[str, Any]:
    await import_graph(mesh, load_graph(spec))
    runs = Runs(mesh)
    model = OpenAIModel("gpt-test", base_url=server.base_url)
    async with model, serve(mesh, model=model, visibility_timeout_ms=2_000, beat=False):
        rec = await runs.wait((await runs.start("assistant", spec["name"], "x")).run_id, timeout=20)
        output = await runs.output(rec)
    await runs.verify(rec.run_id)
    return {"status": rec.status, "detail": rec.ended_detail, "error": rec.error,
            "retries": rec.usage.retries, "output": output}  # fmt: skip


Runner = Callable[[OpenAIWireServer, dict[str, Any]], Any]


@pytest.fixture(params=["in_session", "durable"])
def runner(request: pytest.FixtureRequest, mesh: Mesh) -> Runner:
    """Each test runs once in session and once as a durable run on each backend."""
    if request.param == "in_session":
        return in_session
    return lambda server, spec: durable(server, spec, mesh)


async def test_rate_limits_and_server_errors_are_retried_until_the_call_passes(
    openai_server: OpenAIWireServer, runner: Runner
) -> None:
    openai_server.reply_error(429, "Slow down.", "rate_limit_exceeded")
    openai_server.reply_error(503, "Overloaded.", "server_error")
    openai_server.reply_text("at last")
    got = await runner(openai_server, graph())
    assert (got["status"], got["output"], got["retries"]) == ("done", "at last", 2)
    assert len(openai_server.requests) == 3


async def test_a_transient_error_fails_the_node_after_its_attempts(
    openai_server: OpenAIWireServer, runner: Runner
) -> None:
    for _ in range(10):
        openai_server.reply_error(500, "Melted.", "server_error")
    got = await runner(openai_server, graph({**FAST, "attempts": 3}))
    assert (got["status"], got["detail"]) == ("failed", "transient_error")
    assert "HTTP 500" in got["error"] and "after 3 tries" in got["error"]
    assert len(openai_server.requests) == 3
    assert got["retries"] == 2


async def test_retries_count_against_the_runs_retries_budget(
    openai_server: OpenAIWireServer, runner: Runner
) -> None:
    for _ in range(10):
        openai_server.reply_error(429, "Slow down.", "rate_limit_exceeded")
    spec = {**graph(), "budget": {"steps": 5, "retries": 1}}
    got = await runner(openai_server, spec)
    assert (got["status"], got["detail"]) == ("failed", "budget_exhausted")
    assert "retries" in got["error"]
    assert len(openai_server.requests) == 2  # the first try and the one retry allowed


async def test_a_client_error_is_not_retried(
    openai_server: OpenAIWireServer, runner: Runner
) -> None:
    openai_server.reply_error(400, "Bad request.")
    openai_server.reply_text("never asked for")
    got = await runner(openai_server, graph())
    assert (got["status"], got["detail"], got["retries"]) == ("failed", "node_failed", 0)
    assert len(openai_server.requests) == 1


async def test_timeout_s_bounds_each_model_call_and_a_timeout_is_retried(
    openai_server: OpenAIWireServer, runner: Runner
) -> None:
    openai_server.push({"never": "sent"}, delay=5.0)
    openai_server.reply_text("quick")
    with anyio.fail_after(scaled(4)):
        got = await runner(openai_server, graph(timeout_s=0.2))
    assert (got["status"], got["output"], got["retries"]) == ("done", "quick", 1), got
    assert len(openai_server.requests) == 2


async def test_the_progress_of_a_retry_says_when_it_goes_again(
    openai_server: OpenAIWireServer, mesh: Mesh, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_server.reply_error(429, "Slow down.", "rate_limit_exceeded")
    openai_server.reply_text("at last")
    spec = graph()
    await import_graph(mesh, load_graph(spec))
    runs = Runs(mesh)
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url)
    events: list[Progress] = []
    async with model, serve(mesh, model=model, visibility_timeout_ms=2_000, beat=False):
        started = await runs.start("assistant", spec["name"], "x")
        rec = await runs.wait(started.run_id, timeout=20, on_progress=events.append)
    assert rec.status == "done"
    retried = [e for e in events if e.retry_in is not None]
    assert [e.node for e in retried] == ["a"] and retried[0].error
    with _progress_printer(True) as show:
        for event in events:
            show(event)
    shown = capsys.readouterr().err
    assert "↻ a" in shown and "again in" in shown and "retrying" in shown
    assert "✗" not in shown
