"""An MCP server for edge cases, built with the SDK's ``MCPServer``; run as a script
(stdio): a large result, a call that never answers, a failing tool, the environment.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("edge")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def big(chars: int) -> str:
    """A text of ``chars`` characters."""
    return "x" * chars


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def hang(marker: str = "") -> str:
    """Never answers; when cancelled, writes ``marker`` (a file path) if given."""
    try:
        await anyio.sleep_forever()
    finally:
        if marker:
            with open(marker, "w") as out:
                out.write("cancelled")
    return "never"


@server.tool()
def fail(why: str) -> str:
    """Always fails."""
    raise ValueError(why)


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def env(name: str) -> str:
    """The value of environment variable ``name`` (empty when unset)."""
    return os.environ.get(name, "")


@server.tool(annotations=ToolAnnotations(idempotent_hint=True), structured_output=False)
def where() -> str:
    """The server's working directory."""
    return os.getcwd()


if __name__ == "__main__":
    server.run("stdio")
