"""``/api/agents``: agent profiles (what graphs name) and agent actors (durable
conversations with a mailbox)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from plait.agents import Agents
from plait.api.agent_events import AGENT_EVENTS_RESPONSE, agent_events
from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.events import LastEventId, sse_response
from plait.api.problems import problem_responses
from plait.api.views import ActorRow, AgentsView, ProfileRow
from plait.errors import ConfigError
from plait.profiles import list_profiles

router = APIRouter(prefix="/api/agents", tags=["agents"], responses=problem_responses(401))


@router.get("", summary="Agent profiles and agent actors")
async def agents(svc: ServicesDep, who: PrincipalDep) -> AgentsView:
    """Every profile by name, and every agent actor with its status, subscriptions,
    backlog and the day's spending."""
    profiles = sorted(await list_profiles(svc.mesh), key=lambda p: p.name)
    actors = sorted(await Agents(svc.mesh).list(), key=lambda a: a.name)
    return AgentsView(
        profiles=[
            ProfileRow(name=p.name, model=p.model, tools=p.tools, delegates=p.delegates)
            for p in profiles
        ],
        actors=[
            ActorRow(
                name=a.name,
                status=a.status,
                topics=a.topics,
                backlog=a.backlog,
                turns=a.state.turns,
                tokens_today=a.state.tokens,
                dollars_today=a.state.dollars,
                created_at=a.record.created_at,
            )
            for a in actors
        ],
    )


@router.get(
    "/{name}/events",
    summary="Follow an agent actor's turns as they happen (server-sent events)",
    response_class=StreamingResponse,
    responses={**AGENT_EVENTS_RESPONSE, **problem_responses(404, 422)},
)
async def follow_agent(
    name: str,
    svc: ServicesDep,
    who: PrincipalDep,
    turns: Annotated[
        int | None, Query(ge=1, description="End the stream once this many turns ended.")
    ] = None,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    """The agent actor's turns as they happen (see :mod:`plait.api.agent_events`):
    each turn's start, its model's reply piece by piece, its end."""
    await Agents(svc.mesh).get(name)  # a 404 before the stream starts
    if svc.mesh.live is None:
        raise ConfigError(f"the mesh {svc.mesh.url} has no live channels to watch agents with")
    return sse_response(agent_events(svc.mesh, name, last_event_id=last_event_id, turns=turns))
