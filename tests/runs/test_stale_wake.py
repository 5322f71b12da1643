"""A stale handler of a wake that was delivered again writes nothing under it.

A wake outlives its visibility timeout on a slow consumer and goes to another, which
handles it to the end and acks it. When the slow one then handles its copy, whatever it
would claim under that wake would be left with no message to come again if it died:
the run would stay ``running`` for good. Its commits hold the delivery, so they fail and
it stops; the run goes on with the wakes that are really in the mesh.
"""

from __future__ import annotations

import anyio
import pytest

from plait.actors import MAILBOX_GROUP, ActorContext, LocalRuntime, Mail
from plait.actors.directory import find_record
from plait.actors.partitions import mailbox_topic, partition_of, partitions
from plait.decisions import DecisionAnswerer, Human
from plait.ids import ActorId
from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.audit import read_events
from plait.runs.owner import handle
from plait.runs.owner_services import OwnerServices
from plait.runs.record import owner_id
from tests._support.deliveries import next_within
from tests._support.timing import scaled

from .helpers import eventually, hosting, settle, store

pytestmark = pytest.mark.anyio

GRAPH = {
    "name": "stale",
    "agent": "assistant",
    "entry": "prep",
    "nodes": [
        {"id": "prep", "type": "agent", "prompt": "Prepare {{input}}", "next": "ask"},
        {"id": "ask", "type": "human", "ask": "Go on with {{prep}}?", "next": "finish"},
        {"id": "finish", "type": "agent", "prompt": "Finish with {{ask}}"},
    ],
}


def model(finish_delay_ms: int = 0) -> ScriptedModel:
    return ScriptedModel(
        [
            {"node": "prep", "text": "the plan"},
            {"node": "finish", "text": "finished", "delay_ms": finish_delay_ms},
        ]
    )


async def test_a_stale_handler_claims_nothing_under_a_wake_its_holder_acked(
    mesh: Mesh,
) -> None:
    await store(mesh, GRAPH)
    runs = Runs(mesh)
    run_id = (await runs.start("assistant", "stale", "x")).run_id
    owner = owner_id(run_id)
    topic = mailbox_topic(partition_of(owner, partitions(mesh)))

    # The slow consumer takes the start wake and sits on it past its visibility timeout.
    slow = mesh.subscribe(topic, MAILBOX_GROUP, "slow", start="begin", visibility_timeout_ms=200)
    stale = await next_within(slow, 5)
    assert stale is not None and stale.attempt == 1
    await slow.close()

    # Another host takes it again, runs ``prep`` and parks on the question: acked.
    async with hosting(mesh, model(), visibility_timeout_ms=200):
        parked = await settle(runs, run_id)
    assert parked.status == "waiting_human" and parked.waiting is not None
    assert parked.waiting.decision_id is not None
    assert await mesh.backlog(topic, MAILBOX_GROUP) == 0
    await DecisionAnswerer(mesh).answer(parked.waiting.decision_id, text="yes", by=Human("ana"))

    # Now the slow consumer handles its copy (the run resumes: ``finish`` may run); its
    # node takes long, and it dies in it if it got there.
    slow_model = model(finish_delay_ms=60_000)
    services = OwnerServices(mesh, host="slow-host", model=slow_model)
    runtime = LocalRuntime(mesh, host="slow-host", services=services)
    record = await find_record(mesh, owner)
    assert record is not None
    data = stale.data
    mail = Mail(ActorId(owner), data["body"], stale)

    async def claimed_under_stale_wake() -> bool | None:
        rec = await runs.get(run_id)
        return True if any(a.wake == stale.id for a in rec.attempts.values()) else None

    returned = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def stale_handler() -> None:
            await handle(ActorContext(record, mesh, runtime), mail)
            returned.set()
            tg.cancel_scope.cancel()

        async def watch_claims() -> None:
            await eventually(claimed_under_stale_wake)
            tg.cancel_scope.cancel()  # the stale handler dies mid-node

        tg.start_soon(stale_handler)
        tg.start_soon(watch_claims)
        with anyio.fail_after(scaled(20)):
            await anyio.sleep_forever()

    assert returned.is_set(), "the stale handler claimed a node under a wake it lost"
    rec = await runs.get(run_id)
    assert all(a.wake != stale.id for a in rec.attempts.values())
    assert slow_model.calls == []  # it ran nothing

    # The answer's own wake carries the run to its end.
    async with hosting(mesh, model(), visibility_timeout_ms=200):
        done = await settle(runs, run_id, since=parked)
    assert done.status == "done", done.error
    events = await read_events(mesh, run_id)
    committed = [(e.node, e.visit) for e in events if e.type == "node.committed"]
    assert sorted(committed) == [("ask", 1), ("finish", 1), ("prep", 1)]
    await runs.verify(run_id)
