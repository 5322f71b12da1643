"""What an MCP answer becomes in plait: a tool's output value, bounded.

A tool result's ``structuredContent`` is the value itself (unless it is larger than
:data:`MAX_TEXT_CHARS` as JSON: then its text blocks are, cut); otherwise text blocks become
one string, and a mix of blocks a list describing each (an image or audio block by its
type and size, never its bytes, so a run record stays small). Every text is cut at
:data:`MAX_TEXT_CHARS` and says so, as the built-in tools' results are.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from plait.errors import ToolError

MAX_TEXT_CHARS = 256 * 1024
"""How much of one text an MCP result keeps."""


def clip(text: str) -> str:
    """``text`` cut at :data:`MAX_TEXT_CHARS`, saying so when it was."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + f"\n[truncated after {MAX_TEXT_CHARS} of {len(text)} characters]"


def tool_value(name: str, result: types.CallToolResult) -> Any:
    """The output value of a ``tools/call`` result.

    Raises:
        ToolError: the server reported the call as failed (``isError``).
    """
    if result.is_error:
        raise ToolError(f"tool {name!r} failed: {_text_of(result.content) or 'no detail given'}")
    structured = result.structured_content
    if structured is not None and len(json.dumps(structured, default=str)) <= MAX_TEXT_CHARS:
        return structured
    # Too large a structured value falls back to the text blocks, which are cut.
    return _blocks(result.content)


def resource_value(result: types.ReadResourceResult) -> Any:
    """The value of a ``resources/read`` result: its text, or a list of its parts."""
    parts: list[dict[str, Any]] = []
    for item in result.contents:
        if isinstance(item, types.TextResourceContents):
            parts.append(
                {"uri": str(item.uri), "mime_type": item.mime_type, "text": clip(item.text)}
            )
        else:
            blob = getattr(item, "blob", "")
            size = len(blob) * 3 // 4
            parts.append({"uri": str(item.uri), "mime_type": item.mime_type, "bytes": size})
    if len(parts) == 1 and "text" in parts[0]:
        return parts[0]["text"]
    return parts


def prompt_value(result: types.GetPromptResult) -> dict[str, Any]:
    """The value of a ``prompts/get`` result: its description and messages as text."""
    return {
        "description": result.description or "",
        "messages": [{"role": m.role, "content": _blocks([m.content])} for m in result.messages],
    }


def _blocks(content: list[Any]) -> Any:
    if all(isinstance(b, types.TextContent) for b in content):
        return clip("".join(b.text for b in content))
    return [_block(b) for b in content]


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, types.TextContent):
        return {"type": "text", "text": clip(block.text)}
    if isinstance(block, types.ImageContent | types.AudioContent):
        return {"type": block.type, "mime_type": block.mime_type, "bytes": len(block.data) * 3 // 4}
    if isinstance(block, types.ResourceLink):
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name}
    if isinstance(block, types.EmbeddedResource):
        inner = block.resource
        if isinstance(inner, types.TextResourceContents):
            return {"type": "resource", "uri": str(inner.uri), "text": clip(inner.text)}
        return {"type": "resource", "uri": str(inner.uri), "mime_type": inner.mime_type}
    return {"type": str(getattr(block, "type", "unknown"))}


def _text_of(content: list[Any]) -> str:
    return clip(" ".join(b.text for b in content if isinstance(b, types.TextContent)))


__all__ = ["MAX_TEXT_CHARS", "clip", "prompt_value", "resource_value", "tool_value"]
