"""OpenAI and OpenAI-compatible chat models (vLLM, Ollama, llama.cpp, LiteLLM...).

Uses the official ``openai`` SDK's chat completions with function tools. The key and
endpoint come from the arguments, else ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``; with
only a base URL set, a placeholder key is sent, which local servers ignore.

A ``response_format`` is sent as ``{"type": "json_schema", ...}`` (OpenAI, vLLM, Ollama,
llama.cpp's ``llama-server``); a server that refuses that form with an error naming the
``response_format`` (``llama-cpp-python``'s server) is asked again, and from then on,
with ``{"type": "json_object", "schema": ...}``, its grammar-constrained JSON mode. A
``tool_choice`` of ``"required"`` with one tool offered is sent as that tool's name: the
same demand, and servers that cannot force "some tool" can force a named one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from plait.errors import ConfigError, ModelError
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
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

LOCAL_API_KEY = "not-needed"
"""The key sent to a custom base URL when no key is configured."""

JsonMode = Literal["json_schema", "json_object"]
"""How a ``response_format`` schema goes on the wire.

- ``"json_schema"``: ``{"type": "json_schema", "json_schema": {"name", "schema"}}``, the
  OpenAI form.
- ``"json_object"``: ``{"type": "json_object", "schema": ...}``, the form of llama.cpp
  servers (``llama-cpp-python``'s only one).
"""


class OpenAIModel(Model):
    """A chat model behind the OpenAI chat completions API.

    It constrains replies to a ``response_format`` through the server
    (:attr:`~plait.models.Model.structured_output`).

    Args:
        model: the model name (``"gpt-4o-mini"``, or whatever a local server serves).
        api_key: the key; default ``OPENAI_API_KEY``.
        base_url: the API root (``"http://localhost:8000/v1"``); default
            ``OPENAI_BASE_URL``, else the OpenAI API.
        max_retries: how often the SDK itself retries rate limits, timeouts, connection
            errors and 5xx answers, with backoff (it honours ``retry-after``). Default 0: a
            node's ``retry`` policy retries them, with backoff, against the run's budget.
        timeout: seconds per request attempt.
        temperature: sampling temperature, or None for the server's default.
        max_tokens: a cap on reply tokens, or None for the server's default.
        json_mode: how a ``response_format`` is sent (see :data:`JsonMode`); None: the
            OpenAI form, falling back to the llama.cpp form once the server refuses it.

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
        max_retries: int = 0,
        timeout: float = 120.0,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_mode: JsonMode | None = None,
    ) -> None:
        self._sdk = import_sdk("openai", "openai")
        self.model = model
        self.spec = f"openai:{model}"
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise ConfigError(
                    f"no API key for {self.spec}: set OPENAI_API_KEY, pass api_key, or set "
                    "OPENAI_BASE_URL (or base_url) to a local OpenAI-compatible server"
                )
            api_key = LOCAL_API_KEY
        self.base_url = base_url
        self._json_mode: JsonMode = json_mode or "json_schema"
        self._json_fallback = json_mode is None
        self._options: dict[str, Any] = {}
        if temperature is not None:
            self._options["temperature"] = temperature
        if max_tokens is not None:
            self._options["max_tokens"] = max_tokens
        self._client: AsyncOpenAI = self._sdk.AsyncOpenAI(
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
        """Answer with one chat completion; see :meth:`Model.complete`."""
        request = self._request(messages, tools, response_format, tool_choice)
        return self._reply(await self._create(request, response_format))

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
        """Answer with one streamed chat completion (``stream_options.include_usage``, so
        the last chunk carries the usage); see :meth:`Model.stream`."""
        request = self._request(messages, tools, response_format, tool_choice)
        request["stream"] = True
        request["stream_options"] = {"include_usage": True}
        reply = StreamedReply(self.model)
        chunks = await self._create(request, response_format)
        try:
            async for chunk in chunks:
                text = reply.add(chunk)
                if text:
                    on_delta(text)
        except self._sdk.OpenAIError as exc:
            raise translate_error(self._sdk, exc, "openai", self.model) from exc
        return reply.assembled(self.spec)

    async def _create(self, request: dict[str, Any], response_format: dict[str, Any] | None) -> Any:
        """Send ``request``; a server that refuses the ``json_schema`` response format is
        asked again, and from then on, in the ``json_object`` form it enforces."""
        try:
            return await self._client.chat.completions.create(**request)
        except self._sdk.OpenAIError as exc:
            if response_format is None or not self._refuses_json_schema(exc):
                raise translate_error(self._sdk, exc, "openai", self.model) from exc
            self._json_mode, self._json_fallback = "json_object", False
            request["response_format"] = response_format_to_wire(response_format, "json_object")
            try:
                return await self._client.chat.completions.create(**request)
            except self._sdk.OpenAIError as again:
                raise translate_error(self._sdk, again, "openai", self.model) from again

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        response_format: dict[str, Any] | None,
        tool_choice: ToolChoice | None = None,
    ) -> dict[str, Any]:
        """The chat completions request body of a call."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [to_wire(message) for message in messages],
            **self._options,
        }
        if tools:
            request["tools"] = [tool_to_wire(tool) for tool in tools]
            if tool_choice is not None:
                request["tool_choice"] = tool_choice_to_wire(tool_choice, tools)
        if response_format is not None:
            request["response_format"] = response_format_to_wire(response_format, self._json_mode)
        return request

    def _refuses_json_schema(self, exc: Exception) -> bool:
        """Whether ``exc`` is a server refusing the ``json_schema`` response format."""
        if not (self._json_fallback and isinstance(exc, self._sdk.APIStatusError)):
            return False
        # llama-cpp-python's server answers its request validation error with a 500
        return exc.status_code in (400, 422, 500) and (
            "response_format" in str(exc.body) or "response_format" in exc.message
        )

    def _reply(self, completion: ChatCompletion) -> ModelReply:
        if not completion.choices:
            raise ModelError(f"{self.spec}: the response has no choices")
        choice = completion.choices[0]
        calls = []
        for call in choice.message.tool_calls or []:
            function = getattr(call, "function", None)
            if function is None:
                raise ModelError(f"{self.spec}: unsupported tool call type {call.type!r}")
            calls.append(
                ToolCall(
                    id=call.id,
                    name=function.name,
                    arguments=parse_arguments(function.arguments, function.name, self.spec),
                )
            )
        usage = completion.usage
        return ModelReply(
            text=choice.message.content or "",
            tool_calls=calls,
            usage=Usage(
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
            ),
            model=completion.model or self.model,
            stop_reason=choice.finish_reason,
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP connections."""
        await self._client.close()


class StreamedReply:
    """A reply assembled from the chunks of a streamed chat completion: the text pieces
    joined, each tool call's pieces (keyed by ``index``) joined, the usage of the last
    chunk, the finish reason of the first choice."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.texts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.finish_reason: str | None = None
        self.chunks = 0

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take one chunk in; the text it adds (empty when none)."""
        self.chunks += 1
        if chunk.model:
            self.model = chunk.model
        if chunk.usage is not None:
            self.usage = Usage(
                input_tokens=chunk.usage.prompt_tokens,
                output_tokens=chunk.usage.completion_tokens,
            )
        if not chunk.choices:
            return ""
        choice = chunk.choices[0]
        if choice.finish_reason is not None:
            self.finish_reason = choice.finish_reason
        delta = choice.delta
        for part in delta.tool_calls or []:
            call = self.calls.setdefault(part.index, {"id": "", "name": "", "arguments": []})
            if part.id:
                call["id"] = part.id
            if part.function is not None:
                if part.function.name:
                    call["name"] += part.function.name
                if part.function.arguments:
                    call["arguments"].append(part.function.arguments)
        text = delta.content or ""
        if text:
            self.texts.append(text)
        return text

    def assembled(self, spec: str) -> ModelReply:
        """The whole reply, as a non-streamed call would have returned it.

        Raises:
            ModelError: the stream held no chunk, or a tool call's arguments are not a
                JSON object.
        """
        if not self.chunks:
            raise ModelError(f"{spec}: the streamed response has no chunks")
        calls = [
            ToolCall(
                id=call["id"],
                name=call["name"],
                arguments=parse_arguments("".join(call["arguments"]), call["name"], spec),
            )
            for _, call in sorted(self.calls.items())
        ]
        return ModelReply(
            text="".join(self.texts),
            tool_calls=calls,
            usage=self.usage,
            model=self.model,
            stop_reason=self.finish_reason,
        )


def to_wire(message: Message) -> dict[str, Any]:
    """A message in the chat completions format."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        # "" rather than null beside the calls: llama-cpp-python's server refuses null
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return wire


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    """A tool as a chat completions function tool."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def tool_choice_to_wire(choice: ToolChoice, tools: Sequence[ToolSpec]) -> Any:
    """A :data:`ToolChoice` in the chat completions format.

    ``"required"`` with exactly one tool offered names that tool: the same demand, which
    servers that cannot force "any tool" (llama.cpp's) can force.
    """
    if choice == "required" and len(tools) == 1:
        choice = tools[0].name
    if choice in TOOL_CHOICE_WORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


def response_format_to_wire(schema: dict[str, Any], mode: JsonMode) -> dict[str, Any]:
    """A ``response_format`` schema in the chat completions format ``mode`` names."""
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


def parse_arguments(raw: str, tool: str, spec: str) -> dict[str, Any]:
    """Decode a tool call's JSON arguments string (an empty string means no arguments).

    Raises:
        ModelError: the string is not a JSON object.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ModelError(
            f"{spec}: the arguments of tool call {tool!r} are not valid JSON ({exc}): {raw[:200]!r}"
        ) from exc
    if not isinstance(value, dict):
        raise ModelError(
            f"{spec}: the arguments of tool call {tool!r} are not a JSON object: {raw[:200]!r}"
        )
    return cast(dict[str, Any], value)


__all__ = ["JsonMode", "OpenAIModel"]
