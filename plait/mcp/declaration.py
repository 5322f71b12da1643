"""MCP server declarations: what ``plait mcp add`` stores, under ``mcp/servers/<name>``.

A declaration says how to reach one MCP server (a command to start over stdio, or a
streamable-HTTP URL) and how plait treats its tools: whether its results are trusted,
how long a call may take, which of its tools need a person's approval, and what a call
left in doubt by a crash does. Secrets are never stored: a header or bearer token is
named by the environment variable that holds it in the serving process.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from plait.errors import ConfigError
from plait.mesh import Mesh

PREFIX = "mcp/servers/"
"""The mesh key prefix of MCP server declarations."""

MESH_KEYS = (PREFIX,)
"""The mesh key prefixes this module owns."""

WORKSPACE = "{workspace}"
"""In a stdio server's arguments: the workspace of the run calling it. A server naming
it gets one session per workspace (the filesystem server confined to a run's)."""

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER = re.compile(r"^[A-Za-z0-9-]{1,64}$")

Safety = Literal["read_only", "idempotent", "destructive"]
"""How plait treats one tool, overriding what the server's annotations say.

- ``"read_only"``: changes nothing; retried freely, allowed to parallel workers.
- ``"idempotent"``: may act, but twice is as once; a call in doubt is retried.
- ``"destructive"``: may act; a call in doubt asks a person (``escalate``).
"""

Approval = Literal["auto", "always", "never"]
"""Which tools need a person's approval before each call (unless pre-approved and the
node runs trusted): ``"auto"`` every tool that is not read-only, ``"always"`` every
tool, ``"never"`` none."""


class McpServer(BaseModel):
    """One MCP server plait may call.

    Attributes:
        name: what profiles and nodes call it (``files`` in ``files.read_file``):
            lower-case letters, digits and ``-``, at most 32, starting with a letter.
        command: stdio: the command and its arguments (``{workspace}`` stands for the
            calling run's workspace).
        url: streamable HTTP: the endpoint URL.
        env: names of environment variables a stdio server gets from the serving
            process, beyond the scrubbed tool environment (never ``PLAIT_*``).
        headers: HTTP header name → the environment variable holding its value.
        bearer_env: the environment variable holding a bearer token for HTTP.
        trusted: its results are not outside content (no taint).
        timeout_s: the most seconds one call may take (the node's own limit applies
            too; the smaller wins).
        approval: which of its tools need approval, see :data:`Approval`.
        safety: per tool name, how a call is treated (overrides the annotations).
        tools: only these of its tools are offered (None: all).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: list[str] | None = None
    url: str | None = None
    env: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_env: str | None = None
    trusted: bool = False
    timeout_s: float | None = Field(default=None, gt=0)
    approval: Approval = "auto"
    safety: dict[str, Safety] = Field(default_factory=dict)
    tools: list[str] | None = None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError(
                f"invalid MCP server name {name!r}: use 1-32 lower-case letters, digits "
                "or '-', starting with a letter"
            )
        return name

    @field_validator("env")
    @classmethod
    def _env_names(cls, names: list[str]) -> list[str]:
        for name in names:
            _check_env(name)
        return names

    @field_validator("bearer_env")
    @classmethod
    def _bearer_name(cls, name: str | None) -> str | None:
        return None if name is None else _check_env(name)

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for header, env in headers.items():
            if not _HEADER.match(header):
                raise ValueError(f"{header!r} is not an HTTP header name")
            _check_env(env)
        return headers

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        return url

    def model_post_init(self, _context: object) -> None:
        """Check that exactly one transport is given."""
        if (self.command is None) == (self.url is None):
            raise ValueError("give either a command (stdio) or a url (streamable HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("the command is empty")

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    @property
    def per_workspace(self) -> bool:
        """Whether it gets one session per run workspace (its command names one)."""
        return any(WORKSPACE in a for a in self.command or ())


def _check_env(name: str) -> str:
    if not _ENV.match(name):
        raise ValueError(f"{name!r} is not an environment variable name")
    if name.upper().startswith("PLAIT_"):
        raise ValueError(f"{name!r}: PLAIT_* variables are never passed to MCP servers")
    return name


def server_key(name: str) -> str:
    """The mesh key of the declaration of ``name``.

    Raises:
        ConfigError: ``name`` is not a valid server name.
    """
    if not _NAME.match(name):
        raise ConfigError(
            f"invalid MCP server name {name!r}: use 1-32 lower-case letters, digits or '-', "
            "starting with a letter"
        )
    return PREFIX + name


def declare(**fields: object) -> McpServer:
    """An :class:`McpServer` from ``fields``.

    Raises:
        ConfigError: a field is invalid; the one-line message says which.
    """
    try:
        return McpServer.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"invalid MCP server: {where + ': ' if where else ''}{message}") from None


async def put_server(mesh: Mesh, server: McpServer) -> None:
    """Store (or replace) ``server``'s declaration."""
    await mesh.put(server_key(server.name), server.model_dump(mode="json"))


async def get_server(mesh: Mesh, name: str) -> McpServer:
    """The declaration of ``name``.

    Raises:
        ConfigError: none is stored (the message says how to add one), or it is corrupt.
    """
    entry = await mesh.get(server_key(name))
    if entry is None:
        raise ConfigError(
            f"unknown MCP server {name!r}: add it with `plait mcp add {name} -- COMMAND ARGS...` "
            f"or `plait mcp add {name} --url URL`"
        )
    return _parsed(name, entry.value)


async def list_servers(mesh: Mesh) -> list[McpServer]:
    """Every stored declaration, by name."""
    found = [_parsed(e.key.removeprefix(PREFIX), e.value) async for e in mesh.scan(PREFIX)]
    return sorted(found, key=lambda s: s.name)


async def remove_server(mesh: Mesh, name: str) -> bool:
    """Delete the declaration of ``name``; False if there was none."""
    return bool(await mesh.delete(server_key(name)))


def _parsed(name: str, value: object) -> McpServer:
    try:
        return McpServer.model_validate(value)
    except ValidationError as exc:
        raise ConfigError(f"the stored MCP server {name!r} is invalid: {exc}") from None


__all__ = [
    "MESH_KEYS",
    "PREFIX",
    "WORKSPACE",
    "Approval",
    "McpServer",
    "Safety",
    "declare",
    "get_server",
    "list_servers",
    "put_server",
    "remove_server",
    "server_key",
]
