"""MCP: tools from any MCP server under plait's gates, and plait offered as an MCP server.

- :mod:`plait.mcp.declaration`: the servers ``plait mcp add`` declares, stored in the mesh.
- :mod:`plait.mcp.offer`: :func:`offered_tools`, what a serving process wraps serving in.
- :mod:`plait.mcp.session`: one kept session per server, reopened after a crash.
- :mod:`plait.mcp.client`: registers the servers' tools as ``SERVER.TOOL``.
- :mod:`plait.mcp.results`: what an MCP answer becomes as a tool's output value.
- :mod:`plait.mcp.server`: ``plait mcp serve``, plait's graphs as MCP tools.

The MCP SDK (``pip install 'plait[mcp]'``) is imported only by the last four, so this
package's front is importable without it.
"""

from __future__ import annotations

from plait.mcp.declaration import (
    McpServer,
    declare,
    get_server,
    list_servers,
    put_server,
    remove_server,
)
from plait.mcp.offer import offered_tools

__all__ = [
    "McpServer",
    "declare",
    "get_server",
    "list_servers",
    "offered_tools",
    "put_server",
    "remove_server",
]
