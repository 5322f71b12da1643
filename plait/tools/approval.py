"""Who may call a tool, and whether a person must approve the call first.

Two separate questions, asked in this order before every tool call:

1. :func:`check_allowed` — may this agent use this tool at all? Only tools listed in
   its :class:`~plait.profiles.AgentProfile`, and only read-only ones where the
   caller cannot act (parallel workers).
2. :func:`gate` — may the call go ahead now, or must a person approve it?
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from plait.errors import ToolNotPermitted
from plait.profiles import AgentProfile
from plait.tools.registry import Tool, ToolRegistry, names_match

GateDecision = Literal["allow", "needs_approval"]
"""The outcome of :func:`gate`.

- ``"allow"``: the call may run now.
- ``"needs_approval"``: the run parks until a person approves or rejects the call.
"""


def gate(tool: Tool, *, trusted: bool, pre_approved: Collection[str]) -> GateDecision:
    """Whether a call of ``tool`` may run now or needs a person's approval.

    A tool that does not require approval is always allowed. One that does is allowed
    only if the agent has it pre-approved *and* the calling node runs trusted: a node
    that read outside content loses its pre-approvals (see :mod:`plait.tools.trust`).

    Args:
        tool: the tool to be called.
        trusted: whether the calling node runs trusted.
        pre_approved: the tool names the agent has pre-approved (``SOURCE.*`` covers
            every tool of a source).

    Returns:
        ``"allow"`` or ``"needs_approval"``.
    """
    if not tool.requires_approval:
        return "allow"
    if trusted and names_match(tool.name, pre_approved):
        return "allow"
    return "needs_approval"


def check_allowed(
    tool_name: str,
    profile: AgentProfile,
    *,
    registry: ToolRegistry,
    read_only_only: bool = False,
) -> Tool:
    """Check that ``profile``'s agent may call ``tool_name`` and return the tool.

    Args:
        tool_name: the tool to be called; the profile lists it, or its source's
            ``SOURCE.*`` (an MCP server's every tool).
        profile: the agent on whose behalf it is called.
        registry: where the tool is looked up.
        read_only_only: only read-only tools are allowed (parallel workers, which may
            look things up but not act).

    Raises:
        ToolNotPermitted: the agent does not have the tool, or only read-only tools
            are allowed and this one is not.
        ToolNotFound: the agent lists the tool but no such tool is registered.
    """
    if not names_match(tool_name, profile.tools):
        have = ", ".join(profile.tools) or "none"
        raise ToolNotPermitted(
            f"agent {profile.name!r} does not have tool {tool_name!r} (it has: {have})"
        )
    found = registry.get(tool_name)
    if read_only_only and not found.read_only:
        raise ToolNotPermitted(
            f"tool {tool_name!r} is not read-only; parallel workers may only use read-only tools"
        )
    return found


__all__ = ["GateDecision", "check_allowed", "gate"]
