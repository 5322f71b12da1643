"""The ``agent`` kind: a model turn (a bounded loop of model and tool calls) on a prompt."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal, TypeAlias

from pydantic import Field

from plait.graphs.agent_loop import parse_structured
from plait.graphs.nodes._turn import finish, first_call, start_turn
from plait.graphs.nodes.base import (
    MAX_ROUNDS,
    Checks,
    NodeBase,
    NodeKind,
    SpecModel,
    Visit,
    check_schema,
    named_agent,
)
from plait.graphs.nodes.prompt_source import SourcedPrompt, prompt_templates, prompt_tools
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext
from plait.models import TOOL_CHOICE_WORDS, Message


class LastTurns(SpecModel):
    """Carry only the last ``last`` turns (a user message and what answered it)."""

    last: int = Field(ge=1)


HistorySetting: TypeAlias = Literal["all", "none"] | LastTurns
"""How much of an agent node's conversation its next visit carries: ``all``, ``none``
(each visit starts afresh), or ``{last: N}`` turns (the system prompt stays)."""


class AgentNode(NodeBase, SourcedPrompt):
    """A model turn (a bounded loop of model calls and tool calls) on a rendered prompt.

    Attributes:
        history: how much of the conversation so far the next visit carries.
        tool_choice: which tools the visit's first model call must or may use:
            ``auto`` (the model decides), ``required`` (some tool), ``none``, or a tool's
            name. A ``required`` or named call answered with plain text is asked again
            once; plain text again fails the node (the model or its server ignored the
            tools). The calls after the tool results run with ``auto``.

    Its ``prompt`` and ``prompt_from`` are those of :class:`SourcedPrompt`.
    """

    type: Literal["agent"]
    response_format: dict[str, Any] | None = None
    agent: str | None = None
    tools: list[str] | None = None
    max_rounds: int = Field(default=8, ge=1, le=MAX_ROUNDS)
    history: HistorySetting = "all"
    tool_choice: str = "auto"


def carried(history: Sequence[Message], setting: HistorySetting) -> Sequence[Message]:
    """What of a node's conversation so far its next visit carries (see ``history``)."""
    if setting == "all" or not history:
        return history
    head = history[:1] if history[0].role == "system" else []
    if setting == "none":
        return head
    assert isinstance(setting, LastTurns)
    starts = [i for i, m in enumerate(history) if m.role == "user"]
    if len(starts) <= setting.last:
        return history
    return [*head, *history[starts[-setting.last] :]]


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, AgentNode)
    profile = env.profile(node.agent)
    setting = node.history
    mv = await start_turn(
        env,
        state,
        v,
        ctx,
        prompt=node,
        agent=node.agent,
        carry=lambda history: carried(history, setting),
        tools=list(node.tools if node.tools is not None else profile.tools),
        max_rounds=node.max_rounds,
        response_format=node.response_format,
        tool_choice=node.tool_choice,
    )
    result = await first_call(mv)
    out = NodeResult(prompt=mv.prompt, tainted=result.used_external or mv.outside)
    if result.waiting is not None:
        # The visit runs again from its start once the person answered; a conversation
        # cut off at an unanswered tool call is no history to carry on from.
        out.waiting, out.history = result.waiting, None
    else:
        out.value = (
            parse_structured(result.text, node.response_format)
            if node.response_format
            else result.text
        )
    return finish(mv, out, result, result.usage, result.dollars)


def _validate(node: AgentNode, path: str, checks: Checks) -> None:
    check_schema(checks, f"{path}.response_format", node.response_format)
    choice = node.tool_choice
    if choice in TOOL_CHOICE_WORDS:
        if choice == "required" and node.tools == []:
            checks.problem(f"{path}.tool_choice", "tool_choice required, but the node has no tools")
    elif node.tools is not None and choice not in node.tools:
        checks.problem(
            f"{path}.tool_choice",
            f"tool_choice {choice!r} is neither auto, required, none nor one of the "
            f"node's tools ({', '.join(node.tools) or 'none'})",
        )


def _tools(node: AgentNode) -> Iterator[tuple[str, str]]:
    for k, tool in enumerate(node.tools or []):
        yield f".tools[{k}]", tool
    yield from prompt_tools(node)


def _agent_tools(node: AgentNode) -> bool:
    return node.tools is None  # naming none, it has every tool of its profile


def _carries_history(node: AgentNode) -> bool:
    return node.history != "none"


KIND = NodeKind(
    type="agent",
    calls_model=True,
    spec=AgentNode,
    execute=_execute,
    shape=("[", "]"),
    templates=prompt_templates,
    validate=_validate,
    tools=_tools,
    agent=named_agent,
    agent_tools=_agent_tools,
    carries_history=_carries_history,
)
"""The agent kind."""

__all__ = ["KIND", "AgentNode", "HistorySetting", "LastTurns", "carried"]
