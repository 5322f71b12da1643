"""One durable run is one trace: its visits, model and tool calls, fan-out instances
and child run under its span, a person's answer from another process linked.

The run (an agent calling a tool, a verifier loop, a human node, a fan-out of three,
a subgraph) is served in this process, traced into memory; the person answers through
``plait decisions answer`` in a subprocess tracing to a real OTLP/HTTP endpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.decisions import DecisionAnswerer
from plait.mesh import open_mesh
from plait.models import ScriptedModel
from plait.profiles import AgentProfile, put_profile
from plait.runs import Runs
from plait.runs.record import child_run_id
from plait.tools import ToolContext, ToolRegistry, tool
from tests._support.otlp import SpanRecord, otlp_receiver, traced
from tests._support.timing import scaled
from tests.runs.helpers import commits, hosting, settle, store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PLAIT = Path(sys.executable).with_name("plait")
SECRET = "zebra-prompt-words"
"""Text of the run's input: it must reach no span unless content capture is on."""

URLS = {
    "type": "object",
    "properties": {"urls": {"type": "array", "items": {"type": "string"}}},
    "required": ["urls"],
}
GRAPH = {
    "name": "traced",
    "agent": "assistant",
    "entry": "a",
    "nodes": [
        {"id": "a", "type": "agent", "prompt": "Write about {{input}}. {{check?}}",
         "next": "check"},
        {"id": "check", "type": "verifier", "prompt": "Review {{a}}",
         "verdicts": {"pass": "h", "fail": "a"}},
        {"id": "h", "type": "human", "ask": "Approve?", "next": "r"},
        {"id": "r", "type": "agent", "prompt": "List pages", "response_format": URLS,
         "next": "fan"},
        {"id": "fan", "type": "fan_out", "specs": [
            {"kind": "map", "target_node_id": "fetch", "source_node_id": "r",
             "source_path": "urls"}]},
        {"id": "fetch", "type": "agent", "prompt": "Fetch {{item}}", "next": "join"},
        {"id": "join", "type": "fan_in", "aggregate_template": "{{fetch}}", "next": "sub"},
        {"id": "sub", "type": "subgraph", "graph": "child", "input": "{{join}}", "next": "b"},
        {"id": "b", "type": "agent", "prompt": "Sub said {{sub}}"},
    ],
}  # fmt: skip
CHILD = {
    "name": "child",
    "agent": "assistant",
    "entry": "c1",
    "nodes": [{"id": "c1", "type": "agent", "prompt": "Child got {{input}}"}],
}
RULES: list[dict[str, Any]] = [
    {"node": "a", "round": 1, "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
    {"node": "a", "round": 2, "text": "draft {{visit}}"},
    {"node": "check", "visit": 1, "text": "needs sources\nfail"},
    {"node": "check", "text": "pass"},
    {"node": "r", "text": '{"urls": ["u1", "u2", "u3"]}'},
    {"node": "fetch", "text": "page {{prompt}}"},
    {"node": "c1", "text": "child done"},
    {"node": "b", "text": "final"},
]


def lookups() -> ToolRegistry:
    """One read-only tool the agent calls."""

    @tool("lookup", description="look it up", read_only=True)
    async def lookup(args: dict[str, Any], ctx: ToolContext) -> Any:
        return {"found": args.get("q")}

    return ToolRegistry([lookup])


def answer_in_a_process(mesh_url: str, decision: str, env: dict[str, str], cwd: Path) -> None:
    """``plait decisions answer`` as a person would, tracing to the receiver."""
    done = subprocess.run(
        [str(PLAIT), "decisions", "answer", decision, "--text", "yes", "--mesh", mesh_url],
        env={**os.environ, "PLAIT_USER": "ana", **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )
    assert done.returncode == 0, done.stderr


def visits(spans: list[SpanRecord], run_id: str) -> list[SpanRecord]:
    return [s for s in spans if s.name.startswith("visit ") and s.get("plait.run.id") == run_id]


def under(spans: list[SpanRecord], parent: SpanRecord) -> list[SpanRecord]:
    return [s for s in spans if s.parent_id == parent.span_id]


async def test_a_durable_run_is_one_trace_and_the_answer_from_another_process_links(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"
    with otlp_receiver() as receiver, traced() as finished:
        async with open_mesh(url) as mesh:
            await store(mesh, CHILD)
            await store(mesh, GRAPH)
            await put_profile(mesh, AgentProfile(name="assistant", tools=["lookup"]))
            runs = Runs(mesh)
            async with hosting(mesh, ScriptedModel(RULES), tools=lookups()):
                rec = await runs.start("assistant", "traced", SECRET)
                parked = await settle(runs, rec.run_id)
                assert parked.status == "waiting_human"
                (decision,) = await DecisionAnswerer(mesh).list("open")
                await anyio.to_thread.run_sync(
                    answer_in_a_process, url, decision.id, receiver.env("answerer"), tmp_path
                )
                done = await settle(runs, rec.run_id)
                trajectory = await runs.trajectory(rec.run_id)
                child = await runs.get(child_run_id(rec.run_id, "sub", 1))
        spans = finished()
        answered = receiver.wait_for(lambda got: [s for s in got if s.name == "decision answered"])
    assert done.status == "done", done.error

    # one trace: every span of the run and of its child run
    (run_span,) = [s for s in spans if s.name == "run assistant/traced"]
    assert run_span.parent_id is None and run_span.get("plait.run.status") == "done"
    assert {s.trace_id for s in spans} == {run_span.trace_id}

    # a visit span per visit of the trajectory, each under the run's span, and one
    # more for each visit that parked the run before it ran again
    mine = visits(spans, rec.run_id)
    ran = [s for s in mine if s.get("plait.node.status") != "waiting"]
    assert Counter((s.get("plait.node.id"), s.get("plait.node.visit")) for s in ran) == Counter(
        commits(trajectory)
    )
    parked_ = [(s.get("plait.node.id"), s.get("plait.waiting.kind")) for s in mine if s not in ran]
    assert sorted(parked_) == [("h", "human"), ("sub", "subgraph")]
    assert all(s.parent_id == run_span.span_id for s in mine)
    fetches = sorted(s.get("plait.node.id") for s in mine if s.get("plait.node.kind") == "agent"
                     and str(s.get("plait.node.id")).startswith("fetch"))  # fmt: skip
    assert len(fetches) == 3 and len(set(fetches)) == 3  # the fan-out's instances
    verdicts = [s.get("plait.node.verdict") for s in mine if s.get("plait.node.id") == "check"]
    assert sorted(verdicts) == ["fail", "pass"]  # the verifier's loop

    # the child run's span is under the subgraph's first visit, in the same trace
    (child_span,) = [s for s in spans if s.name == "run assistant/child"]
    (sub_first,) = [s for s in mine if s.get("plait.node.id") == "sub" and
                    s.get("plait.node.visit") == 1 and s.get("plait.waiting.kind")]  # fmt: skip
    assert child is not None and child_span.parent_id == sub_first.span_id
    assert all(s.parent_id == child_span.span_id for s in visits(spans, child.run_id))

    # model calls follow the GenAI conventions and add up to what the record says
    chats = [s for s in spans if s.get("gen_ai.operation.name") == "chat"]
    assert all(s.get("gen_ai.request.model") and s.get("gen_ai.response.finish_reasons")
               for s in chats)  # fmt: skip
    assert sum(s.get("gen_ai.usage.input_tokens") for s in chats) == done.usage.input_tokens
    assert sum(s.get("gen_ai.usage.output_tokens") for s in chats) == done.usage.output_tokens
    for visit in mine:
        calls = [s for s in under(spans, visit) if s.get("gen_ai.operation.name") == "chat"]
        if calls:
            spent = sum(s.get("gen_ai.usage.input_tokens") for s in calls)
            assert visit.get("gen_ai.usage.input_tokens") == spent
    assert run_span.get("gen_ai.usage.input_tokens") == done.usage.input_tokens
    assert run_span.get("plait.audit.hash") == done.last_hash

    # each tool call is a span under its visit, with its gates
    tools = [s for s in spans if s.name == "execute_tool lookup"]
    assert len(tools) == 2  # one per visit of the agent
    assert {s.get("plait.tool.read_only") for s in tools} == {True}
    assert {s.get("plait.tool.approval") for s in tools} == {"allow"}
    assert {s.get("plait.taint") for s in tools} == {False}
    a_visits = {s.span_id for s in mine if s.get("plait.node.id") == "a"}
    assert {s.parent_id for s in tools} == a_visits

    # the person's answer, from another process, is linked from the visit it woke
    (answer,) = answered
    assert answer.service == "answerer" and answer.get("plait.decision.id") == decision.id
    woken = [s for s in mine if (answer.trace_id, answer.span_id) in s.links]
    assert [s.get("plait.node.id") for s in woken] == ["h"]
    parked_h = [s for s in mine if s.get("plait.node.id") == "h" and s.get("plait.decision.id")]
    assert parked_h and parked_h[0].get("plait.decision.id") == decision.id

    # every commit is a span: backend, operations, bytes
    commits_ = [s for s in spans if s.name == "mesh commit"]
    assert commits_ and all(s.get("plait.mesh.ops") and s.get("plait.mesh.bytes") is not None
                            for s in commits_)  # fmt: skip
    assert {s.get("db.system") for s in commits_} == {"plait.mesh.sqlite"}

    # no content: the input text reaches no span
    assert not [s for s in spans if SECRET in repr(s.attributes)]
