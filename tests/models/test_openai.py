"""The OpenAI adapter against a real local server speaking chat completions."""

from __future__ import annotations

import re
import socket
import sys
import time

import pytest

from plait.errors import (
    ConfigError,
    ModelConnectionError,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
)
from plait.models import CallContext, Message, OpenAIModel, ToolCall, Usage, load_model
from plait.tools.spec import ToolSpec
from tests._support.timing import scaled

from .wire_servers import OpenAIWireServer

pytestmark = pytest.mark.anyio

CONTEXT = CallContext(node="draft")
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


def conversation() -> list[Message]:
    return [Message(role="system", content="be brief"), Message(role="user", content="hi")]


async def test_text_reply_with_usage(openai_server: OpenAIWireServer) -> None:
    openai_server.reply_text("hello there", usage=(12, 3))
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url, api_key="sk-x") as model:
        reply = await model.complete(conversation(), context=CONTEXT)
    assert reply.text == "hello there"
    assert reply.usage == Usage(input_tokens=12, output_tokens=3)
    assert (reply.model, reply.stop_reason, reply.tool_calls) == ("gpt-test", "stop", [])
    [request] = openai_server.requests
    assert request.headers["authorization"] == "Bearer sk-x"
    assert request.body["model"] == "gpt-test"
    assert request.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert "tools" not in request.body and "response_format" not in request.body


async def test_tool_call_round_trip(openai_server: OpenAIWireServer) -> None:
    openai_server.reply_tool_calls([("call_1", "search", {"q": "plait"})])
    openai_server.reply_text("found it")
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        messages = conversation()
        first = await model.complete(messages, tools=[SEARCH], context=CONTEXT)
        assert first.tool_calls == [ToolCall(id="call_1", name="search", arguments={"q": "plait"})]
        assert first.stop_reason == "tool_calls"
        messages += [
            Message(role="assistant", tool_calls=first.tool_calls),
            Message(role="tool", tool_call_id="call_1", content="3 results"),
        ]
        second = await model.complete(messages, tools=[SEARCH], context=CONTEXT)
    assert second.text == "found it"
    sent_tools = openai_server.requests[0].body["tools"]
    assert sent_tools == [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "Search the web.",
                "parameters": SEARCH.parameters,
            },
        }
    ]
    assistant, tool = openai_server.requests[1].body["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": "",  # not null, which llama-cpp-python's server refuses
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q": "plait"}'},
            }
        ],
    }
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "3 results"}


async def test_malformed_tool_arguments_are_a_model_error(
    openai_server: OpenAIWireServer,
) -> None:
    openai_server.reply_tool_calls([("call_1", "search", '{"q": "pla')])
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        with pytest.raises(ModelError, match="arguments of tool call 'search' are not valid JSON"):
            await model.complete(conversation(), tools=[SEARCH], context=CONTEXT)


async def test_error_body_surfaces_status_and_provider_message(
    openai_server: OpenAIWireServer,
) -> None:
    openai_server.reply_error(400, "Invalid value for 'messages': too long.")
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        with pytest.raises(ModelError) as info:
            await model.complete(conversation(), context=CONTEXT)
    assert type(info.value) is ModelError
    assert "HTTP 400: Invalid value for 'messages': too long." in str(info.value)
    assert not info.value.retryable


async def test_server_error_after_retries_is_retryable(openai_server: OpenAIWireServer) -> None:
    openai_server.reply_error(503, "Overloaded, try again.", "server_error")
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url, max_retries=0) as model:
        with pytest.raises(ModelError, match=r"HTTP 503: Overloaded, try again\.") as info:
            await model.complete(conversation(), context=CONTEXT)
    assert info.value.retryable


async def test_rate_limit_is_retried_by_the_sdk(openai_server: OpenAIWireServer) -> None:
    openai_server.reply_error(429, "Slow down.", "rate_limit_exceeded", {"retry-after-ms": "10"})
    openai_server.reply_text("after the wait")
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url, max_retries=1) as model:
        started = time.monotonic()
        reply = await model.complete(conversation(), context=CONTEXT)
    assert reply.text == "after the wait"
    assert len(openai_server.requests) == 2
    assert time.monotonic() - started < scaled(2)  # stretched on a busy machine


async def test_rate_limit_after_retries_is_model_rate_limited(
    openai_server: OpenAIWireServer,
) -> None:
    openai_server.reply_error(429, "Slow down.", "rate_limit_exceeded", {"retry-after-ms": "10"})
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url, max_retries=0) as model:
        with pytest.raises(ModelRateLimited, match=r"Slow down\.") as info:
            await model.complete(conversation(), context=CONTEXT)
    assert info.value.retryable


async def test_slow_server_is_a_model_timeout(openai_server: OpenAIWireServer) -> None:
    openai_server.push({}, delay=5.0)
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, timeout=0.2, max_retries=0)
    async with model:
        started = time.monotonic()
        with pytest.raises(ModelTimeout) as info:
            await model.complete(conversation(), context=CONTEXT)
    assert time.monotonic() - started < scaled(2)  # stretched on a busy machine
    assert info.value.retryable


async def test_unreachable_server_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    async with OpenAIModel("gpt-test", base_url=url, max_retries=0) as model:
        with pytest.raises(ModelConnectionError, match=re.escape(f"cannot reach {url}")):
            await model.complete(conversation(), context=CONTEXT)


async def test_response_format_is_sent_as_a_json_schema(openai_server: OpenAIWireServer) -> None:
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}}
    openai_server.reply_text('{"verdict": "pass"}')
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        reply = await model.complete(conversation(), context=CONTEXT, response_format=schema)
    assert reply.text == '{"verdict": "pass"}'
    assert openai_server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }


async def test_environment_base_url_alone_sends_a_placeholder_key(
    openai_server: OpenAIWireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.reply_text("local")
    async with load_model("openai:llama3", temperature=0.0, max_tokens=50) as model:
        assert model.spec == "openai:llama3"
        assert (await model.complete(conversation(), context=CONTEXT)).text == "local"
    request = openai_server.requests[0]
    assert request.headers["authorization"] == "Bearer not-needed"
    assert (request.body["temperature"], request.body["max_tokens"]) == (0.0, 50)


def test_no_key_and_no_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4o")


def test_missing_sdk_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigError, match=r"pip install 'plait\[openai\]'"):
        OpenAIModel("gpt-4o", api_key="sk-x")


FETCH = ToolSpec(name="fetch", description="Fetch a page.", parameters={"type": "object"})


@pytest.mark.parametrize(
    ("tools", "choice", "wire"),
    [
        ([SEARCH, FETCH], "auto", "auto"),
        ([SEARCH, FETCH], "none", "none"),
        ([SEARCH, FETCH], "required", "required"),
        ([SEARCH, FETCH], "fetch", {"type": "function", "function": {"name": "fetch"}}),
        # one tool offered: "required" names it, which llama.cpp servers can force
        ([SEARCH], "required", {"type": "function", "function": {"name": "search"}}),
    ],
)
async def test_tool_choice_is_sent_with_the_tools(
    openai_server: OpenAIWireServer, tools: list[ToolSpec], choice: str, wire: object
) -> None:
    openai_server.reply_tool_calls([("call_1", "search", {"q": "plait"})])
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        reply = await model.complete(
            conversation(), tools=tools, context=CONTEXT, tool_choice=choice
        )
    assert reply.tool_calls == [ToolCall(id="call_1", name="search", arguments={"q": "plait"})]
    assert openai_server.requests[0].body["tool_choice"] == wire


async def test_tool_choice_without_tools_or_unset_is_not_sent(
    openai_server: OpenAIWireServer,
) -> None:
    openai_server.reply_text("a")
    openai_server.reply_text("b")
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        await model.complete(conversation(), context=CONTEXT, tool_choice="required")
        await model.complete(conversation(), tools=[SEARCH], context=CONTEXT)
    assert [("tool_choice" in r.body) for r in openai_server.requests] == [False, False]


async def test_a_server_refusing_json_schema_gets_the_llama_cpp_form_from_then_on(
    openai_server: OpenAIWireServer,
) -> None:
    schema = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}}}
    # llama-cpp-python's server knows only text / json_object, and says so with a 500
    refusal = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
    )
    openai_server.reply_error(500, refusal, type="internal_server_error")
    openai_server.reply_text('{"verdict": "pass"}')
    openai_server.reply_text('{"verdict": "fail"}')
    async with OpenAIModel("local", base_url=openai_server.base_url) as model:
        assert model.structured_output
        first = await model.complete(conversation(), context=CONTEXT, response_format=schema)
        second = await model.complete(conversation(), context=CONTEXT, response_format=schema)
    assert (first.text, second.text) == ('{"verdict": "pass"}', '{"verdict": "fail"}')
    sent = [r.body["response_format"] for r in openai_server.requests]
    llama_form = {"type": "json_object", "schema": schema}
    assert sent == [
        {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}},
        llama_form,
        llama_form,
    ]


async def test_other_client_errors_are_not_taken_for_a_refused_json_schema(
    openai_server: OpenAIWireServer,
) -> None:
    openai_server.reply_error(400, "maximum context length exceeded")
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        with pytest.raises(ModelError, match="HTTP 400: maximum context length exceeded"):
            await model.complete(conversation(), context=CONTEXT, response_format={})
    assert len(openai_server.requests) == 1


async def test_a_chosen_json_mode_is_sent_as_chosen(openai_server: OpenAIWireServer) -> None:
    openai_server.push({"error": {"message": "bad response_format"}}, status=400)
    async with OpenAIModel(
        "local", base_url=openai_server.base_url, json_mode="json_schema"
    ) as model:
        with pytest.raises(ModelError, match="HTTP 400"):
            await model.complete(conversation(), context=CONTEXT, response_format={})
    assert len(openai_server.requests) == 1  # chosen, so not second-guessed
