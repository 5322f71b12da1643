"""``/api/decisions``: what people are asked, and their answers (a person only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.models import Answer
from plait.api.problems import problem_responses
from plait.decisions import Decision, DecisionStatus
from plait.ids import DecisionId

router = APIRouter(
    prefix="/api/decisions", tags=["decisions"], responses=problem_responses(401, 422)
)

_HIDDEN = {"notify"}  # how the run is woken is no one's business but the run's


@router.get(
    "",
    summary="List decisions, newest first",
    response_model_exclude={"__all__": _HIDDEN},
)
async def list_decisions(
    svc: ServicesDep,
    who: PrincipalDep,
    status: Annotated[DecisionStatus | None, Query(description="Only these.")] = None,
    run_id: Annotated[str | None, Query(description="Only this run's.")] = None,
) -> list[Decision]:
    """Decisions with their exact stored text."""
    found = await svc.desk.list(status)
    return [d for d in found if run_id is None or d.run_id == run_id]


@router.get(
    "/{decision_id}",
    summary="Read a decision",
    response_model_exclude=_HIDDEN,
    responses=problem_responses(404),
)
async def get_decision(decision_id: DecisionId, svc: ServicesDep, who: PrincipalDep) -> Decision:
    """One decision."""
    return await svc.desk.get(decision_id)


@router.post(
    "/{decision_id}/answer",
    summary="Answer a decision (a person only, once)",
    response_model_exclude=_HIDDEN,
    responses=problem_responses(403, 404, 409),
)
async def answer_decision(
    decision_id: DecisionId, body: Answer, svc: ServicesDep, who: PrincipalDep
) -> Decision:
    """Answer an open decision; a service token is refused (403), a closed one is 409."""
    return await svc.desk.answer(decision_id, option=body.option, text=body.text, by=who)
