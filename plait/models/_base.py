"""The model contract: messages in, one reply out.

A :class:`Model` answers a conversation. It is told which tools it may call and who is
calling (a :class:`CallContext`: the node, its visit, the rendered prompt), and gives
back a :class:`ModelReply` with text, tool calls, token usage and the stop reason.

Streaming. :meth:`Model.stream` answers the same call while handing each piece of the
reply's text to ``on_delta`` as it arrives; it returns the same assembled reply, usage
included, that ``complete`` would. The default streams the whole text as one piece,
so every adapter streams; the HTTP adapters and the scripted model stream for real.

A tool loop is the caller's job: when a reply carries tool calls, the caller runs them,
appends the assistant message (with its ``tool_calls``) and one ``"tool"`` message per
result (with ``tool_call_id``), and calls ``complete`` again.

Errors. Every failure raises a :class:`~plait.errors.ModelError`: rate limits
(:class:`~plait.errors.ModelRateLimited`), timeouts (:class:`~plait.errors.ModelTimeout`)
and unreachable endpoints (:class:`~plait.errors.ModelConnectionError`) are retryable,
after the adapter's own retries are spent. No provider SDK exception escapes.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from plait.tools.spec import ToolSpec

Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks a message.

- ``"system"``: instructions for the model.
- ``"user"``: the prompt.
- ``"assistant"``: an earlier reply of the model, possibly with tool calls.
- ``"tool"``: the result of one tool call, linked to it by ``tool_call_id``.
"""

ToolChoice = str
"""Which tools a model call must or may use: ``"auto"`` (the model decides), ``"required"``
(at least one tool call), ``"none"`` (no tool call, though tools are described), or the
name of one offered tool (a call of exactly that tool)."""

TOOL_CHOICE_WORDS = ("auto", "required", "none")
"""The :data:`ToolChoice` values that are not a tool's name."""


class ToolCall(BaseModel):
    """A model's request to run one tool.

    Attributes:
        id: the provider's id for the call; its result message carries the same id.
        name: the tool's name.
        arguments: the tool's arguments, already decoded from JSON.
    """

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One message of a conversation.

    Attributes:
        role: who speaks (see :data:`Role`).
        content: the text; for a ``"tool"`` message, the tool's result.
        tool_calls: for an ``"assistant"`` message, the tools it asked for.
        tool_call_id: for a ``"tool"`` message, the id of the call it answers.
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None


class Usage(BaseModel):
    """Tokens spent by one call, or summed over many (``a + b``)."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class CallContext(BaseModel):
    """Who is calling the model, for scripted answers, logs and accounting.

    Attributes:
        node: the graph node id; for a fan-out instance, the id of its target node.
        visit: how many times this node has run in the run, counting this one (from 1);
            a retried attempt keeps its visit.
        instance: the fan-out instance id (``"fetcher[1]"``), or None.
        run_id: the run, or None outside a durable run.
        prompt: the rendered prompt of this node visit.
    """

    node: str = ""
    visit: int = 1
    instance: str | None = None
    run_id: str | None = None
    prompt: str = ""


class ModelReply(BaseModel):
    """A model's answer to one call.

    Attributes:
        text: the reply text (may be empty when the reply is only tool calls).
        tool_calls: the tools the model asks to run, in order.
        usage: the tokens this call spent.
        model: the model that answered, as the provider names it.
        stop_reason: why generation stopped, in the provider's words (``"stop"``,
            ``"tool_calls"``, ``"end_turn"``, ``"max_tokens"``...), if known.
    """

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage
    model: str
    stop_reason: str | None = None


OnDelta = Callable[[str], None]
"""Called with each piece of a streamed reply's text, in order; it must not block (it
runs on the event loop between the pieces a provider sends)."""


class Model(abc.ABC):
    """A chat model adapter.

    Attributes:
        spec: the spec string that names this model (``"openai:gpt-4o-mini"``).
        structured_output: whether the adapter constrains a reply to a ``response_format``
            schema through the provider (a JSON schema mode, or a forced tool) rather
            than only asking for it; a verifier in ``verdict_mode: auto`` asks such a
            model for a structured verdict. False here: subclasses that can say so.
    """

    spec: str
    structured_output: bool = False

    @abc.abstractmethod
    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        context: CallContext,
        response_format: dict[str, Any] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> ModelReply:
        """Answer a conversation.

        Args:
            messages: the conversation so far, oldest first.
            tools: the tools the model may call; empty means none.
            context: who is calling.
            response_format: a JSON schema the reply text must match, or None for
                free text. Adapters pass it to the provider where it has such a mode
                and otherwise instruct the model.
            tool_choice: which of ``tools`` the reply must or may call (see
                :data:`ToolChoice`), or None to send none and leave the provider's
                default; ignored without tools.

        Returns:
            The reply, with the tokens it spent.

        Raises:
            ModelError: the call failed; the subclass says whether it is retryable.
        """

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
        """Answer a conversation as :meth:`complete` does, streaming the reply's text.

        Each piece of the text goes to ``on_delta`` as it arrives; the pieces joined are
        the returned reply's ``text``. Tool calls are assembled, never handed out in
        pieces. The default calls :meth:`complete` and hands its text over in one piece.

        Raises:
            ModelError: as :meth:`complete`; pieces already handed over stay handed over.
        """
        reply = await self.complete(
            messages,
            tools=tools,
            context=context,
            response_format=response_format,
            **({} if tool_choice is None else {"tool_choice": tool_choice}),
        )
        if reply.text:
            on_delta(reply.text)
        return reply

    async def aclose(self) -> None:  # noqa: B027 (a no-op default is the point)
        """Release connections; the model must not be used after. The default does nothing."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


__all__ = [
    "TOOL_CHOICE_WORDS",
    "CallContext",
    "Message",
    "Model",
    "ModelReply",
    "OnDelta",
    "Role",
    "ToolCall",
    "ToolChoice",
    "Usage",
]
