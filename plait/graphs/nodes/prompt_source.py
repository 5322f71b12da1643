"""A model node's prompt from an MCP server: a prompt template the server keeps.

A model node's (agent, verifier) ``prompt_from`` names a prompt of a declared MCP server and its
arguments (templates rendered from the run). Each visit gets it (``prompts/get``)
through the server's ``SERVER.get_prompt`` tool, so the allow list (the node's agent
must have that tool), the budgets and taint apply as to any tool call: the server's
messages open the visit's turn, the node's own ``prompt`` (if any) follows them, and
from a server not declared trusted they are outside content (the turn's tools lose their
pre-approvals, the node's output is tainted).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import Field, model_validator

from plait.errors import ToolError
from plait.graphs.nodes.base import SpecModel, TemplateField, Visit
from plait.graphs.ports import ExecEnv
from plait.graphs.template import TemplateContext, render
from plait.models import Message
from plait.profiles import AgentProfile
from plait.tools import check_allowed

PROMPT_TOOL = "get_prompt"
"""The tool an MCP server offering prompts has (``SERVER.get_prompt``)."""

_ROLES = ("user", "assistant")


class PromptSource(SpecModel):
    """The MCP prompt ``name`` of server ``server``, with ``arguments`` (templates)."""

    server: str
    name: str
    arguments: dict[str, str] = Field(default_factory=dict)

    @property
    def tool(self) -> str:
        """The tool it is got through: ``SERVER.get_prompt``."""
        return f"{self.server}.{PROMPT_TOOL}"


class SourcedPrompt(SpecModel):
    """A model node's prompt: its own template, an MCP prompt's messages before it, or both.

    Attributes:
        prompt: the node's prompt template (may be left out with ``prompt_from``).
        prompt_from: an MCP server's prompt, whose messages open each visit's turn.
    """

    prompt: str
    prompt_from: PromptSource | None = None

    @model_validator(mode="before")
    @classmethod
    def _prompt_optional_with_a_source(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("prompt_from") and "prompt" not in data:
            return {**data, "prompt": ""}
        return data


def prompt_templates(node: SourcedPrompt) -> Iterator[TemplateField]:
    """The node's prompt template and those of its prompt source's arguments."""
    yield ".prompt", node.prompt, False
    if node.prompt_from is not None:
        for name, text in node.prompt_from.arguments.items():
            yield f".prompt_from.arguments.{name}", text, False


def prompt_tools(node: SourcedPrompt) -> Iterator[tuple[str, str]]:
    """The tool its prompt source is got through, if it has one."""
    if node.prompt_from is not None:
        yield ".prompt_from.server", node.prompt_from.tool


async def fetch_prompt(
    env: ExecEnv, v: Visit, ctx: TemplateContext, source: PromptSource, profile: AgentProfile
) -> tuple[list[Message], bool]:
    """The messages of ``source`` for visit ``v``, and whether they are outside content.

    Raises:
        ToolNotPermitted: the agent does not have the prompt's tool.
        ToolNotFound: no process-registered tool of that name (its server is not open).
        ToolError: the server failed, or answered with something not a prompt.
    """
    tool = check_allowed(source.tool, profile, registry=env.tools)
    v.budget.check_tool(source.tool)
    args = {
        "name": source.name,
        "arguments": {k: render(t, ctx, node=v.key) for k, t in source.arguments.items()},
    }
    got = await env.tools.call(source.tool, args, env.tool_context(v.key, profile))
    return prompt_messages(source.tool, got), tool.external


def prompt_messages(tool: str, value: Any) -> list[Message]:
    """The conversation messages of a ``get_prompt`` value (``{"messages": [{"role",
    "content"}]}``); content that is not text is given as its JSON.

    Raises:
        ToolError: ``value`` is not of that shape.
    """
    listed = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(listed, list) or not listed:
        raise ToolError(f"tool {tool!r} answered with no prompt messages")
    out: list[Message] = []
    for m in listed:
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _ROLES:
            raise ToolError(f"tool {tool!r}: a prompt message has role {role!r}")
        content = m.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        out.append(Message(role=role, content=text))
    return out


__all__ = [
    "PROMPT_TOOL",
    "PromptSource",
    "SourcedPrompt",
    "fetch_prompt",
    "prompt_messages",
    "prompt_templates",
    "prompt_tools",
]
