"""Verdicts by structured output and tool calls that must happen, run in-session: with
the scripted model, and with the OpenAI adapter against a local server speaking the
chat completions wire format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from plait.errors import GraphValidationError
from plait.graphs import load_graph, run_graph
from plait.graphs.nodes.verifier import (
    CRITIQUE_MAX_CHARS,
    structured_instruction,
    verdict_schema,
)
from plait.models import OpenAIModel, ScriptedModel
from plait.profiles import AgentProfile
from plait.tools import ToolContext, ToolRegistry, tool
from tests.models.wire_servers import OpenAIWireServer

pytestmark = pytest.mark.anyio

PASS_FAIL = verdict_schema(["pass", "fail"])


def verify_graph(**verifier: Any) -> dict[str, Any]:
    return {
        "name": "g",
        "entry": "draft",
        "nodes": [
            {"id": "draft", "type": "agent", "prompt": "Write {{input}}", "next": "verify"},
            {
                "id": "verify",
                "type": "verifier",
                "prompt": "Review {{draft}}",
                "verdicts": {"pass": "ship", "fail": "draft"},
                **verifier,
            },
            {"id": "ship", "type": "agent", "prompt": "Ship: {{verify}}"},
        ],
    }


@pytest.fixture
def openai_server() -> Iterator[OpenAIWireServer]:
    with OpenAIWireServer() as server:
        yield server


def calls_of(model: ScriptedModel, node: str) -> list[Any]:
    return [call for call in model.calls if call.context.node == node]


# -- verdict_mode ------------------------------------------------------------------


async def test_a_structured_verdict_routes_and_its_value_ends_on_the_verdict() -> None:
    model = ScriptedModel(
        [
            {"node": "draft", "text": "d"},
            {"node": "verify", "visit": 1, "text": '{"critique": "no source", "verdict": "fail"}'},
            {"node": "verify", "text": '{"critique": "sourced now", "verdict": "pass"}'},
            {"node": "ship", "text": "shipped"},
        ]
    )
    run = await run_graph(verify_graph(verdict_mode="structured"), "x", model=model)
    assert (run.status, run.output) == ("done", "shipped")
    steps = [(s.node, s.verdict, s.output) for s in run.trajectory if s.node == "verify"]
    assert steps == [("verify", "fail", "no source\nfail"), ("verify", "pass", "sourced now\npass")]
    assert [c.response_format for c in calls_of(model, "verify")] == [PASS_FAIL, PASS_FAIL]
    assert calls_of(model, "ship")[0].context.prompt == "Ship: sourced now\npass"
    asked = calls_of(model, "verify")[0].messages[-1].content
    assert asked == f"Review d\n\n{structured_instruction(['pass', 'fail'])}"


def test_the_structured_instruction_says_what_each_verdict_is_for() -> None:
    text = structured_instruction(["pass", "fail"])
    assert text.index('"critique"') < text.index('"verdict"')  # reasoning before the label
    assert '"pass" means the text meets the request' in text
    assert "pass" not in structured_instruction(["ok", "redo"])  # no meaning it lacks


async def test_auto_reads_the_last_line_of_a_model_without_structured_output() -> None:
    model = ScriptedModel(
        [{"node": "draft", "text": "d"}, {"node": "verify", "text": "fine\npass"}, {"text": "s"}]
    )
    run = await run_graph(verify_graph(), "x", model=model)
    assert run.status == "done"
    assert [c.response_format for c in calls_of(model, "verify")] == [None]


@pytest.mark.parametrize(
    "bad", ['{"critique": "ok", "verdict": "maybe"}', "pass", '{"verdict": "pass"}']
)
async def test_an_invalid_structured_verdict_is_asked_again(
    openai_server: OpenAIWireServer, bad: str
) -> None:
    for text in ("d", bad, '{"critique": "ok", "verdict": "pass"}', "s"):
        openai_server.reply_text(text)
    async with OpenAIModel("local", base_url=openai_server.base_url) as model:
        run = await run_graph(verify_graph(), "x", model=model)
    assert run.status == "done"
    first, again = (r.body for r in openai_server.requests[1:3])
    assert again["response_format"] == first["response_format"]
    assert [m["content"] for m in again["messages"][-2:-1]] == [bad]
    assert again["messages"][-1]["content"].startswith("That reply was not valid: ")
    assert again["messages"][-1]["content"].endswith("whose verdict is one of: pass, fail.")
    assert run.trajectory[1].output == "ok\npass"


async def test_a_structured_verdict_with_a_raw_newline_in_its_critique_is_read() -> None:
    # llama-cpp-python's grammar for a JSON string admits raw control characters
    model = ScriptedModel(
        [
            {"node": "draft", "text": "d"},
            {"node": "verify", "text": '{"critique": "no source\nat all", "verdict": "pass"}'},
            {"node": "ship", "text": "shipped"},
        ]
    )
    run = await run_graph(verify_graph(verdict_mode="structured"), "x", model=model)
    assert run.status == "done"
    assert [s.output for s in run.trajectory if s.node == "verify"] == ["no source\nat all\npass"]


async def test_structured_verdicts_invalid_on_every_try_fail_the_node() -> None:
    model = ScriptedModel([{"node": "draft", "text": "d"}, {"node": "verify", "text": "{}"}])
    run = await run_graph(verify_graph(verdict_mode="structured", max_attempts=3), "x", model=model)
    assert (run.status, run.ended_detail) == ("failed", "no_valid_verdict")
    assert run.error is not None and "no valid verdict after 3 tries" in run.error
    assert "'critique' is a required property" in run.error


async def test_last_line_mode_asks_no_structured_output_of_a_model_that_has_it(
    openai_server: OpenAIWireServer,
) -> None:
    for text in ("d", "fine\npass", "s"):
        openai_server.reply_text(text)
    async with OpenAIModel("local", base_url=openai_server.base_url) as model:
        run = await run_graph(verify_graph(verdict_mode="last_line"), "x", model=model)
    assert run.status == "done"
    assert ["response_format" in r.body for r in openai_server.requests] == [False] * 3


async def test_auto_asks_an_openai_server_for_the_verdict_schema(
    openai_server: OpenAIWireServer,
) -> None:
    openai_server.reply_text("a draft")
    openai_server.reply_text(json.dumps({"critique": "cites its source", "verdict": "pass"}))
    openai_server.reply_text("published")
    async with OpenAIModel("local", base_url=openai_server.base_url) as model:
        run = await run_graph(verify_graph(), "x", model=model)
    assert (run.status, run.output) == ("done", "published")
    draft, verify, ship = (r.body for r in openai_server.requests)
    assert "response_format" not in draft
    assert verify["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": PASS_FAIL},
    }
    assert verify["response_format"]["json_schema"]["schema"]["properties"]["verdict"] == {
        "type": "string",
        "enum": ["pass", "fail"],
    }
    critique = verify["response_format"]["json_schema"]["schema"]["properties"]["critique"]
    assert critique == {"type": "string", "maxLength": CRITIQUE_MAX_CHARS}  # bounded
    assert ship["messages"][-1]["content"] == "Ship: cites its source\npass"
    # the default profile's tools go with tool_choice auto, which llama.cpp needs to use them
    assert draft["tool_choice"] == "auto" and {t["function"]["name"] for t in draft["tools"]}


# -- tool_choice -------------------------------------------------------------------


def lookup_registry(calls: list[dict[str, Any]]) -> ToolRegistry:
    async def lookup(args: dict[str, Any], ctx: ToolContext) -> Any:
        calls.append(args)
        return {"answer": 42}

    params = {"type": "object", "properties": {"q": {"type": "string"}}}
    return ToolRegistry(
        [
            tool("lookup", description="Look up.", parameters=params, read_only=True)(lookup),
            tool("other", description="Other.", read_only=True)(lookup),
        ]
    )


def agent_graph(choice: str, tools: list[str]) -> dict[str, Any]:
    node = {"id": "a", "type": "agent", "prompt": "Find x", "tools": tools, "tool_choice": choice}
    return {"name": "g", "entry": "a", "nodes": [node]}


PROFILE = AgentProfile(name="assistant", tools=["lookup", "other"])


async def test_a_required_tool_answered_with_text_is_asked_again_and_then_called(
    openai_server: OpenAIWireServer,
) -> None:
    calls: list[dict[str, Any]] = []
    openai_server.reply_text("I think x is 42.")  # a chat template that dropped the tools
    openai_server.reply_tool_calls([("call_1", "lookup", {"q": "x"})])
    openai_server.reply_text("x is 42")
    async with OpenAIModel("local", base_url=openai_server.base_url) as model:
        run = await run_graph(
            agent_graph("required", ["lookup", "other"]),
            model=model,
            tools=lookup_registry(calls),
            profiles={"assistant": PROFILE},
        )
    assert (run.status, run.output, calls) == ("done", "x is 42", [{"q": "x"}])
    sent = [r.body["tool_choice"] for r in openai_server.requests]
    assert sent == ["required", "required", "auto"]  # after the tool result: free to answer
    asked_again = openai_server.requests[1].body["messages"]
    assert [m["role"] for m in asked_again] == ["user"]  # the ignored reply is not kept
    assert run.trajectory[0].usage.input_tokens == 10 + 20 + 10  # every call counted


async def test_a_named_tool_ignored_twice_fails_the_node_saying_so(
    openai_server: OpenAIWireServer,
) -> None:
    openai_server.reply_text("no tools here")
    openai_server.reply_text("still none")
    async with OpenAIModel("local", base_url=openai_server.base_url) as model:
        run = await run_graph(
            agent_graph("lookup", ["lookup", "other"]),
            model=model,
            tools=lookup_registry([]),
            profiles={"assistant": PROFILE},
        )
    assert (run.status, run.ended_detail) == ("failed", "node_failed")
    assert run.error is not None
    assert "tool_choice 'lookup' requires a tool call" in run.error
    assert "the model or its server ignored the tools" in run.error
    assert len(openai_server.requests) == 2
    expected = {"type": "function", "function": {"name": "lookup"}}
    assert [r.body["tool_choice"] for r in openai_server.requests] == [expected, expected]


async def test_auto_and_none_take_a_plain_answer() -> None:
    for choice in ("auto", "none"):
        model = ScriptedModel([{"text": "plain"}])
        run = await run_graph(
            agent_graph(choice, ["lookup"]),
            model=model,
            tools=lookup_registry([]),
            profiles={"assistant": PROFILE},
        )
        assert (run.status, run.output) == ("done", "plain")
        assert [c.tool_choice for c in model.calls] == [choice]


@pytest.mark.parametrize(
    ("choice", "tools", "message"),
    [
        ("search", ["lookup"], "tool_choice 'search' is neither auto, required, none nor one"),
        ("required", [], "tool_choice required, but the node has no tools"),
    ],
)
def test_a_tool_choice_the_node_cannot_honour_is_refused(
    choice: str, tools: list[str], message: str
) -> None:
    with pytest.raises(GraphValidationError, match=message):
        load_graph(agent_graph(choice, tools))


def test_a_bad_verdict_mode_is_refused() -> None:
    with pytest.raises(GraphValidationError, match="verdict_mode"):
        load_graph(verify_graph(verdict_mode="json"))
