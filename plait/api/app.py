"""The ASGI app of ``plait serve``: the HTTP API over an open mesh, and the web console."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plait.api.agent_events import declare_agent_events
from plait.api.deps import PrincipalDep, Services
from plait.api.events import declare_events
from plait.api.metrics import install_metrics
from plait.api.models import Whoami
from plait.api.problems import install_problem_handlers, problem_response, problem_responses
from plait.api.routes import agents, cluster, decisions, graphs, inbox, runs, schedules, topics
from plait.api.runs_feed import declare_runs_feed
from plait.api.spec import install_spec
from plait.mesh import Mesh
from plait.tools import ToolRegistry, serving_registry

STATIC = Path(str(files("plait.api") / "static"))
"""The console's files, shipped in the package: nothing is fetched at run time."""

ROUTERS = (
    runs.router,
    decisions.router,
    inbox.router,
    graphs.router,
    schedules.router,
    agents.router,
    topics.router,
    cluster.router,
)
"""Every resource's router; a new resource is a module under ``routes/`` listed here."""

MAX_BODY_BYTES = 1024 * 1024
"""The largest request body read: 1 MiB, as for a graph file."""


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413, before it is parsed: a
    graph's size caps its parse and validation, which run on the serving process."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, counting its body as it is read."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:  # a body sent without a length, or longer than it said
                # An HTTPException: the route's body parsing lets it through as it is.
                raise HTTPException(413, self._detail())
            return message

        await self.app(scope, counted, send)

    def _detail(self) -> str:
        return f"the request body is over the limit of {self.limit} bytes"

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await problem_response(413, self._detail())(scope, receive, send)


def create_app(mesh: Mesh, *, tools: ToolRegistry | None = None) -> FastAPI:
    """The API and console over ``mesh``, which the caller opens and closes.

    Args:
        mesh: an open mesh.
        tools: the tools this process offers (default: the built-in ones), for
            validating imported graphs.
    """
    app = FastAPI(
        title="plait",
        summary="Durable agent graphs over a mesh of actors: runs, decisions, graphs.",
        version="1",
        docs_url=None,  # the docs page loads its assets from the internet
        redoc_url=None,
    )
    app.state.services = Services(mesh, tools=tools or serving_registry())
    install_problem_handlers(app)
    for router in ROUTERS:
        app.include_router(router)

    @app.get("/api/whoami", tags=["auth"], responses=problem_responses(401))
    async def whoami(who: PrincipalDep) -> Whoami:
        """Who the request's token acts as."""
        return Whoami(kind=who.kind, name=who.name)

    @app.get("/", include_in_schema=False)
    async def console() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=_CONSOLE_HEADERS)

    install_metrics(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BodyLimit)
    install_spec(
        app, declare_events, declare_agent_events, declare_runs_feed, graphs.declare_graph_file
    )
    return app


# The console runs only its own script, and shows run data as text.
_CONSOLE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


__all__ = ["MAX_BODY_BYTES", "ROUTERS", "STATIC", "BodyLimit", "create_app"]
