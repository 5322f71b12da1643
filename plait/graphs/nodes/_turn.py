"""The model turn agent and verifier nodes share: prompt, conversation, the call."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from plait.graphs.agent_loop import Turn, TurnResult, run_turn
from plait.graphs.nodes.base import Visit
from plait.graphs.nodes.prompt_source import SourcedPrompt, fetch_prompt
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext, render
from plait.models import CallContext, Message, Usage


@dataclass(slots=True)
class ModelVisit:
    """A model node's visit, set up: its turn, the messages it starts from (the last
    ``own`` of them this visit's prompt), the conversation of its earlier visits, and
    whether its prompt is outside content (from an untrusted prompt source)."""

    prompt: str
    turn: Turn
    messages: list[Message]
    history: Sequence[Message]
    own: int = 1
    outside: bool = False


async def start_turn(
    env: ExecEnv,
    state: RunState,
    v: Visit,
    ctx: TemplateContext,
    *,
    prompt: SourcedPrompt,
    agent: str | None,
    carry: Callable[[Sequence[Message]], Sequence[Message]] = lambda history: history,
    tools: list[str] | None = None,
    max_rounds: int = 1,
    response_format: dict[str, Any] | None = None,
    tool_choice: str | None = None,
) -> ModelVisit:
    """Render the node's prompt and set up the turn; ``carry`` picks what of the
    conversation so far the visit carries; the messages of its prompt source come before
    the rendered prompt (left out when empty)."""
    profile = env.profile(agent)
    source = prompt.prompt_from
    own, outside = await fetch_prompt(env, v, ctx, source, profile) if source else ([], False)
    rendered = render(prompt.prompt, ctx, node=v.key)
    if rendered or not own:
        own.append(Message(role="user", content=rendered))
    shown = "\n\n".join(m.content for m in own)
    plan = state.instance_of(v.key)
    call = CallContext(
        node=plan.target if plan else v.key,
        visit=v.visit,
        instance=v.key if plan else None,
        run_id=env.run_id,
        prompt=shown,
    )
    history = await env.histories.load(v.key)
    kept = carry(history)
    messages = (
        [Message(role="system", content=profile.system_prompt)]
        if profile.system_prompt and not kept
        else []
    )
    messages += [*kept, *own]
    turn = Turn(
        env=env,
        profile=profile,
        model=env.model_for(profile),
        context=call,
        tools=tools or [],
        trusted=v.trusted and not outside,
        max_rounds=max_rounds,
        response_format=response_format,
        tool_choice=tool_choice,
        budget=v.budget,
        timeout_s=v.node.timeout_s,
    )
    return ModelVisit(shown, turn, messages, history, len(own), outside)


def first_call(mv: ModelVisit) -> Coroutine[Any, Any, TurnResult]:
    """The turn's first run, from the visit's messages (to await)."""
    return run_turn(mv.turn, mv.messages)  # no coroutine of its own: one frame less a visit


def finish(
    mv: ModelVisit, out: NodeResult, result: TurnResult, usage: Usage, dollars: float
) -> NodeResult:
    """``out`` with what the visit spent and the conversation to keep (unless it waits)."""
    out.input_tokens, out.output_tokens = usage.input_tokens, usage.output_tokens
    out.dollars = dollars
    if out.waiting is None:
        # The whole conversation is kept (the runner stores only what this visit
        # added); the history setting trims what the next visit carries, not what is kept.
        added = result.messages[len(mv.messages) - mv.own :]  # from this visit's prompt on
        out.history = [*mv.history, *added] if mv.history else result.messages
    return out


__all__ = ["ModelVisit", "finish", "first_call", "start_turn"]
