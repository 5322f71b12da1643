"""``/api/agents``: agent profiles (what graphs name) and agent actors (durable
conversations with a mailbox)."""

from __future__ import annotations

from fastapi import APIRouter

from plait.agents import Agents
from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.problems import problem_responses
from plait.api.views import ActorRow, AgentsView, ProfileRow
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
