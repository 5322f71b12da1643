"""``/api/runs``: list, start, read, inspect, verify, resume, cancel, retry, fork runs;
their events."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.events import EVENTS_RESPONSE, LastEventId, run_events, sse_response
from plait.api.models import (
    Asking,
    ForkRun,
    ListingStatus,
    RaiseBudget,
    ResumeRun,
    RunView,
    StartRun,
    Verified,
)
from plait.api.problems import problem_responses
from plait.api.run_search import RunQuery, page_of
from plait.api.runs_feed import RUNS_FEED_RESPONSE, runs_feed
from plait.api.views import RunGraph, RunPage
from plait.errors import AuditChainBroken, ConfigError
from plait.graphs.drawing import draw
from plait.graphs.nodes.program import refuse_unpromoted
from plait.graphs.store import get_graph
from plait.graphs.trajectory import TrajectoryStep
from plait.ids import RunId as StoredRunId
from plait.models.scripted import confine_scripted
from plait.runs import RunRecord, Runs
from plait.runs.log import LogFollower
from plait.runs.progress import Progress
from plait.runs.record import listing_status
from plait.runs.rerun import KEEP_INPUT
from plait.schedules.model import schedule_of_run

router = APIRouter(prefix="/api/runs", tags=["runs"], responses=problem_responses(401, 422))

RunId = Annotated[StoredRunId, "the run's id"]


async def run_view(runs: Runs, rec: RunRecord) -> RunView:
    """How the API shows ``rec``: with what it waits on and its output."""
    asking = await runs.asks(rec)
    current = current_nodes(rec)
    scheduled = schedule_of_run(rec.run_id)
    return RunView(
        run_id=rec.run_id,
        status=rec.status,
        agent=rec.graph.agent,
        graph=rec.graph.name,
        version=rec.graph.version,
        sha256=rec.graph.sha256,
        created_at=rec.created_at,
        updated_at=rec.updated_at,
        ended_detail=rec.ended_detail,
        error=rec.error,
        error_node=rec.error_node,
        current=current,
        asking=None
        if asking is None
        else Asking(run_id=asking[0].run_id, **asking[1].model_dump(include=_ASKING)),
        usage=rec.usage.model_dump(),
        output=await runs.output(rec),
        parent=rec.parent,
        forked_from=await runs.forked_from(rec.run_id),
        duration=max(0.0, rec.updated_at - rec.created_at) if rec.terminal else None,
        schedule_id=None if scheduled is None else scheduled[0],
        fire_at=None if scheduled is None else scheduled[1],
        budget_raised=dict(rec.budget_extra),
    )


def current_nodes(rec: RunRecord) -> list[str]:
    """The nodes ``rec`` has in flight, or the node it waits at."""
    if rec.waiting is not None and not rec.terminal:
        return [rec.waiting.node]
    return sorted({a.node for a in rec.attempts.values()})


_ASKING = {"node", "kind", "ask", "decision_id", "options"}


@router.get("", summary="Search runs, newest first, a page at a time")
async def list_runs(
    svc: ServicesDep,
    who: PrincipalDep,
    status: Annotated[ListingStatus | None, Query(description="Only runs in this status.")] = None,
    agent: Annotated[str | None, Query(description="Only this agent's runs.")] = None,
    graph: Annotated[str | None, Query(description="Only runs of this graph (its name).")] = None,
    q: Annotated[
        str | None, Query(max_length=200, description="A run id, or the start of one.")
    ] = None,
    since: Annotated[
        float | None, Query(ge=0, description="Only runs started at or after (epoch seconds).")
    ] = None,
    until: Annotated[
        float | None, Query(ge=0, description="Only runs started before (epoch seconds).")
    ] = None,
    schedule: Annotated[str | None, Query(description="Only runs this schedule started.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, description="Runs to skip (after the cursor).")] = 0,
    cursor: Annotated[
        str | None, Query(max_length=400, description="A page's next_cursor: the page after it.")
    ] = None,
) -> RunPage:
    """Runs matching the filters, one page of them; ``next_cursor`` leads to the next."""
    query = RunQuery(
        q=q, agent=agent, graph=graph, status=status, since=since, until=until,
        schedule=schedule,
    )  # fmt: skip
    found = await svc.runs.list(agent=agent, status=status)
    return page_of(found, query, limit=limit, offset=offset, cursor=cursor)


@router.post("", status_code=201, summary="Start a run", responses=problem_responses(404, 409))
async def start_run(body: StartRun, svc: ServicesDep, who: PrincipalDep) -> RunView:
    """Start a run of a stored graph; a worker (or ``plait serve --serve-runs``) serves it.
    A ``scripted:`` model names a file under the server's ``PLAIT_SCRIPTED_DIR`` (422
    otherwise, or when that is unset). Only a person's token may start one that runs
    saved programs unpromoted."""
    stored = await get_graph(svc.mesh, body.agent, body.name, body.version)
    refuse_unpromoted(who, stored.spec.nodes, "run")
    rec = await svc.runs.start(
        body.agent,
        body.name,
        body.input,
        version=body.version,
        model=confine_scripted(body.model, svc.scripted_dir),
        input_untrusted=body.input_untrusted,
    )
    return await run_view(svc.runs, rec)


@router.get(
    "/events",
    summary="Follow every run's listing status as it changes (server-sent events)",
    response_class=StreamingResponse,
    responses={**RUNS_FEED_RESPONSE, **problem_responses(422)},
)
async def follow_runs(
    svc: ServicesDep,
    who: PrincipalDep,
    last_event_id: LastEventId = None,
    changes: Annotated[
        int | None, Query(ge=1, description="End the stream after this many events.")
    ] = None,
) -> StreamingResponse:
    """A ``run`` event each time a run starts, parks, goes on or ends (see
    :mod:`plait.api.runs_feed`); a 422 when the mesh has no live channels."""
    if svc.mesh.live is None:
        raise ConfigError(f"the mesh {svc.mesh.url} has no live channels to follow runs with")
    return sse_response(runs_feed(svc.mesh, last_event_id=last_event_id, changes=changes))


@router.get("/{run_id}", summary="Read a run", responses=problem_responses(404))
async def get_run(run_id: RunId, svc: ServicesDep, who: PrincipalDep) -> RunView:
    """The run, what it waits on, and its output once done."""
    return await run_view(svc.runs, await svc.runs.get(run_id))


@router.get("/{run_id}/trajectory", summary="A run's visits", responses=problem_responses(404, 409))
async def inspect_run(run_id: RunId, svc: ServicesDep, who: PrincipalDep) -> list[TrajectoryStep]:
    """Committed visits in commit order, then any visit parked on a person."""
    await svc.runs.get(run_id)
    return await svc.runs.trajectory(run_id)


@router.get(
    "/{run_id}/graph",
    summary="A run's graph drawn, with its current node and visit counts",
    responses=problem_responses(404, 409),
)
async def run_graph(run_id: RunId, svc: ServicesDep, who: PrincipalDep) -> RunGraph:
    """The run's pinned graph version as nodes and edges, the nodes it is at now, and
    how many visits each node has had."""
    rec = await svc.runs.get(run_id)
    stored = await get_graph(svc.mesh, rec.graph.agent, rec.graph.name, rec.graph.version)
    visits: dict[str, int] = {}
    latest: dict[str, str] = {}
    for step in await svc.runs.trajectory(run_id):
        node = step.node.split("[", 1)[0]
        visits[node] = visits.get(node, 0) + 1
        latest[node] = step.status
    drawing = draw(stored.spec, version=stored.version, sha256=stored.sha256)
    return RunGraph(
        **drawing.model_dump(),
        run_id=rec.run_id,
        status=listing_status(rec.status),
        current=sorted({c.split("[", 1)[0] for c in current_nodes(rec)}),
        visits=visits,
        failed=sorted(n for n, status in latest.items() if status == "failed"),
    )


@router.get(
    "/{run_id}/verify", summary="Verify a run's audit chain", responses=problem_responses(404)
)
async def verify_run(run_id: RunId, svc: ServicesDep, who: PrincipalDep) -> Verified:
    """Whether the audit chain holds; if not, its first disagreement."""
    try:
        events = await svc.runs.verify(run_id)
    except AuditChainBroken as exc:
        return Verified(run_id=run_id, verified=False, error=str(exc))
    return Verified(run_id=run_id, verified=True, events=events)


@router.post(
    "/{run_id}/resume",
    summary="Answer what a run waits on (a person only)",
    responses=problem_responses(403, 404, 409),
)
async def resume_run(
    run_id: RunId, body: ResumeRun, svc: ServicesDep, who: PrincipalDep
) -> RunView:
    """Answer the run's (or its child run's) question; its owner wakes at once."""
    await svc.runs.resume(run_id, body.answer, by=who)
    return await run_view(svc.runs, await svc.runs.get(run_id))


@router.post(
    "/{run_id}/cancel",
    summary="Cancel a run (a person only)",
    responses=problem_responses(403, 404),
)
async def cancel_run(run_id: RunId, svc: ServicesDep, who: PrincipalDep) -> RunView:
    """Cancel the run: nothing of it runs again (a finished run stays as it ended)."""
    return await run_view(svc.runs, await svc.runs.cancel(run_id, by=who))


@router.post(
    "/{run_id}/retry",
    summary="Continue a failed run from the node that failed (a person only)",
    responses=problem_responses(403, 404, 409),
)
async def retry_run(run_id: RunId, svc: ServicesDep, who: PrincipalDep) -> RunView:
    """The failed run goes on, on its pinned graph version, keeping every committed
    visit; 409 for a run that did not fail."""
    return await run_view(svc.runs, await svc.runs.retry(run_id, by=who))


@router.post(
    "/{run_id}/fork",
    status_code=201,
    summary="Start a new run from the state after a committed visit",
    responses=problem_responses(403, 404),
)
async def fork_run(run_id: RunId, body: ForkRun, svc: ServicesDep, who: PrincipalDep) -> RunView:
    """A new run on the same pinned graph version runs what comes after the visit; its
    audit chain names the parent's event. 422 for a visit that is not there (the
    problem lists those there are); 403 for a token that is no person's when a person
    answered or raised the budget before the visit (a fork would re-use it)."""
    given = "input" in body.model_fields_set
    rec = await svc.runs.fork(
        run_id,
        body.at,
        by=who,
        input=body.input if given else KEEP_INPUT,
        input_untrusted=body.input_untrusted,
    )
    return await run_view(svc.runs, rec)


@router.post(
    "/{run_id}/budget",
    summary="Raise a run's budget (a person only)",
    responses=problem_responses(403, 404, 409),
)
async def raise_budget(
    run_id: RunId, body: RaiseBudget, svc: ServicesDep, who: PrincipalDep
) -> RunView:
    """Add to the run's limits; a run parked on its budget wakes."""
    extra: dict[str, Any] = body.model_dump(exclude_none=True)
    return await run_view(svc.runs, await svc.runs.raise_budget(run_id, extra, by=who))


@router.get(
    "/{run_id}/progress",
    summary="A run's progress, one entry per transition",
    responses=problem_responses(404),
)
async def run_progress(
    run_id: RunId,
    svc: ServicesDep,
    who: PrincipalDep,
    after: Annotated[
        int, Query(ge=0, description="Only what follows this audit seq (a progress's own).")
    ] = 0,
) -> list[Progress]:
    """The progress of the run's transitions after ``after``, oldest first: what
    ``plait graph run`` shows and the ``progress`` server-sent events carry."""
    await svc.runs.get(run_id)  # a 404 for a run that is not there
    entries = await LogFollower(svc.runs.mesh, run_id, after).poll()
    return [entry.progress for entry in entries if entry.progress is not None]


@router.get(
    "/{run_id}/events",
    summary="Follow a run as it happens until it settles (server-sent events)",
    response_class=StreamingResponse,
    responses={**EVENTS_RESPONSE, **problem_responses(404)},
)
async def follow_run(
    run_id: RunId,
    svc: ServicesDep,
    who: PrincipalDep,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    """The run's events as it happens (see :mod:`plait.api.events`), then one
    ``settled`` event with the run as ``GET /api/runs/{run_id}`` shows it, when it
    ends or waits."""
    rec = await svc.runs.get(run_id)  # a 404 before the stream starts

    async def settled() -> dict[str, Any]:
        return (await run_view(svc.runs, await svc.runs.get(run_id))).model_dump(mode="json")

    return sse_response(run_events(svc.runs, rec, settled, last_event_id=last_event_id))
