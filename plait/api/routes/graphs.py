"""``/api/graphs``: list, show and import stored graphs."""

from __future__ import annotations

import functools
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, Query

from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.models import GraphView
from plait.api.problems import problem_responses
from plait.api.spec import Spec, add_schema
from plait.graphs.drawing import GraphDrawing, draw
from plait.graphs.loader import load_graph
from plait.graphs.mermaid import to_mermaid
from plait.graphs.nodes.program import refuse_unpromoted
from plait.graphs.spec import graph_json_schema
from plait.graphs.store import GraphSummary, StoredGraph, get_graph, import_graph, list_graphs
from plait.profiles import list_profiles
from plait.runs.heartbeats import live_heartbeats

router = APIRouter(prefix="/api/graphs", tags=["graphs"], responses=problem_responses(401, 422))


def declare_graph_file(spec: Spec) -> None:
    """Put the schema of a graph file in ``spec``, as ``GraphFile``: the body of an import."""
    add_schema(spec, "GraphFile", graph_json_schema())


def graph_view(stored: StoredGraph) -> GraphView:
    """A stored graph with its Mermaid drawing."""
    return GraphView(
        agent=stored.agent,
        name=stored.name,
        version=stored.version,
        sha256=stored.sha256,
        imported_at=stored.imported_at,
        spec=stored.spec.model_dump(mode="json"),
        mermaid=to_mermaid(stored.spec),
    )


@router.get("", summary="List stored graphs")
async def list_(
    svc: ServicesDep,
    who: PrincipalDep,
    agent: Annotated[str | None, Query(description="Only this agent's graphs.")] = None,
) -> list[GraphSummary]:
    """Stored graphs with their newest version and every version."""
    return await list_graphs(svc.mesh, agent)


@router.get("/{agent}/{name}", summary="Show a stored graph", responses=problem_responses(404))
async def show(
    agent: str,
    name: str,
    svc: ServicesDep,
    who: PrincipalDep,
    version: Annotated[int | None, Query(ge=1, description="Default: the newest.")] = None,
) -> GraphView:
    """A stored graph version: its spec and its Mermaid flowchart."""
    return graph_view(await get_graph(svc.mesh, agent, name, version))


@router.get(
    "/{agent}/{name}/drawing",
    summary="A stored graph as nodes and edges to draw",
    responses=problem_responses(404),
)
async def drawing(
    agent: str,
    name: str,
    svc: ServicesDep,
    who: PrincipalDep,
    version: Annotated[int | None, Query(ge=1, description="Default: the newest.")] = None,
) -> GraphDrawing:
    """A stored graph version's compiled graph: its nodes (kind, entry, layer and slot
    to place them by) and its edges (next, verdict routes, fan-out dispatch)."""
    stored = await get_graph(svc.mesh, agent, name, version)
    return draw(stored.spec, version=stored.version, sha256=stored.sha256)


@router.post(
    "",
    status_code=201,
    summary="Import a graph",
    responses=problem_responses(409),
    # Read as a mapping and checked by load_graph, which reports every problem at once.
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/GraphFile"}}}
        }
    },
)
async def import_(
    spec: Annotated[dict[str, Any], Body(description="The graph, as in a .json graph file.")],
    svc: ServicesDep,
    who: PrincipalDep,
) -> GraphView:
    """Validate the graph against the mesh's agents and the tools offered (this
    process's and the live workers'), and store it at the version it names. Only a
    person's token may import one that runs saved programs unpromoted."""
    agents = {profile.name: profile for profile in await list_profiles(svc.mesh)}
    offered = set(svc.tools.names())
    for beat in await live_heartbeats(svc.mesh):
        offered.update(beat.tools)
    # Validating is CPU work bounded only by the caps: off the loop, so a large graph
    # never holds up the other requests or this process's leases.
    check = functools.partial(load_graph, spec, agents=agents, tool_is_known=offered.__contains__)
    checked = await anyio.to_thread.run_sync(check)
    refuse_unpromoted(who, checked.nodes, "import")
    stored = await import_graph(svc.mesh, checked)
    return await anyio.to_thread.run_sync(graph_view, stored)
