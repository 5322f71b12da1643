"""What every route gets: the services over the mesh, and the principal of its token."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from plait.api.tokens import authenticate
from plait.decisions import DecisionAnswerer, Principal
from plait.mesh import Mesh
from plait.models.scripted import scripted_root
from plait.runs import Runs
from plait.tools import ToolRegistry, serving_registry


@dataclass
class Services:
    """The Python services the API is a front end to, over one open mesh.

    Attributes:
        mesh: the mesh.
        runs: runs on it.
        desk: its decisions (the human surface: routes check the principal).
        tools: the tools this process offers, for validating imported graphs.
        scripted_dir: the only folder a caller's ``scripted:`` model file is read
            from (``PLAIT_SCRIPTED_DIR``); None: callers may name none.
    """

    mesh: Mesh
    runs: Runs = field(init=False)
    desk: DecisionAnswerer = field(init=False)
    tools: ToolRegistry = field(default_factory=serving_registry)
    scripted_dir: Path | None = field(default_factory=scripted_root)

    def __post_init__(self) -> None:
        self.runs = Runs(self.mesh)
        self.desk = self.runs.desk


async def services(request: Request) -> Services:
    """The app's services.

    A coroutine though it awaits nothing: FastAPI runs a plain function dependency in
    its thread pool, and that hop (twice per request, with the principal's) cost more
    than the rest of a decision's answer.
    """
    found: Services = request.app.state.services
    return found


_bearer = HTTPBearer(auto_error=False, description="A token from `plait tokens create`.")


async def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The principal of the request's bearer token; 401 without a valid one."""
    if credentials is None:
        raise HTTPException(
            401,
            "no bearer token: send `Authorization: Bearer TOKEN` with a token from "
            "`plait tokens create`",
            headers={"WWW-Authenticate": "Bearer"},
        )
    found = await authenticate((await services(request)).mesh, credentials.credentials)
    if found is None:
        raise HTTPException(
            401,
            "the bearer token is unknown or revoked: create one with `plait tokens create`",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return found


ServicesDep = Annotated[Services, Depends(services)]
"""A route parameter holding the app's services."""

PrincipalDep = Annotated[Principal, Depends(principal)]
"""A route parameter holding who acts."""

__all__ = ["PrincipalDep", "Services", "ServicesDep", "principal", "services"]
