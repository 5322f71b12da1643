"""Errors as JSON problem objects (RFC 9457): a status, a title and a one-line detail.

Every plait error a service raises is mapped here, once, to the status that says what
the caller can do about it: 404 for what does not exist, 409 for a state that forbids
the act (a closed decision, a run that waits on nothing), 422 for input that cannot
work, 403 for a principal who may not act, 503 for a mesh that does not answer.

The API answers no 400: a request body that cannot be read as JSON is invalid input
like one that does not fit its schema, a 422. A 405 names in ``Allow`` every method
its path takes, whichever route serves each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.routing import Match, Mount

from plait.errors import (
    ConfigError,
    DecisionClosed,
    DecisionError,
    GraphNotFound,
    GraphValidationError,
    GraphVersionExists,
    MeshUnavailable,
    NotPermitted,
    PlaitError,
    RunError,
    RunNotFound,
    RunNotWaiting,
    VersionConflict,
    VisitNotFound,
)

PROBLEM_TYPE = "application/problem+json"
"""The media type of a problem object."""

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (NotPermitted, 403),
    (RunNotFound, 404),
    (VisitNotFound, 422),  # a fork's visit: input that cannot work, not a missing run
    (GraphNotFound, 404),
    (LookupError, 404),  # DecisionNotFound, ActorNotFound...
    (DecisionClosed, 409),
    (RunNotWaiting, 409),
    (GraphVersionExists, 409),
    (VersionConflict, 409),
    (GraphValidationError, 422),
    (ConfigError, 422),
    (DecisionError, 422),  # an answer that does not fit the decision
    (MeshUnavailable, 503),
    (RunError, 409),  # a run that is over, or not in a state for the act
)
"""Most specific first: the first class an error is an instance of gives its status."""

_TITLES = {
    400: "Bad request",
    401: "Not authenticated",
    403: "Not permitted",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    422: "Invalid input",
    500: "Internal error",
    503: "Mesh unavailable",
}


class Problem(BaseModel):
    """A problem object: what went wrong, in one line.

    Attributes:
        type: ``about:blank`` (the status says it all).
        title: the status's short name.
        status: the HTTP status.
        detail: what went wrong, where, and how to fix it.
        problems: for invalid input, each problem with its path.
    """

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    problems: list[str] | None = None


def problem_response(
    status: int,
    detail: str,
    *,
    problems: list[str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A problem object as a response."""
    body = Problem(
        title=_TITLES.get(status, "Error"), status=status, detail=detail, problems=problems
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_TYPE,
        headers=dict(headers) if headers else None,
    )


def status_of(exc: PlaitError) -> int:
    """The HTTP status of a plait error."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entry declaring problem objects for these statuses."""
    return {
        status: {
            "description": _TITLES.get(status, "Error"),
            "content": {PROBLEM_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


def scrubbed(text: str, places: Mapping[str, str]) -> str:
    """``text`` with each of ``places`` (a server's path or URL) replaced by its name."""
    for place, name in sorted(places.items(), key=lambda item: -len(item[0])):
        if place:
            text = text.replace(place, name)
    return text


def _server_places(request: Request) -> dict[str, str]:
    """Where this server keeps things, which its errors name for a local reader but a
    caller is not told: the mesh's URL (a SQLite file's path, a Redis password) and
    the folder of scripted model files."""
    services = getattr(request.app.state, "services", None)
    if services is None:
        return {}
    url = str(services.mesh.url)
    places = {url: "the mesh"}
    parts = urlsplit(url)
    if parts.scheme == "sqlite" and len(parts.path) > 2:
        places[parts.path[1:]] = "the mesh's file"  # sqlite:///PATH
    if services.scripted_dir is not None:
        places[str(services.scripted_dir)] = "$PLAIT_SCRIPTED_DIR"
    return places


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app takes on the request's path: each one a
    route matches fully (a mount, which takes any method to its app, left out)."""
    return [
        method
        for method in _METHODS
        if any(
            not isinstance(route, Mount)
            and route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error with a problem object, naming none of the server's own paths."""

    async def plait_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PlaitError)
        places = _server_places(request)
        problems = exc.problems if isinstance(exc, GraphValidationError) else None
        detail = str(exc).splitlines()[0] if problems else str(exc)
        if problems is not None:
            problems = [scrubbed(str(problem), places) for problem in problems]
        return problem_response(status_of(exc), scrubbed(detail, places), problems=problems)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = [
            ".".join(str(p) for p in error["loc"]) + ": " + str(error["msg"])
            for error in exc.errors()
        ]
        return problem_response(422, f"invalid request: {'; '.join(problems)}", problems=problems)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 400:  # FastAPI's: a body that is not JSON it can read
            cause = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
            return problem_response(422, f"the request body is not valid JSON{cause}")
        headers = dict(exc.headers or {})
        allowed = allowed_methods(request) if exc.status_code == 405 else None
        if allowed:
            headers["Allow"] = ", ".join(allowed)
        return problem_response(exc.status_code, str(exc.detail), headers=headers or None)

    app.add_exception_handler(PlaitError, plait_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)


__all__ = [
    "PROBLEM_TYPE",
    "Problem",
    "allowed_methods",
    "install_problem_handlers",
    "problem_response",
    "problem_responses",
    "scrubbed",
    "status_of",
]
