"""One agent turn: a bounded multi-round model loop with tool calls, and reply parsing.

An agent node's visit is one turn: the model answers, asks for tools, sees their
results, and answers again, for at most ``max_rounds`` rounds. Tool calls go through
the approval gate; a call that needs a person parks the whole node (the visit runs
again once the person answered, and finds the answer by the call's stable identity).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import jsonschema

from plait.errors import (
    ModelError,
    ModelIgnoredTools,
    ModelTimeout,
    ToolError,
    ToolInDoubt,
    ToolNotPermitted,
)
from plait.graphs.budget import VisitBudget
from plait.graphs.observed import model_call, traced_tool_call
from plait.graphs.ports import ExecEnv
from plait.graphs.state import Waiting
from plait.models import CallContext, Message, Model, ModelReply, ToolChoice, Usage, cost_of
from plait.profiles import AgentProfile
from plait.programs import CallBudget
from plait.telemetry import STATE, metrics
from plait.tools import ToolSpec, check_allowed, gate, names_match


class ToolRejected(Exception):
    """A person rejected a tool call; the node fails with ``tool_execution_failed``."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        super().__init__(f"a person rejected the call of tool {tool!r}")


_NO_USAGE = Usage()  # shared and never changed: usages are added into new objects


@dataclass
class TurnResult:
    """The outcome of one agent turn."""

    text: str = ""
    usage: Usage = field(default_factory=Usage)
    dollars: float = 0.0
    messages: list[Message] = field(default_factory=list)
    used_external: bool = False
    waiting: Waiting | None = None


@dataclass
class Turn:
    """One agent turn's settings."""

    env: ExecEnv
    profile: AgentProfile
    model: Model
    context: CallContext
    tools: list[str]
    trusted: bool
    read_only_only: bool = False
    max_rounds: int = 8
    response_format: dict[str, Any] | None = None
    tool_choice: ToolChoice | None = None
    """Which tools the turn's first model call must or may use (None: the provider's
    default). ``"required"`` or a tool's name holds for the first call only; the calls
    after its tool results run with ``"auto"``, free to answer."""
    budget: CallBudget = field(default_factory=VisitBudget)
    """What the turn may still spend: the visit's (shared by its concurrent turns), or
    the budget of the program that runs it (``agents.run``)."""
    timeout_s: float | None = None
    """Seconds each model call may take (None: the adapter's own timeout)."""
    on_untrusted: Callable[[], None] | None = None
    """Called once when the turn stops running trusted (an external tool's result came
    back), so what acts for it mid-turn (an agent actor's capability tools) knows."""
    read_taint: Callable[[], bool] | None = None
    """Asked after each tool call: whether the turn has read outside content through a
    tool that is not external (an agent actor's ``mesh_get`` of a tainted value); from
    then on the turn runs untrusted."""


async def run_turn(turn: Turn, messages: list[Message]) -> TurnResult:
    """Run the model loop from ``messages`` until it answers without tool calls.

    Raises:
        ModelError: the model failed, or kept calling tools past ``max_rounds``.
        ToolRejected: a person rejected a tool call.
        BudgetExhausted: the next model or tool call would pass the visit's budget.
    """
    env, out = turn.env, TurnResult(messages=list(messages), usage=_NO_USAGE)
    specs = env.tools.specs(env.tools.expand(turn.tools)) if turn.tools else []
    trusted = turn.trusted
    forced = bool(specs) and turn.tool_choice not in (None, "auto", "none")
    for round_ in range(turn.max_rounds):
        choice = "auto" if forced and round_ else turn.tool_choice
        reply, dollars = await _ask(turn, out.messages, specs, choice)
        if forced and not round_ and not reply.tool_calls:
            # A server may drop the tools (a chat template without them) or the model
            # may ignore them: ask once more, then say so rather than carry on as if
            # the tool had been called.
            out.usage, out.dollars = out.usage + reply.usage, out.dollars + dollars
            reply, dollars = await _ask(turn, out.messages, specs, choice)
            if not reply.tool_calls:
                raise ModelIgnoredTools(turn.context.node, str(choice), turn.model.spec)
        out.usage = reply.usage if out.usage is _NO_USAGE else out.usage + reply.usage
        out.dollars += dollars
        out.messages.append(
            Message(role="assistant", content=reply.text, tool_calls=reply.tool_calls)
        )
        if not reply.tool_calls:
            out.text = reply.text
            return out
        for call in reply.tool_calls:
            content, external, waiting = await _call_tool(turn, call.name, call.arguments, trusted)
            if waiting is not None:
                out.waiting = waiting
                return out
            if external:
                if trusted and turn.on_untrusted is not None:
                    turn.on_untrusted()
                out.used_external, trusted = True, False
            elif trusted and turn.read_taint is not None and turn.read_taint():
                out.used_external, trusted = True, False
            out.messages.append(Message(role="tool", content=content, tool_call_id=call.id))
    raise ModelError(
        f"node {turn.context.node!r}: the model still called tools after "
        f"{turn.max_rounds} rounds (raise max_rounds, or check the prompt)"
    )


async def _ask(
    turn: Turn, messages: list[Message], specs: list[ToolSpec], choice: ToolChoice | None
) -> tuple[ModelReply, float]:
    """One model call within the turn's budget and timeout: the reply and its dollars."""
    budget = turn.budget
    await budget.begin_model_call()
    observing = STATE.tracing or STATE.metrics
    observed = model_call(turn.model.spec, turn.context, messages) if observing else None
    try:
        chosen: dict[str, Any] = {} if choice is None else {"tool_choice": choice}
        live = turn.env.live
        answer = (
            turn.model.complete(
                messages,
                tools=specs,
                context=turn.context,
                response_format=turn.response_format,
                **chosen,
            )
            if live is None
            else turn.model.stream(
                messages,
                tools=specs,
                context=turn.context,
                on_delta=functools.partial(
                    live.delta, turn.context.instance or turn.context.node, turn.context.visit
                ),
                response_format=turn.response_format,
                **chosen,
            )
        )
        if turn.timeout_s is None:
            reply = await answer  # no cancel scope to build: most turns set no timeout
        else:
            with anyio.move_on_after(turn.timeout_s) as scope:
                reply = await answer
        if turn.timeout_s is not None and scope.cancelled_caught:
            raise ModelTimeout(
                f"node {turn.context.node!r}: the call of {turn.model.spec} took longer "
                f"than its timeout_s of {turn.timeout_s:g}"
            )
        dollars = cost_of(turn.model.spec, reply.usage, turn.env.prices)
        if observed is not None:
            observed.replied(reply, dollars)
        budget.spend(reply.usage, dollars)
    finally:
        budget.end_model_call()
        if observed is not None:
            observed.end()
    return reply, dollars


async def _call_tool(
    turn: Turn, name: str, args: dict[str, Any], trusted: bool
) -> tuple[str, bool, Waiting | None]:
    """Run one tool call for the model; errors go back to the model as text."""
    env = turn.env
    name = env.tools.canonical(name)  # a sourced tool is told to models as SOURCE__NAME
    try:
        if not names_match(name, turn.tools):
            raise ToolNotPermitted(f"tool {name!r} is not available to this node")
        tool = check_allowed(
            name, turn.profile, registry=env.tools, read_only_only=turn.read_only_only
        )
        args = env.tools.validate_args(name, args)
    except ToolError as exc:
        return f"error: {exc}", False, None
    turn.budget.check(f"tool call {name!r}")
    key = turn.context.instance or turn.context.node
    gated: str = gate(tool, trusted=trusted, pre_approved=turn.profile.pre_approved)
    if gated == "needs_approval":
        verdict = await env.approvals.approve(
            key=key, visit=turn.context.visit, tool=name, args=args
        )
        if isinstance(verdict, Waiting):
            if STATE.metrics:
                metrics.tool_call(name, "parked")
            return "", tool.external, verdict
        if not verdict:
            if STATE.metrics:
                metrics.tool_call(name, "rejected")
            raise ToolRejected(name)
        gated = "approved"
    ctx = env.tool_context(key, turn.profile)
    if STATE.tracing or STATE.metrics:
        return await traced_tool_call(env, tool, args, ctx, trusted=trusted, approval=gated)
    try:
        result = await env.tools.call(name, args, ctx)
    except ToolInDoubt:
        raise  # not the model's to judge: the node's on_indeterminate decides
    except ToolError as exc:
        return f"error: {exc}", tool.external, None
    return as_text(result), tool.external, None


def as_text(value: Any) -> str:
    """A value as message text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_structured(text: str, schema: dict[str, Any]) -> Any:
    """Parse a reply as JSON (a fenced block is fine) and validate it against ``schema``.

    Control characters inside strings (a raw newline) are taken as they are: the grammar
    llama-cpp-python's server builds from a schema lets a model write them there.

    Raises:
        ModelError: the reply is not JSON or does not match the schema.
    """
    fenced = _FENCE.match(text)
    raw = fenced.group(1) if fenced else text.strip()
    try:
        value = json.loads(raw, strict=False)
    except json.JSONDecodeError as exc:
        raise ModelError(f"the reply is not the JSON the response_format asks for: {exc}") from exc
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=str)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
        raise ModelError(
            f"the reply does not match the response_format at {where}: {errors[0].message}"
        )
    return value


_WORD = re.compile(r"[A-Za-z0-9_-]+")


def find_verdict(text: str, verdicts: dict[str, str]) -> str | None:
    """The verdict word on the reply's last non-empty line, if exactly one is there."""
    for last in reversed(text.splitlines()):
        if last.strip():
            break
    else:
        return None
    by_lower = {word.lower(): word for word in verdicts}
    found = {hit for w in _WORD.findall(last) if (hit := by_lower.get(w.lower())) is not None}
    return found.pop() if len(found) == 1 else None


__all__ = [
    "ToolRejected",
    "Turn",
    "TurnResult",
    "as_text",
    "find_verdict",
    "parse_structured",
    "run_turn",
]
