"""An MCP server for edge cases, built with the SDK's ``MCPServer``; run as a script
(stdio): a large result, a call that never answers, a failing tool, the environment, and
tools added and removed while it serves (``notifications/tools/list_changed``).
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import Context, MCPServer
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


@server.tool(structured_output=False)
async def grow(name: str, ctx: Context) -> str:
    """Add a read-only tool called ``name`` (it answers ``NAME grown``), and say so."""

    def grown() -> str:
        return f"{name} grown"

    server.add_tool(
        grown,
        name=name,
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(structured_output=False)
async def shrink(name: str, ctx: Context) -> str:
    """Remove the tool called ``name``, and say so."""
    server.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


if __name__ == "__main__":
    server.run("stdio")
