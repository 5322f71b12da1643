"""The Anthropic adapter against a real local server speaking the Messages API."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest

from plait.errors import ConfigError, ModelError, ModelRateLimited, ModelTimeout
from plait.models import AnthropicModel, CallContext, Message, ToolCall, Usage, load_model
from plait.models.anthropic import OUTPUT_TOOL
from plait.tools.spec import ToolSpec
from tests._support.timing import scaled

from .wire_servers import AnthropicWireServer

pytestmark = pytest.mark.anyio

CONTEXT = CallContext(node="draft")
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


def conversation() -> list[Message]:
    return [Message(role="system", content="be brief"), Message(role="user", content="hi")]


def model_for(server: AnthropicWireServer, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.base_url, api_key="sk-ant-x", **options)


def sent_key(headers: dict[str, str]) -> str | None:
    """The API key a request carried (SDK versions differ: ``x-api-key`` or bearer)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ") or None


async def test_text_reply_with_usage(anthropic_server: AnthropicWireServer) -> None:
    anthropic_server.reply_text("hello there", usage=(12, 3))
    async with model_for(anthropic_server) as model:
        reply = await model.complete(conversation(), context=CONTEXT)
    assert reply.text == "hello there"
    assert reply.usage == Usage(input_tokens=12, output_tokens=3)
    assert (reply.model, reply.stop_reason, reply.tool_calls) == ("claude-test", "end_turn", [])
    [request] = anthropic_server.requests
    assert sent_key(request.headers) == "sk-ant-x"
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


async def test_tool_use_round_trip(anthropic_server: AnthropicWireServer) -> None:
    anthropic_server.reply_tool_use([("toolu_1", "search", {"q": "plait"})], text="Let me look.")
    anthropic_server.reply_text("found it")
    async with model_for(anthropic_server, max_tokens=100) as model:
        messages = conversation()
        first = await model.complete(messages, tools=[SEARCH], context=CONTEXT)
        assert first.text == "Let me look."
        assert first.tool_calls == [ToolCall(id="toolu_1", name="search", arguments={"q": "plait"})]
        assert first.stop_reason == "tool_use"
        messages += [
            Message(role="assistant", content=first.text, tool_calls=first.tool_calls),
            Message(role="tool", tool_call_id="toolu_1", content="3 results"),
        ]
        second = await model.complete(messages, tools=[SEARCH], context=CONTEXT)
    assert second.text == "found it"
    first_request, second_request = (r.body for r in anthropic_server.requests)
    assert first_request["tools"] == [
        {"name": "search", "description": "Search the web.", "input_schema": SEARCH.parameters}
    ]
    assert first_request["max_tokens"] == 100
    assert second_request["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "plait"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 results"}],
        },
    ]


async def test_error_body_surfaces_status_and_provider_message(
    anthropic_server: AnthropicWireServer,
) -> None:
    anthropic_server.reply_error(400, "messages: roles must alternate")
    async with model_for(anthropic_server) as model:
        with pytest.raises(ModelError) as info:
            await model.complete(conversation(), context=CONTEXT)
    assert type(info.value) is ModelError
    assert "HTTP 400: messages: roles must alternate" in str(info.value)


async def test_rate_limit_is_retried_by_the_sdk(anthropic_server: AnthropicWireServer) -> None:
    anthropic_server.reply_error(429, "Slow down", "rate_limit_error", {"retry-after-ms": "10"})
    anthropic_server.reply_text("after the wait")
    async with model_for(anthropic_server, max_retries=1) as model:
        started = time.monotonic()
        reply = await model.complete(conversation(), context=CONTEXT)
    assert reply.text == "after the wait"
    assert len(anthropic_server.requests) == 2
    assert time.monotonic() - started < scaled(2)  # stretched on a busy machine


async def test_rate_limit_after_retries_is_model_rate_limited(
    anthropic_server: AnthropicWireServer,
) -> None:
    anthropic_server.reply_error(429, "Slow down", "rate_limit_error", {"retry-after-ms": "10"})
    async with model_for(anthropic_server, max_retries=0) as model:
        with pytest.raises(ModelRateLimited, match="Slow down"):
            await model.complete(conversation(), context=CONTEXT)


async def test_slow_server_is_a_model_timeout(anthropic_server: AnthropicWireServer) -> None:
    anthropic_server.push({}, delay=5.0)
    async with model_for(anthropic_server, timeout=0.2, max_retries=0) as model:
        started = time.monotonic()
        with pytest.raises(ModelTimeout):
            await model.complete(conversation(), context=CONTEXT)
    assert time.monotonic() - started < scaled(2)  # stretched on a busy machine


async def test_response_format_without_tools_is_a_forced_tool(
    anthropic_server: AnthropicWireServer,
) -> None:
    schema = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}}}
    anthropic_server.reply_tool_use([("toolu_1", OUTPUT_TOOL, {"verdict": "pass"})])
    async with model_for(anthropic_server) as model:
        assert model.structured_output
        reply = await model.complete(conversation(), context=CONTEXT, response_format=schema)
    assert (json.loads(reply.text), reply.tool_calls) == ({"verdict": "pass"}, [])
    body = anthropic_server.requests[0].body
    assert body["system"] == "be brief"
    assert [(t["name"], t["input_schema"]) for t in body["tools"]] == [(OUTPUT_TOOL, schema)]
    assert body["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}


async def test_response_format_with_tools_becomes_a_system_instruction(
    anthropic_server: AnthropicWireServer,
) -> None:
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}}
    anthropic_server.reply_text('{"verdict": "pass"}')
    async with model_for(anthropic_server) as model:
        reply = await model.complete(
            conversation(), tools=[SEARCH], context=CONTEXT, response_format=schema
        )
    assert reply.text == '{"verdict": "pass"}'
    body = anthropic_server.requests[0].body
    assert body["system"].startswith("be brief\n\nReply with only a JSON value")
    assert json.dumps(schema, indent=2) in body["system"]
    assert [t["name"] for t in body["tools"]] == ["search"] and "tool_choice" not in body


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("search", {"type": "tool", "name": "search"}),
    ],
)
async def test_tool_choice_is_sent_in_the_messages_api_form(
    anthropic_server: AnthropicWireServer, choice: str, wire: dict[str, str]
) -> None:
    anthropic_server.reply_tool_use([("toolu_1", "search", {"q": "plait"})])
    async with model_for(anthropic_server) as model:
        reply = await model.complete(
            conversation(), tools=[SEARCH], context=CONTEXT, tool_choice=choice
        )
    assert reply.tool_calls == [ToolCall(id="toolu_1", name="search", arguments={"q": "plait"})]
    assert anthropic_server.requests[0].body["tool_choice"] == wire


async def test_environment_base_url_alone_sends_a_placeholder_key(
    anthropic_server: AnthropicWireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.base_url)
    anthropic_server.reply_text("local")
    async with load_model("anthropic:claude-test") as model:
        assert model.spec == "anthropic:claude-test"
        assert (await model.complete(conversation(), context=CONTEXT)).text == "local"
    assert sent_key(anthropic_server.requests[0].headers) == "not-needed"


def test_no_key_and_no_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-20250514")


def test_missing_sdk_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ConfigError, match=r"pip install 'plait\[anthropic\]'"):
        AnthropicModel("claude-sonnet-4-20250514", api_key="sk-ant-x")
