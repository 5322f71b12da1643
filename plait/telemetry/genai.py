"""Model and tool call spans, after the OpenTelemetry GenAI semantic conventions.

A model call is a ``chat {model}`` span: ``gen_ai.operation.name``, the provider,
``gen_ai.request.model``, the response model, ``gen_ai.usage.input_tokens`` /
``output_tokens`` and ``gen_ai.response.finish_reasons``, plus ``plait.dollars``. The
messages and the reply go in (``gen_ai.input.messages``, ``gen_ai.output.messages``)
only when the operator turned content capture on, as JSON with every non-ASCII and
control character escaped, cut to ``STATE.content_chars``. A tool call is an
``execute_tool {name}`` span with plait's gates: approval, taint, read-only, and the
``on_indeterminate`` policy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

import plait.telemetry.light as light
from plait.telemetry.spans import fail, start_span
from plait.telemetry.state import STATE


def escaped(value: Any) -> str:
    """``value`` as JSON text safe for any terminal or page (ASCII, no control
    characters), cut to the configured length."""
    text = json.dumps(value, ensure_ascii=True, default=str)
    limit = STATE.content_chars
    return text if len(text) <= limit else text[:limit] + "...(truncated)"


def model_span(spec: str, *, node: str = "", visit: int = 1, messages: Any = None) -> Span:
    """Start the span of one call of model ``spec`` (``provider:name``); ``messages``
    are recorded only with content capture on."""
    if not STATE.tracing:
        return trace.INVALID_SPAN
    found = _MODELS.get(spec)
    if found is None:
        found = _MODELS[spec] = _model_attributes(spec)
    name, attributes = found
    span = light.start(
        name,
        {**attributes, "plait.node.id": node or None, "plait.node.visit": visit},
        trace.get_current_span().get_span_context(),
        kind=SpanKind.CLIENT,
    )
    if STATE.capture_content and messages is not None and span.is_recording():
        span.set_attribute("gen_ai.input.messages", escaped(_messages(messages)))
    return span


_MODELS: dict[str, tuple[str, dict[str, Any]]] = {}
"""Each model spec's span name and attributes, worked out once (a few per process)."""


def _model_attributes(spec: str) -> tuple[str, dict[str, Any]]:
    provider, _, name = spec.partition(":")
    if not name:
        provider, name = "", provider
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": name}
    if provider:
        attributes["gen_ai.provider.name"] = attributes["gen_ai.system"] = provider
    return f"chat {name}", attributes


def _messages(messages: Any) -> Any:
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        out = []
        for m in messages:
            dump = getattr(m, "model_dump", None)
            out.append(dump(exclude_defaults=True) if dump is not None else m)
        return out
    return messages


def end_model_span(
    span: Span,
    *,
    model: str | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    finish_reason: str | None = None,
    dollars: float = 0.0,
    text: str | None = None,
    error: BaseException | None = None,
) -> None:
    """End a model call's span with what the reply said (or the error it raised)."""
    if span.is_recording():
        if error is not None:
            span.record_exception(error)
            span.set_attribute("error.type", type(error).__name__)
            fail(span, str(error))
        else:
            span.set_attributes(
                {
                    "gen_ai.response.model": model or "",
                    "gen_ai.usage.input_tokens": input_tokens,
                    "gen_ai.usage.output_tokens": output_tokens,
                    "gen_ai.response.finish_reasons": [finish_reason or "unknown"],
                    "plait.dollars": dollars,
                }
            )
            if STATE.capture_content and text is not None:
                span.set_attribute(
                    "gen_ai.output.messages",
                    escaped([{"role": "assistant", "content": text}]),
                )
    span.end()


def tool_span(
    name: str,
    *,
    approval: str,
    tainted: bool,
    read_only: bool,
    on_indeterminate: str | None = None,
) -> Span:
    """Start the span of one tool call: its gate's ``approval`` (``allowed``,
    ``needs_approval``), whether the turn ran tainted, and the tool's read-only flag."""
    return start_span(
        f"execute_tool {name}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "plait.tool.approval": approval,
            "plait.taint": tainted,
            "plait.tool.read_only": read_only,
            "plait.tool.on_indeterminate": on_indeterminate,
        },
    )


__all__ = ["end_model_span", "escaped", "model_span", "tool_span"]
