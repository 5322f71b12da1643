"""``plait mcp serve``: plait's graphs and agents offered to any MCP client.

Tools, built when the server starts:

- ``run_<agent>_<graph>`` per imported graph: start a run with an ``input`` and wait up to
  ``wait_s`` for it to settle; what it returns is :func:`describe`'s.
- ``get_run``: a run's status, output or error, and what it waits on.
- ``list_runs``: the newest runs, filtered by agent and status.
- ``tell_agent``: a message to an agent actor.

A run that parks on a person returns the decision's id and how a person answers it (the
CLI or the web console): answering is human-only and never an MCP tool. A run started
here counts its input as outside content (the client's model may have read anything),
so its nodes lose their pre-approved tools until they read only clean state. Runs are
served by workers (``plait worker``), not by this process.

Over streamable HTTP every request must carry a plait API token
(``Authorization: Bearer plait_...``, see ``plait tokens create``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from starlette.types import ASGIApp, Receive, Scope, Send

from plait.agents import Agents
from plait.api.tokens import authenticate
from plait.errors import RunNotFound
from plait.graphs.store import list_graphs
from plait.ids import RunId
from plait.mesh import Mesh
from plait.runs import RunRecord, Runs
from plait.runs.heartbeats import NO_WORKER, workers

MAX_WAIT_S = 300.0
"""The longest a ``run_*`` or ``get_run`` call waits for a run to settle."""

LIST_LIMIT = 100
"""The most runs ``list_runs`` returns."""

_TOOL_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def tool_name(agent: str, graph: str) -> str:
    """The MCP tool that runs ``graph`` of ``agent``: ``run_<agent>_<graph>``."""
    return _TOOL_CHARS.sub("_", f"run_{agent}_{graph}")[:128]


async def describe(runs: Runs, rec: RunRecord) -> dict[str, Any]:
    """What the MCP tools say of a run: its status, output or error, and the decision
    a person must answer for it to go on (with how they answer it)."""
    out: dict[str, Any] = {
        "run_id": rec.run_id,
        "agent": rec.graph.agent,
        "graph": rec.graph.name,
        "status": rec.status,
    }
    if rec.status == "done":
        out["output"] = await runs.output(rec)
    if rec.ended_detail:
        out["ended_detail"] = rec.ended_detail
    if rec.error:
        out["error"] = rec.error
    asked = await runs.asks(rec)
    if asked is not None:
        child, waiting = asked
        how = (
            f"only a person answers it: `plait decisions answer {waiting.decision_id} "
            "--option OPTION` (or --text TEXT), or in the web console"
        )
        out["waiting"] = {
            "run_id": child.run_id,
            "node": waiting.node,
            "kind": waiting.kind,
            "ask": waiting.ask,
            "options": waiting.options,
            "tool": waiting.tool,
            "decision_id": waiting.decision_id,
            "how_to_answer": how,
        }
    return out


async def _settled(runs: Runs, run_id: RunId, wait_s: float) -> RunRecord:
    wait = max(0.0, min(wait_s, MAX_WAIT_S))
    if wait == 0:
        return await runs.get(run_id)
    try:
        return await runs.wait(run_id, timeout=wait)
    except TimeoutError:
        return await runs.get(run_id)


async def build_server(mesh: Mesh) -> MCPServer:
    """The MCP server over ``mesh``: a tool per graph imported now, and the run tools."""
    runs = Runs(mesh)
    server: MCPServer = MCPServer(
        "plait",
        instructions=(
            "Run plait's durable agent graphs and read their runs. A run that waits on a "
            "person says so; only a person answers, outside this server."
        ),
    )
    for found in await list_graphs(mesh):
        server.add_tool(
            _runner(runs, found.agent, found.name),
            name=tool_name(found.agent, found.name),
            description=(
                f"Run graph {found.name!r} of agent {found.agent!r}"
                + (f": {found.description}" if found.description else "")
                + ". Waits up to wait_s seconds for it to finish or wait on a person."
            ),
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
        )

    async def get_run(run_id: str, wait_s: float = 0.0) -> dict[str, Any]:
        """A run's status, output or error, and what it waits on; waits up to wait_s
        seconds for it to settle."""
        try:
            return await describe(runs, await _settled(runs, RunId(run_id), wait_s))
        except RunNotFound:
            return {"run_id": run_id, "error": f"no run {run_id!r}"}

    async def list_runs(
        agent: str | None = None, status: str | None = None, limit: int = 20
    ) -> dict[str, Any]:
        """The newest runs (at most limit), filtered by agent and status (running,
        waiting_human, waiting_approval, done, failed, cancelled)."""
        found = await runs.list(agent=agent, status=status)
        return {
            "runs": [s.model_dump(mode="json") for s in found[: max(1, min(limit, LIST_LIMIT))]]
        }

    async def tell_agent(agent: str, message: str) -> dict[str, Any]:
        """Send a message to the agent actor named agent (started with `plait agents
        start`); the message counts as outside content."""
        told = await Agents(mesh).tell(agent, message, untrusted=True)
        return {"agent": agent, "message_id": told}

    read = ToolAnnotations(read_only_hint=True)
    server.add_tool(get_run, name="get_run", annotations=read)
    server.add_tool(list_runs, name="list_runs", annotations=read)
    server.add_tool(
        tell_agent,
        name="tell_agent",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    return server


def _runner(
    runs: Runs, agent: str, graph: str
) -> Callable[[Any, float], Awaitable[dict[str, Any]]]:
    async def run(input: Any = None, wait_s: float = 30.0) -> dict[str, Any]:
        """Start a run with this input and wait for it."""
        rec = await runs.start(agent, graph, input, input_untrusted=True)
        out = await describe(runs, await _settled(runs, rec.run_id, wait_s))
        if out["status"] in ("ready", "running") and not await workers(runs.mesh):
            out["note"] = NO_WORKER
        return out

    return run


class TokenRequired:
    """ASGI middleware: every request needs a valid plait API token (``Bearer``)."""

    def __init__(self, app: ASGIApp, mesh: Mesh) -> None:
        self.app = app
        self.mesh = mesh

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an HTTP request without a valid token with 401; pass the rest on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = raw.partition(" ")
        principal = None
        if scheme.lower() == "bearer" and token:
            principal = await authenticate(self.mesh, token.strip())
        if principal is None:
            body = json.dumps(
                {"error": "a plait API token is required (Authorization: Bearer plait_...)"}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


async def serve_stdio(mesh: Mesh) -> None:
    """Serve the MCP tools over stdin and stdout until the client closes them."""
    server = await build_server(mesh)
    await server.run_stdio_async()


async def serve_http(mesh: Mesh, *, host: str, port: int) -> None:
    """Serve the MCP tools over streamable HTTP at ``/mcp``, each request needing a
    plait API token, until cancelled."""
    import uvicorn

    server = await build_server(mesh)
    app = TokenRequired(server.streamable_http_app(host=host), mesh)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


__all__ = [
    "LIST_LIMIT",
    "MAX_WAIT_S",
    "TokenRequired",
    "build_server",
    "describe",
    "serve_http",
    "serve_stdio",
    "tool_name",
]
