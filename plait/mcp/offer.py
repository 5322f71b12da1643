"""What a serving process wraps its serving in: the declared MCP servers' tools, if any.

Imports the MCP SDK only when a server is declared, so a process on a mesh without any
never pays for it, and a missing SDK is a one-line error naming the extra to install.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from plait.errors import ConfigError
from plait.mcp.declaration import list_servers
from plait.mesh import Mesh
from plait.tools import ToolRegistry

if TYPE_CHECKING:
    from plait.mcp.client import McpClients


@contextlib.asynccontextmanager
async def offered_tools(
    mesh: Mesh, registry: ToolRegistry, *, cwd: Path | None = None
) -> AsyncIterator[McpClients | None]:
    """Register the declared MCP servers' tools in ``registry`` for the block (their
    sessions kept open, closed at its end); None when no server is declared.

    Raises:
        ConfigError: servers are declared but the ``mcp`` package is not installed.
    """
    if not await list_servers(mesh):
        yield None
        return
    try:
        from plait.mcp.client import mcp_tools
    except ImportError as exc:
        raise ConfigError(
            f"MCP servers are declared but the MCP SDK cannot be imported ({exc}): "
            "pip install 'plait[mcp]'"
        ) from exc
    async with mcp_tools(mesh, registry, cwd=cwd) as clients:
        yield clients


__all__ = ["offered_tools"]
