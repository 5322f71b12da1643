"""Model and tool calls of an agent turn, traced and counted (see :mod:`plait.telemetry`).

The turn's loop (:mod:`plait.graphs.agent_loop`) calls these only while tracing or
metrics are on, so a process with both off does none of this.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import Span

from plait.errors import ToolError, ToolInDoubt
from plait.graphs.ports import ExecEnv
from plait.models import CallContext, Message, ModelReply
from plait.telemetry import STATE, current, end_model_span, metrics, model_span, tool_span
from plait.tools import Tool, ToolContext


class ModelCall:
    """One model call of a turn: its span (while tracing) and its counts."""

    def __init__(self, spec: str, span: Span | None) -> None:
        self.spec = spec
        self.span = span
        self.reply: ModelReply | None = None
        self.dollars = 0.0

    def replied(self, reply: ModelReply, dollars: float) -> None:
        """The call answered ``reply``, costing ``dollars``."""
        self.reply, self.dollars = reply, dollars

    def end(self) -> None:
        """The call is over (answered, or failed if :meth:`replied` was not called)."""
        reply = self.reply
        usage = reply.usage if reply is not None else None
        metrics.model_call(
            self.spec,
            usage.input_tokens if usage else 0,
            usage.output_tokens if usage else 0,
            self.dollars,
            "ok" if reply is not None else "error",
        )
        if self.span is None:
            return
        if reply is None:
            end_model_span(self.span, error=RuntimeError("the model call failed"))
            return
        end_model_span(
            self.span,
            model=reply.model,
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            finish_reason=reply.stop_reason,
            dollars=self.dollars,
            text=reply.text,
        )


def model_call(spec: str, context: CallContext, messages: Sequence[Message]) -> ModelCall:
    """Begin observing one call of model ``spec`` for ``context`` with ``messages``
    (recorded only with content capture on)."""
    span = None
    if STATE.tracing:
        span = model_span(
            spec,
            node=context.instance or context.node,
            visit=context.visit,
            messages=[{"role": "user", "content": context.prompt}]
            if STATE.capture_content
            else None,
        )
    return ModelCall(spec, span)


async def traced_tool_call(
    env: ExecEnv,
    tool: Tool,
    args: dict[str, Any],
    ctx: ToolContext,
    *,
    trusted: bool,
    approval: str,
) -> tuple[str, bool, None]:
    """Run a tool call its gate let through (``approval``: ``allow``, or ``approved``
    by a person) in its span, counting its outcome; as the turn's own call does, an
    error goes back to the model as text."""
    span = tool_span(tool.name, approval=approval, tainted=not trusted, read_only=tool.read_only)
    with current(span):
        try:
            result = await env.tools.call(tool.name, args, ctx)
        except ToolInDoubt as exc:
            # Not the model's to judge: the node's on_indeterminate decides.
            metrics.tool_call(tool.name, "in_doubt")
            span.set_attribute("error.type", type(exc).__name__)
            raise
        except ToolError as exc:
            metrics.tool_call(tool.name, "error")
            span.set_attribute("error.type", type(exc).__name__)
            return f"error: {exc}", tool.external, None
    metrics.tool_call(tool.name, "ok")
    text = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    return text, tool.external, None


__all__ = ["ModelCall", "model_call", "traced_tool_call"]
