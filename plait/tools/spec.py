"""What a model sees of a tool, and what a graph names: the agent profile.

Both are plain data so they can be stored in the mesh, shown in a CLI and sent to a
model provider; the callable side of a tool lives in :mod:`plait.tools.registry`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolSpec(BaseModel):
    """A tool as a model is told of it: name, description and a JSON schema of its args."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class AgentProfile(BaseModel):
    """An agent a graph names: its model, its system prompt and the tools it has.

    Attributes:
        name: the profile name graphs refer to (``"assistant"``).
        model: a model spec (``"openai:gpt-4o-mini"``, ``"scripted:path.yaml"``); None
            means "the caller chooses" (``--model`` or ``PLAIT_MODEL``).
        system_prompt: sent as the system message of every model call.
        tools: the names of the tools this agent has; a graph may use no others.
        pre_approved: tools that need approval in general but not for this agent when
            the node runs trusted.
        delegates: other agents whose nodes a graph of this agent may run.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    model: str | None = None
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    pre_approved: list[str] = Field(default_factory=list)
    delegates: list[str] = Field(default_factory=list)


__all__ = ["AgentProfile", "ToolSpec"]
