"""Anthropic chat models through the Messages API.

Uses the official ``anthropic`` SDK. System messages go in ``system``; an assistant's
tool calls are ``tool_use`` blocks; tool results are ``tool_result`` blocks of a user
message. Consecutive messages of one role are merged, since the API wants user and
assistant turns to alternate. A ``response_format`` on a call without tools is a
forced tool (:data:`OUTPUT_TOOL`, its input schema the format): the reply text is the
JSON of that tool's input. With tools offered, the model must stay free to call them, so
the format becomes an instruction appended to the system prompt instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigError
from plait.models._base import (
    TOOL_CHOICE_WORDS,
    CallContext,
    Message,
    Model,
    ModelReply,
    OnDelta,
    ToolCall,
    ToolChoice,
    Usage,
)
from plait.models._sdk import import_sdk, translate_error
from plait.tools.spec import ToolSpec

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message as WireMessage

LOCAL_API_KEY = "not-needed"
"""The key sent to a custom base URL when no key is configured."""

DEFAULT_MAX_TOKENS = 4096

OUTPUT_TOOL = "structured_output"
"""The tool a ``response_format`` call without tools is forced to call."""


class AnthropicModel(Model):
    """A Claude model behind the Anthropic Messages API.

    It constrains replies to a ``response_format`` by a forced tool
    (:attr:`~plait.models.Model.structured_output`).

    Args:
        model: the model name (``"claude-sonnet-4-20250514"``).
        api_key: the key; default ``ANTHROPIC_API_KEY``.
        base_url: the API root; default ``ANTHROPIC_BASE_URL``, else the Anthropic API.
        max_tokens: the cap on reply tokens the API requires.
        max_retries: how often the SDK itself retries rate limits, overload, timeouts and
            connection errors, with backoff (it honours ``retry-after``). Default 0: a
            node's ``retry`` policy retries them, with backoff, against the run's budget.
        timeout: seconds per request attempt.
        temperature: sampling temperature, or None for the API's default.

    Raises:
        ConfigError: the SDK is missing, or neither a key nor a base URL is set.
    """

    structured_output = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_retries: int = 0,
        timeout: float = 120.0,
        temperature: float | None = None,
    ) -> None:
        self._sdk = import_sdk("anthropic", "anthropic")
        self.model = model
        self.spec = f"anthropic:{model}"
        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise ConfigError(
                    f"no API key for {self.spec}: set ANTHROPIC_API_KEY or pass api_key"
                )
            api_key = LOCAL_API_KEY
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._client: AsyncAnthropic = self._sdk.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
        )

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        context: CallContext,
        response_format: dict[str, Any] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> ModelReply:
        """Answer with one Messages API call; see :meth:`Model.complete`."""
        request = self._request(messages, tools, response_format, tool_choice)
        try:
            reply = await self._client.messages.create(**request)
        except self._sdk.AnthropicError as exc:
            raise translate_error(self._sdk, exc, "anthropic", self.model) from exc
        return self._reply(reply, forced=_forced(tools, response_format))

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        context: CallContext,
        on_delta: OnDelta,
        response_format: dict[str, Any] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> ModelReply:
        """Answer with one streamed Messages API call (its ``text_delta`` events go to
        ``on_delta``; the SDK assembles the final message, tool inputs and usage
        included); see :meth:`Model.stream`."""
        request = self._request(messages, tools, response_format, tool_choice)
        try:
            async with self._client.messages.stream(**request) as events:
                async for event in events:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        on_delta(event.delta.text)
                final = await events.get_final_message()
        except self._sdk.AnthropicError as exc:
            raise translate_error(self._sdk, exc, "anthropic", self.model) from exc
        return self._reply(final, forced=_forced(tools, response_format))

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        response_format: dict[str, Any] | None,
        tool_choice: ToolChoice | None = None,
    ) -> dict[str, Any]:
        """The Messages API request body of a call."""
        system, turns = to_wire(messages)
        forced = _forced(tools, response_format)
        if response_format is not None and tools:
            system = "\n\n".join(
                part for part in (system, json_instruction(response_format)) if part
            )
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": turns,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [tool_to_wire(tool) for tool in tools]
            if tool_choice is not None:
                request["tool_choice"] = tool_choice_to_wire(tool_choice)
        elif forced:
            assert response_format is not None
            request["tools"] = [
                {
                    "name": OUTPUT_TOOL,
                    "description": "Give your reply as this tool's input.",
                    "input_schema": response_format,
                }
            ]
            request["tool_choice"] = {"type": "tool", "name": OUTPUT_TOOL}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return request

    def _reply(self, reply: WireMessage, *, forced: bool = False) -> ModelReply:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in reply.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use" and forced and block.name == OUTPUT_TOOL:
                texts = [json.dumps(block.input)]  # the structured reply is the whole text
                forced = False
            elif block.type == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(block.input)))
        return ModelReply(
            text="".join(texts),
            tool_calls=calls,
            usage=Usage(
                input_tokens=reply.usage.input_tokens, output_tokens=reply.usage.output_tokens
            ),
            model=reply.model or self.model,
            stop_reason=reply.stop_reason,
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP connections."""
        await self._client.close()


def to_wire(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and the alternating user/assistant turns of a conversation."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            system.append(message.content)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
        ]
    # The API rejects empty text blocks; an assistant turn of only tool calls has none.
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": message.content}]
        if message.content or not message.tool_calls
        else []
    )
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    )
    return blocks


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    """A tool as the Messages API describes one."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def tool_choice_to_wire(choice: ToolChoice) -> dict[str, Any]:
    """A :data:`~plait.models.ToolChoice` as the Messages API's ``tool_choice``."""
    if choice in TOOL_CHOICE_WORDS:
        return {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    return {"type": "tool", "name": choice}


def _forced(tools: Sequence[ToolSpec], response_format: dict[str, Any] | None) -> bool:
    """Whether a call's response format is asked for as a forced output tool (it is
    when the call offers no tools of its own)."""
    return response_format is not None and not tools


def json_instruction(schema: dict[str, Any]) -> str:
    """The system prompt addition that asks for a reply matching ``schema``."""
    return (
        "Reply with only a JSON value that matches this JSON schema, with no other text "
        f"and no code fences:\n{json.dumps(schema, indent=2)}"
    )


__all__ = ["OUTPUT_TOOL", "AnthropicModel"]
