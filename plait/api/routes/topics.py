"""``/api/topics``: the mesh's durable topics, what each holds unread, and the agent
actors subscribed to it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from plait.actors import MAILBOX_GROUP
from plait.actors.partitions import MAILBOX_PREFIX
from plait.actors.topics import matches, subscriber_group
from plait.agents import Agents
from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.problems import problem_responses
from plait.api.views import TopicRow, TopicsView

router = APIRouter(prefix="/api/topics", tags=["topics"], responses=problem_responses(401, 422))

_COUNT_ONLY = "plait.api.count"
"""A consumer group no reader uses: a topic's backlog for it is every event it holds."""


@router.get("", summary="The mesh's topics and their backlog")
async def topics(
    svc: ServicesDep,
    who: PrincipalDep,
    prefix: Annotated[str, Query(max_length=200, description="Only topics starting so.")] = "",
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
) -> TopicsView:
    """Topics by name: for each, the events its readers have not acked (a mailbox's
    for the runtimes serving it, a topic's for its slowest subscriber, else every
    event it holds) and the agent actors whose patterns match it."""
    names = await svc.mesh.topics(prefix)
    actors = [
        (info.name, subscriber_group(info.record.id), info.topics)
        for info in await Agents(svc.mesh).list()
    ]
    rows: list[TopicRow] = []
    for name in names[:limit]:
        readers = [
            (a, group) for a, group, patterns in actors if any(matches(p, name) for p in patterns)
        ]
        if name.startswith(MAILBOX_PREFIX):
            held = await svc.mesh.backlog(name, MAILBOX_GROUP)
        elif readers:
            held = max([await svc.mesh.backlog(name, group) for _, group in readers])
        else:
            held = await svc.mesh.backlog(name, _COUNT_ONLY)
        rows.append(TopicRow(name=name, held=held, subscribers=[a for a, _ in readers]))
    return TopicsView(items=rows, total=len(names), truncated=len(names) > limit)
