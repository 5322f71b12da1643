"""What a model sees of a tool: :class:`ToolSpec`.

Plain data, so it can be shown in a CLI and sent to a model provider; the callable side
of a tool lives in :mod:`plait.tools.registry`.
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


__all__ = ["ToolSpec"]
