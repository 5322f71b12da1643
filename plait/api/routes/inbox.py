"""``/api/inbox``: the open decisions of every run, for a person to answer in place
(through ``POST /api/decisions/{id}/answer``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.problems import problem_responses
from plait.api.views import InboxItem, InboxPage
from plait.decisions import DecisionKind
from plait.runs.heartbeats import workers

router = APIRouter(prefix="/api/inbox", tags=["decisions"], responses=problem_responses(401, 422))


@router.get(
    "",
    summary="Open decisions across runs, the longest waiting first",
    response_model_exclude={"items": {"__all__": {"decision": {"notify"}}}},
)
async def inbox(
    svc: ServicesDep,
    who: PrincipalDep,
    agent: Annotated[str | None, Query(description="Only decisions of this agent's runs.")] = None,
    graph: Annotated[str | None, Query(description="Only decisions of this graph's runs.")] = None,
    q: Annotated[
        str | None,
        Query(max_length=200, description="A run or decision id, or the start of one."),
    ] = None,
    kind: Annotated[DecisionKind | None, Query(description="Only this kind.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> InboxPage:
    """Open decisions with the run each belongs to, and whether a process serves the
    mesh's runs (without one, an answered run waits until a worker starts)."""
    runs = {run.run_id: run for run in await svc.runs.list()}
    items: list[InboxItem] = []
    for decision in reversed(await svc.desk.list("open")):
        run = runs.get(decision.run_id) if decision.run_id else None
        if (agent or graph) and run is None:
            continue
        if agent and run is not None and run.agent != agent:
            continue
        if graph and run is not None and run.graph != graph:
            continue
        if kind and decision.kind != kind:
            continue
        if q and not (decision.id.startswith(q) or (decision.run_id or "").startswith(q)):
            continue
        items.append(InboxItem(decision=decision, run=run))
    return InboxPage(items=items[:limit], total=len(items), served=bool(await workers(svc.mesh)))
