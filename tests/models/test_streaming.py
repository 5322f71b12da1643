"""Streaming: every adapter hands its reply over in pieces and returns what ``complete``
returns; the HTTP adapters against local servers speaking the providers' streaming wire
formats (server-sent events, tool-call pieces, the usage chunk)."""

from __future__ import annotations

import json

import pytest

from plait.models import (
    AnthropicModel,
    CallContext,
    Message,
    Model,
    ModelReply,
    OpenAIModel,
    ScriptedModel,
    ToolCall,
    Usage,
)
from plait.models.scripted import cut
from plait.tools.spec import ToolSpec

from .wire_servers import (
    AnthropicWireServer,
    OpenAIWireServer,
    anthropic_frames,
    openai_frames,
)

pytestmark = pytest.mark.anyio

CONTEXT = CallContext(node="draft")
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
PIECES = ["Hel", "lo, ", "wor", "ld ✓"]


def conversation() -> list[Message]:
    return [Message(role="system", content="be brief"), Message(role="user", content="hi")]


async def streamed(
    model: Model, tools: list[ToolSpec] | None = None
) -> tuple[ModelReply, list[str]]:
    pieces: list[str] = []
    reply = await model.stream(
        conversation(), tools=tools or [], context=CONTEXT, on_delta=pieces.append
    )
    return reply, pieces


async def test_openai_streams_text_pieces_and_usage(openai_server: OpenAIWireServer) -> None:
    openai_server.push_frames(openai_frames(PIECES, usage=(12, 4)))
    openai_server.reply_text("".join(PIECES), usage=(12, 4))
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        reply, pieces = await streamed(model)
        whole = await model.complete(conversation(), context=CONTEXT)
    assert pieces == PIECES
    assert reply == whole
    assert reply.usage == Usage(input_tokens=12, output_tokens=4)
    body = openai_server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "stream" not in openai_server.requests[1].body


async def test_openai_assembles_tool_call_pieces(openai_server: OpenAIWireServer) -> None:
    arguments = ['{"q"', ': "pla', 'it"}']
    frames = openai_frames(
        ["Let me look. "],
        calls=[("call_1", "search", arguments), ("call_2", "search", ['{"q": "x"}'])],
        usage=(20, 8),
        finish_reason="tool_calls",
    )
    openai_server.push_frames(frames)
    async with OpenAIModel("gpt-test", base_url=openai_server.base_url) as model:
        reply, pieces = await streamed(model, [SEARCH])
    assert pieces == ["Let me look. "]
    assert reply.tool_calls == [
        ToolCall(id="call_1", name="search", arguments={"q": "plait"}),
        ToolCall(id="call_2", name="search", arguments={"q": "x"}),
    ]
    assert (reply.stop_reason, reply.usage) == (
        "tool_calls",
        Usage(input_tokens=20, output_tokens=8),
    )


async def test_anthropic_streams_text_pieces_and_usage(
    anthropic_server: AnthropicWireServer,
) -> None:
    anthropic_server.push_frames(anthropic_frames(PIECES, usage=(12, 4)))
    anthropic_server.reply_text("".join(PIECES), usage=(12, 4))
    async with AnthropicModel("claude-test", base_url=anthropic_server.base_url) as model:
        reply, pieces = await streamed(model)
        whole = await model.complete(conversation(), context=CONTEXT)
    assert pieces == PIECES
    assert reply == whole
    assert anthropic_server.requests[0].body["stream"] is True


async def test_anthropic_assembles_tool_use_pieces(anthropic_server: AnthropicWireServer) -> None:
    frames = anthropic_frames(
        ["Looking."],
        calls=[("toolu_1", "search", ['{"q": ', '"plait"}'])],
        usage=(20, 8),
        stop_reason="tool_use",
    )
    anthropic_server.push_frames(frames)
    async with AnthropicModel("claude-test", base_url=anthropic_server.base_url) as model:
        reply, pieces = await streamed(model, [SEARCH])
    assert pieces == ["Looking."]
    assert reply.text == "Looking."
    assert reply.tool_calls == [ToolCall(id="toolu_1", name="search", arguments={"q": "plait"})]
    assert (reply.stop_reason, reply.usage) == ("tool_use", Usage(input_tokens=20, output_tokens=8))


async def test_scripted_cuts_its_text_into_the_rules_chunks() -> None:
    text = "".join(f"word{i} " for i in range(100))
    model = ScriptedModel([{"node": "draft", "text": text, "chunks": 200}])
    reply, pieces = await streamed(model)
    assert len(pieces) == 200 and "".join(pieces) == text
    assert reply == await model.complete(conversation(), context=CONTEXT)


async def test_default_stream_hands_the_whole_text_over_once() -> None:
    class Plain(ScriptedModel):
        stream = Model.stream  # the contract's default

    model = Plain([{"text": "all at once", "chunks": 5}])
    reply, pieces = await streamed(model)
    assert pieces == ["all at once"] and reply.text == "all at once"


def test_cut_joins_back_and_never_makes_empty_pieces() -> None:
    for text in ("", "a", "abc", "x" * 1001):
        for count in (1, 2, 3, 200):
            pieces = cut(text, count)
            assert "".join(pieces) == text
            assert all(pieces) and len(pieces) == min(count, len(text))


def test_frames_are_the_wire_format() -> None:
    frame = openai_frames(["a"])[1]
    assert frame.startswith("data: ") and json.loads(frame[6:])["object"] == "chat.completion.chunk"
