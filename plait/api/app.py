"""The ASGI app of ``plait serve``: the HTTP API over an open mesh, and the web console."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from plait.api.deps import PrincipalDep, Services
from plait.api.models import Whoami
from plait.api.problems import Problem, install_problem_handlers, problem_responses
from plait.api.routes import decisions, graphs, runs, schedules
from plait.mesh import Mesh
from plait.tools import ToolRegistry, serving_registry

STATIC = Path(str(files("plait.api") / "static"))
"""The console's files, shipped in the package: nothing is fetched at run time."""

ROUTERS = (runs.router, decisions.router, graphs.router, schedules.router)
"""Every resource's router; a new resource is a module under ``routes/`` listed here."""


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

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _declare_problem(app)
    return app


# The console runs only its own script, and shows run data as text.
_CONSOLE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def _declare_problem(app: FastAPI) -> None:
    """Put the Problem schema in the spec, which every error response refers to."""
    base = app.openapi

    def openapi() -> dict[str, object]:
        if app.openapi_schema is None:
            spec = base()
            schemas = spec.setdefault("components", {}).setdefault("schemas", {})
            schemas["Problem"] = Problem.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["ROUTERS", "STATIC", "create_app"]
