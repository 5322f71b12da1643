"""``plait mcp add|list|show|remove``: the MCP servers agents may use, and ``serve``.

``add NAME -- COMMAND ARGS...`` declares a stdio server, ``add NAME --url URL`` a
streamable-HTTP one; a header or bearer token is given as the name of the environment
variable holding it in the serving process, never as its value. Profiles and graph nodes
then name ``NAME.TOOL`` or ``NAME.*``. Declaring or removing one is a person's act: a
process a tool started is refused, since a declaration is a command workers run.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from plait.cli._common import MeshOption, fail, print_json, run
from plait.cli._output import say
from plait.cli.runs import human
from plait.errors import ConfigError
from plait.mcp import McpServer, declare, get_server, list_servers, put_server, remove_server
from plait.mesh import open_mesh

mcp_app = typer.Typer(
    help="MCP servers: tool sources agents use by name; plait offered as an MCP server.",
    no_args_is_help=True,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _pairs(items: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            fail(f"{what} takes KEY=VALUE, not {item!r}", 2)
        out[key.strip()] = value.strip()
    return out


@mcp_app.command("add", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def add_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME")],
    url: Annotated[
        str | None, typer.Option("--url", help="A streamable-HTTP server's endpoint URL.")
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", metavar="VAR", help="An environment variable a stdio server gets."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            metavar="NAME=VAR",
            help="An HTTP header whose value is read from the environment variable VAR.",
        ),
    ] = None,
    bearer_env: Annotated[
        str | None,
        typer.Option(
            "--bearer-env", metavar="VAR", help="The environment variable holding a bearer token."
        ),
    ] = None,
    trusted: Annotated[
        bool,
        typer.Option("--trusted", help="Its results are not outside content (no taint)."),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", metavar="SECONDS", help="The most one call may take."),
    ] = None,
    approval: Annotated[
        str,
        typer.Option(
            "--approval",
            help="Which tools need a person's approval: auto (those not read-only), "
            "always or never.",
        ),
    ] = "auto",
    safety: Annotated[
        list[str] | None,
        typer.Option(
            "--safety",
            metavar="TOOL=KIND",
            help="Override a tool's annotations: read_only, idempotent or destructive.",
        ),
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option("--tools", help="Offer only these of its tools, comma-separated."),
    ] = None,
    mesh: MeshOption = None,
) -> None:
    """Declare (or replace) the MCP server NAME: `-- COMMAND ARGS...` or `--url URL`.

    In a stdio command, {workspace} stands for the calling run's workspace: the server
    then runs once per workspace (a filesystem server confined to each run's).
    """
    human()  # a declaration is a command workers start: a person's act, never a tool's
    command = list(ctx.args)
    if command and command[0] == "--":
        command = command[1:]
    if bool(command) == bool(url):
        fail("give either -- COMMAND ARGS... (a stdio server) or --url URL", 2)
    fields: dict[str, Any] = {
        "name": name,
        "env": env or [],
        "headers": _pairs(header, "--header"),
        "bearer_env": bearer_env,
        "trusted": trusted,
        "timeout_s": timeout,
        "approval": approval,
        "safety": _pairs(safety, "--safety"),
        "tools": [t.strip() for t in tools.split(",") if t.strip()] if tools else None,
    }
    if url:
        fields["url"] = url
    else:
        fields["command"] = command
    try:
        server = declare(**fields)
    except ConfigError as exc:
        fail(str(exc), 2)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            await put_server(m, server)

    run(main)
    say(f"stored MCP server {server.name} ({_where(server)})")


@mcp_app.command("list")
def list_cmd(json_out: JsonOption = False, mesh: MeshOption = None) -> None:
    """List the declared MCP servers."""

    async def main() -> list[McpServer]:
        async with open_mesh(mesh) as m:
            return await list_servers(m)

    servers = run(main)
    if json_out:
        print_json([s.model_dump(mode="json") for s in servers])
        return
    if not servers:
        say("no MCP servers: add one with `plait mcp add NAME -- COMMAND ARGS...`")
        return
    for s in servers:
        trust = "trusted" if s.trusted else "untrusted"
        say(f"{s.name}  {s.transport}  {trust}  {_where(s)}")


@mcp_app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    json_out: JsonOption = False,
    mesh: MeshOption = None,
) -> None:
    """Show the declaration of MCP server NAME (secrets only by variable name)."""

    async def main() -> McpServer:
        async with open_mesh(mesh) as m:
            return await get_server(m, name)

    server = run(main)
    data = server.model_dump(mode="json")
    if json_out:
        print_json(data)
        return
    for key, value in data.items():
        if value in (None, [], {}):
            continue
        say(f"{key}: {value}")


@mcp_app.command("remove")
def remove_cmd(
    name: Annotated[str, typer.Argument(metavar="NAME")], mesh: MeshOption = None
) -> None:
    """Remove the declaration of MCP server NAME (workers drop it when they restart)."""
    human()

    async def main() -> bool:
        async with open_mesh(mesh) as m:
            return await remove_server(m, name)

    if not run(main):
        fail(f"no MCP server {name!r}")
    say(f"removed MCP server {name}")


def _where(server: McpServer) -> str:
    return server.url if server.url else " ".join(server.command or ())


@mcp_app.command("serve")
def serve_cmd(
    http: Annotated[
        bool,
        typer.Option("--http", help="Serve streamable HTTP at /mcp (default: stdio)."),
    ] = False,
    host: Annotated[str, typer.Option("--host", help="With --http: the address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="With --http: the port.")] = 8765,
    mesh: MeshOption = None,
) -> None:
    """Offer this mesh's graphs to MCP clients: run_<agent>_<graph>, get_run, list_runs,
    tell_agent. Over HTTP every request needs a plait API token (`plait tokens create`).

    Runs are served by workers (`plait worker`). A run waiting on a person returns its
    decision id; only a person answers it, with `plait decisions answer` or the console.
    """
    try:
        from plait.mcp.server import serve_http, serve_stdio
    except ImportError as exc:
        fail(f"plait mcp serve needs the MCP SDK ({exc}): pip install 'plait[mcp]'", 2)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            if http:
                say(f"serving MCP at http://{host}:{port}/mcp (token required)", stderr=True)
                await serve_http(m, host=host, port=port)
            else:
                await serve_stdio(m)

    run(main)


__all__ = ["mcp_app"]
