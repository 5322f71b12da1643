"""``/api/schedules``: list, create, pause, resume and delete schedules.

Any token may list them; creating, deleting, pausing and resuming are operator acts,
for a human token only (a service token is refused with 403).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.models import Request
from plait.api.problems import problem_responses
from plait.models.scripted import confine_scripted
from plait.schedules import CatchUp, Schedule, Schedules

router = APIRouter(
    prefix="/api/schedules", tags=["schedules"], responses=problem_responses(401, 422)
)


class CreateSchedule(Request):
    """A schedule to create: a stored graph, a cron expression and a sink."""

    agent: str = Field(min_length=1, description="The graph's agent.")
    name: str = Field(min_length=1, description="The graph's name.")
    cron: str = Field(min_length=1, description='A cron expression: "0 8 * * 1".')
    tz: str = Field(default="UTC", description="The IANA time zone the cron is read in.")
    input: Any = Field(default=None, description="Each run's input.")
    deliver: str = Field(description="stdout, file:/ABS/PATH or webhook:URL.")
    catch_up: CatchUp = Field(default="one", description="What a late fire does about missed ones.")
    model: str | None = Field(default=None, description="A model spec for every run.")
    secret: str | None = Field(
        default=None, description="Sign webhook POSTs with the worker's PLAIT_SECRET_<NAME>."
    )


@router.get("", summary="List schedules")
async def list_schedules(svc: ServicesDep, who: PrincipalDep) -> list[Schedule]:
    """Every schedule, oldest first, with its pending and latest delivered runs."""
    return await Schedules(svc.mesh).list()


@router.post(
    "",
    status_code=201,
    summary="Create a schedule (a person only)",
    responses=problem_responses(403, 404),
)
async def create_schedule(body: CreateSchedule, svc: ServicesDep, who: PrincipalDep) -> Schedule:
    """Schedule runs of a stored graph; 404 if it is not stored, 422 for a bad cron,
    time zone or sink, or a ``scripted:`` model outside ``PLAIT_SCRIPTED_DIR``."""
    model = confine_scripted(body.model, svc.scripted_dir)
    return await Schedules(svc.mesh).create(
        body.agent, body.name, cron=body.cron, tz=body.tz, input=body.input,
        deliver=body.deliver, catch_up=body.catch_up, model=model,
        secret=body.secret, by=who,
    )  # fmt: skip


@router.get("/{schedule_id}", summary="Read a schedule", responses=problem_responses(404))
async def get_schedule(schedule_id: str, svc: ServicesDep, who: PrincipalDep) -> Schedule:
    """One schedule."""
    return await Schedules(svc.mesh).get(schedule_id)


@router.delete(
    "/{schedule_id}",
    summary="Delete a schedule (a person only)",
    responses=problem_responses(403, 404),
)
async def delete_schedule(schedule_id: str, svc: ServicesDep, who: PrincipalDep) -> Schedule:
    """Delete a schedule; it fires no more. Returns it as it was."""
    return await Schedules(svc.mesh).delete(schedule_id, by=who)


@router.post(
    "/{schedule_id}/pause",
    summary="Pause a schedule (a person only)",
    responses=problem_responses(403, 404),
)
async def pause_schedule(schedule_id: str, svc: ServicesDep, who: PrincipalDep) -> Schedule:
    """Pause a schedule: nothing fires until it is resumed."""
    return await Schedules(svc.mesh).pause(schedule_id, by=who)


@router.post(
    "/{schedule_id}/resume",
    summary="Resume a schedule (a person only)",
    responses=problem_responses(403, 404),
)
async def resume_schedule(schedule_id: str, svc: ServicesDep, who: PrincipalDep) -> Schedule:
    """Resume a paused schedule from its next fire time."""
    return await Schedules(svc.mesh).resume(schedule_id, by=who)
