"""MCP servers as tool sources: their tools registered as plait tools, behind its gates.

:func:`mcp_tools` opens a session to each declared server when a serving process
starts, registers each server tool as ``SERVER.TOOL`` in the process's
:class:`~plait.tools.ToolRegistry` (so the allow list, approval, budgets, taint and
``on_indeterminate`` apply as to a built-in tool), keeps the sessions for the block and
closes them at its end (the drain). A server offering resources gets a
``SERVER.read_resource`` tool, one offering prompts a ``SERVER.get_prompt`` tool.

How a server tool is treated comes from its annotations unless the declaration says
otherwise (:attr:`~plait.mcp.McpServer.safety`): ``readOnlyHint`` makes it read-only
(retried freely, allowed to parallel workers), ``idempotentHint`` retried after a crash,
anything else (``destructiveHint`` or no hint) may act, so a call left in doubt asks a
person (``escalate``). Its results are outside content (they taint what reads them)
unless the declaration says the server is trusted.

A server that dies mid-call leaves the call in doubt: a read-only or idempotent tool is
called again once the session is reopened; any other raises
:class:`~plait.errors.ToolInDoubt`, which ends the visit as a crash would.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp import ClientSession, types
from mcp.shared.exceptions import MCPError

from plait.errors import ConfigError, ToolError, ToolInDoubt
from plait.mcp.declaration import McpServer, Safety, list_servers
from plait.mcp.results import prompt_value, resource_value, tool_value
from plait.mcp.session import Change, KeptSession, Progress
from plait.mesh import Mesh
from plait.tools import Tool, ToolContext, ToolRegistry

log = logging.getLogger("plait.mcp")

MAX_WORKSPACE_SESSIONS = 8
"""Sessions kept per server that runs one per workspace; the least recently used goes."""

RETRIES = 3
"""How many times a retry-safe call is made when its server keeps dying under it."""

LIST_TIMEOUT_S = 60.0
"""How long listing a server's tools may take."""

_LOST = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
"""What a call on a session whose server is gone may raise besides ``Connection closed``."""

_SCHEMA_URI = {"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}
_SCHEMA_PROMPT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["name"],
}


def safety_of(server: McpServer, tool: types.Tool) -> Safety:
    """How plait treats ``tool``: the declaration's word, else its annotations'."""
    said = server.safety.get(tool.name)
    if said is not None:
        return said
    hints = tool.annotations
    if hints is not None and hints.read_only_hint:
        return "read_only"
    if hints is not None and hints.idempotent_hint:
        return "idempotent"
    return "destructive"


class ServerTools:
    """The kept sessions of one server (one, or one per workspace) and its tools.

    Its tools are registered in the serving process's registry and listed again each
    time a session (re)opens or the server says its lists changed: new tools are
    registered, gone ones removed, changed ones replaced, with no restart.

    Attributes:
        server: the declaration.
        tools: its tools registered now.
        listed: how many times its tools were listed (for status and tests).
    """

    def __init__(self, server: McpServer, tg: TaskGroup, cwd: Path, registry: ToolRegistry) -> None:
        self.server = server
        self.tools: list[Tool] = []
        self.listed = 0
        self._tg = tg
        self._cwd = cwd
        self._registry = registry
        self._sessions: OrderedDict[Path, KeptSession] = OrderedDict()
        self._changes = 0
        self._seen = 0
        self._changed = anyio.Event()

    async def start(self) -> KeptSession:
        """Start keeping the session of the serving process's own workspace, and
        list its tools again whenever they may have changed."""
        kept = await self._kept(self._cwd)
        self._tg.start_soon(self._relist, kept)
        return kept

    def _stale(self, why: Change) -> None:
        self._changes += 1
        self._changed.set()

    def _stale_if_said(self, why: Change) -> None:
        if why == "list_changed":  # a run workspace's session opening changes nothing
            self._stale(why)

    async def _relist(self, kept: KeptSession) -> None:
        """List the tools again after each change not seen by a listing yet."""
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            if self._changes == self._seen or not kept.live:
                continue  # seen already, or it says so again once it opens
            try:
                with anyio.fail_after(LIST_TIMEOUT_S):
                    await self.sync(kept)
            except (MCPError, TimeoutError, *_LOST) as exc:
                log.warning("MCP server %s: cannot list its tools: %s", self.server.name, exc)

    async def sync(self, kept: KeptSession) -> list[Tool]:
        """List the server's tools on ``kept`` and make the registry hold exactly them."""
        self._seen = self._changes  # a change from now on is listed again
        fresh = await self.list_tools(kept)
        self.listed += 1
        # No await from here on: a caller never sees the table half replaced.
        self._registry.unregister(t.name for t in self.tools)
        self.tools = []
        for t in fresh:
            if t.name in self._registry:
                log.warning(
                    "MCP server %s: tool %r is registered already", self.server.name, t.name
                )
                continue
            self._registry.register(t)
            self.tools.append(t)
        return self.tools

    async def _kept(self, workspace: Path) -> KeptSession:
        found = self._sessions.get(workspace)
        if found is not None:
            self._sessions.move_to_end(workspace)
            return found
        said = self._stale if workspace == self._cwd else self._stale_if_said
        kept = self._sessions[workspace] = KeptSession(self.server, workspace, said)
        await self._tg.start(kept.keep)
        # Close the least recently used sessions past the limit, but never one with a
        # call in flight (closing it would leave that call in doubt) nor the process's own.
        idle = [w for w, k in self._sessions.items() if k.in_flight == 0 and w != self._cwd]
        for old in idle[: max(0, len(self._sessions) - MAX_WORKSPACE_SESSIONS)]:
            self._sessions.pop(old).close()
        return kept

    def sessions(self) -> list[KeptSession]:
        """Its kept sessions, least recently used first."""
        return list(self._sessions.values())

    async def list_tools(self, kept: KeptSession) -> list[Tool]:
        """The plait tools of the server's tools, as its session lists them."""
        session = await kept.session()
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        out = [t for t in (self._tool(m) for m in listed) if t is not None]
        have = {t.name for t in out}
        caps = kept.initialized.capabilities if kept.initialized else None
        wanted = self.server.tools
        if (
            caps is not None
            and caps.resources
            and (wanted is None or "read_resource" in wanted)
            and f"{self.server.name}.read_resource" not in have
            and await _has_resources(session)
        ):
            out.append(
                self._helper(
                    "read_resource",
                    "Read a resource of this server by URI.",
                    _SCHEMA_URI,
                    self._read_resource,
                )
            )
        if (
            caps is not None
            and caps.prompts
            and (wanted is None or "get_prompt" in wanted)
            and f"{self.server.name}.get_prompt" not in have
            and (await session.list_prompts()).prompts
        ):
            out.append(
                self._helper(
                    "get_prompt",
                    "Get a prompt of this server by name, with its arguments.",
                    _SCHEMA_PROMPT,
                    self._get_prompt,
                )
            )
        return out

    def _tool(self, listed: types.Tool) -> Tool | None:
        if self.server.tools is not None and listed.name not in self.server.tools:
            return None
        execution = listed.execution
        if execution is not None and execution.task_support == "required":
            # Callable only as an MCP task (polled for its result), which plait does not do.
            log.info("MCP server %s: task-only tool %r left out", self.server.name, listed.name)
            return None
        safety = safety_of(self.server, listed)
        read_only = safety == "read_only"
        approval = self.server.approval
        try:
            return Tool(
                name=f"{self.server.name}.{listed.name}",
                description=listed.description or listed.title or "",
                parameters=dict(listed.input_schema),
                handler=self._caller(listed.name, retry_safe=safety != "destructive"),
                read_only=read_only,
                external=not self.server.trusted,
                requires_approval=approval == "always" or (approval == "auto" and not read_only),
                idempotent=safety == "idempotent",
            )
        except ConfigError as exc:
            log.warning("MCP server %s: tool %r left out: %s", self.server.name, listed.name, exc)
            return None

    def _helper(
        self,
        name: str,
        description: str,
        schema: dict[str, Any],
        call: Callable[[ClientSession, dict[str, Any]], Awaitable[Any]],
    ) -> Tool:
        async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
            return await self._call(
                f"{self.server.name}.{name}", ctx, True, lambda s: call(s, args)
            )

        return Tool(
            name=f"{self.server.name}.{name}",
            description=description,
            parameters=schema,
            handler=handler,
            read_only=True,
            external=not self.server.trusted,
        )

    def _caller(
        self, remote: str, *, retry_safe: bool
    ) -> Callable[[dict[str, Any], ToolContext], Awaitable[Any]]:
        name = f"{self.server.name}.{remote}"

        async def handler(args: dict[str, Any], ctx: ToolContext) -> Any:
            async def one(session: ClientSession) -> Any:
                kept = await self._kept(self._workspace_of(ctx))

                async def report(progress: float, total: float | None, message: str | None) -> None:
                    kept.progress = Progress(name, progress, total, message)

                result = await session.call_tool(remote, args, progress_callback=report)
                if not isinstance(result, types.CallToolResult):
                    raise ToolError(
                        f"tool {name!r}: the server answered with {type(result).__name__}"
                    )
                return tool_value(name, result)

            return await self._call(name, ctx, retry_safe, one)

        return handler

    def _workspace_of(self, ctx: ToolContext) -> Path:
        return ctx.cwd.resolve() if self.server.per_workspace else self._cwd

    @staticmethod
    async def _read_resource(session: ClientSession, args: dict[str, Any]) -> Any:
        return resource_value(await session.read_resource(args["uri"]))

    @staticmethod
    async def _get_prompt(session: ClientSession, args: dict[str, Any]) -> Any:
        return prompt_value(await session.get_prompt(args["name"], args.get("arguments")))

    async def _call(
        self,
        name: str,
        ctx: ToolContext,
        retry_safe: bool,
        one: Callable[[ClientSession], Awaitable[Any]],
    ) -> Any:
        timeout = min(ctx.timeout_s, self.server.timeout_s or math.inf)
        kept = await self._kept(self._workspace_of(ctx))
        kept.in_flight += 1
        try:
            with anyio.fail_after(timeout):
                for attempt in range(1, RETRIES + 1):
                    session = await kept.session()
                    try:
                        return await one(session)
                    except (MCPError, *_LOST) as exc:
                        if isinstance(exc, MCPError) and exc.error.code != types.CONNECTION_CLOSED:
                            raise ToolError(f"tool {name!r} failed: {exc.error.message}") from exc
                        kept.mark_dead(session)
                        if not retry_safe:
                            raise ToolInDoubt(
                                f"tool {name!r}: its MCP server {self.server.name!r} died "
                                "mid-call; whether the call acted is unknown"
                            ) from exc
                        if attempt == RETRIES:
                            raise ToolError(
                                f"tool {name!r}: its MCP server {self.server.name!r} died "
                                f"under each of {RETRIES} calls"
                            ) from exc
        except TimeoutError:
            why = "" if kept.live else f" (the server is not reachable: {kept.error})"
            raise ToolError(f"tool {name!r} timed out after {timeout:g}s{why}") from None
        finally:
            kept.in_flight -= 1
        raise AssertionError("unreachable")  # pragma: no cover


async def _has_resources(session: ClientSession) -> bool:
    if (await session.list_resources()).resources:
        return True
    return bool((await session.list_resource_templates()).resource_templates)


class McpClients:
    """The MCP servers a serving process uses, their sessions and their tools."""

    def __init__(self, registry: ToolRegistry, tg: TaskGroup, cwd: Path) -> None:
        self.registry = registry
        self.servers: dict[str, ServerTools] = {}
        self._tg = tg
        self._cwd = cwd

    async def add(self, server: McpServer) -> list[Tool]:
        """Open ``server``, register its tools and return them; none if it cannot be
        opened now (the session keeps trying; its tools are offered once it opens)."""
        found = ServerTools(server, self._tg, self._cwd, self.registry)
        self.servers[server.name] = found
        kept = await found.start()
        if not kept.live:
            log.warning("MCP server %s offers no tools yet: %s", server.name, kept.error)
            return []
        try:
            with anyio.fail_after(LIST_TIMEOUT_S):
                return await found.sync(kept)
        except (MCPError, TimeoutError, *_LOST) as exc:
            log.warning("MCP server %s: cannot list its tools: %s", server.name, exc)
            return []

    def sessions(self, name: str) -> list[KeptSession]:
        """The kept sessions of server ``name`` (for status and tests)."""
        found = self.servers.get(name)
        return found.sessions() if found else []


@contextlib.asynccontextmanager
async def mcp_tools(
    mesh: Mesh,
    registry: ToolRegistry,
    *,
    cwd: Path | None = None,
    names: Iterable[str] | None = None,
) -> AsyncIterator[McpClients]:
    """Offer the declared MCP servers' tools in ``registry`` for the block.

    Args:
        mesh: where the declarations are stored.
        registry: the serving process's registry; the tools are removed at the end.
        cwd: the serving process's workspace (a stdio server's working directory).
        names: only these servers (default: every declared one).
    """
    servers = await list_servers(mesh)
    if names is not None:
        wanted = set(names)
        servers = [s for s in servers if s.name in wanted]
    async with anyio.create_task_group() as tg:
        clients = McpClients(registry, tg, (cwd or Path.cwd()).resolve())
        try:
            for server in servers:
                await clients.add(server)
            yield clients
        finally:
            registry.unregister(t.name for s in clients.servers.values() for t in s.tools)
            tg.cancel_scope.cancel()


__all__ = [
    "LIST_TIMEOUT_S",
    "MAX_WORKSPACE_SESSIONS",
    "RETRIES",
    "McpClients",
    "ServerTools",
    "mcp_tools",
    "safety_of",
]
