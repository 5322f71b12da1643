"""The agent profile: the small record a graph names and tools gate by.

Plain data, stored in the mesh (see :mod:`plait.profiles.store`) and shown in the CLI.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


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
        workspace: the directory file and shell tools work in; relative to the
            directory the run was started from, which is the default.
        allow_hosts: host names (or IP literals) ``http_get`` may reach even where they
            resolve to a loopback, private, link-local or metadata address.
        tool_env: names of environment variables tools get from the worker's
            environment beyond ``PATH``, ``LANG`` and ``HOME`` (never ``PLAIT_*``).
        sandbox: ``bwrap`` runs ``bash`` under bubblewrap: ``.plait/`` and the mesh
            files hidden, the workspace the only writable directory, no network.
        sandbox_network: let a sandboxed ``bash`` use the network.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    model: str | None = None
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    pre_approved: list[str] = Field(default_factory=list)
    delegates: list[str] = Field(default_factory=list)
    workspace: str | None = None
    allow_hosts: list[str] = Field(default_factory=list)
    tool_env: list[str] = Field(default_factory=list)
    sandbox: Literal["bwrap"] | None = None
    sandbox_network: bool = False

    @field_validator("tool_env")
    @classmethod
    def _plain_env_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name.upper().startswith("PLAIT_"):
                # plait's own settings (the mesh URL among them) never reach a tool
                raise ValueError(f"{name!r}: PLAIT_* variables are not passed to tools")
        return names

    @field_validator("allow_hosts")
    @classmethod
    def _lower_hosts(cls, hosts: list[str]) -> list[str]:
        return [h.strip().strip("[]").lower() for h in hosts]


__all__ = ["AgentProfile"]
