"""The live-run index and the takeover it serves (see plait.runs.live).

The index holds exactly the runs listed ``running``, written only when that listing
changes; a leased runtime that takes a partition wakes each run listed under it, so a
run whose claim has no message left (its wake acked by a holder that then died) goes
on, and a claim whose wake does come back is still run once.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.actors import LeasedRuntime, load_partitions, mailbox_of, partition_of
from plait.decisions import Human
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.runs import RunRecord, Runs, serve
from plait.runs.audit import read_events
from plait.runs.live import live_key, live_runs
from plait.runs.record import owner_id
from tests._support.timing import scaled

from .helpers import EXAMPLES, agent_chain, eventually, hosting, settle, store

pytestmark = pytest.mark.anyio

LEASE_S = scaled(1.0)  # longer on a busy machine, as in tests/actors/conftest.py


async def listed(mesh: Mesh, run_id: str) -> bool:
    """Whether the live index holds ``run_id`` (under its owner's partition)."""
    partition = partition_of(owner_id(run_id), await load_partitions(mesh))
    found = run_id in await live_runs(mesh, partition)
    assert found == (await mesh.get(live_key(mesh, run_id)) is not None)
    return found


async def all_listed(mesh: Mesh) -> set[str]:
    """Every run the live index holds."""
    return {e.key.rpartition("/")[2] async for e in mesh.scan("runlive/")}


@asynccontextmanager
async def leased(
    mesh: Mesh, model: ScriptedModel, *, drain_timeout_s: float = 5.0, host: str | None = None
) -> AsyncIterator[LeasedRuntime]:
    """Serve runs on ``mesh`` with a leased runtime (it takes every partition), as
    ``host`` if given."""
    async with serve(
        mesh,
        runtime=functools.partial(LeasedRuntime, lease_s=LEASE_S),
        model=model,
        host_id=host,
        beat=False,
        visibility_timeout_ms=300,
        drain_timeout_s=drain_timeout_s,
    ) as served:

        async def serving() -> bool:
            return bool(served.runtime.serving)

        await eventually(serving)
        yield served.runtime


async def take_and_ack(mesh: Mesh, run_id: str, wake: str | None = None) -> str:
    """Take the next message of ``run_id``'s owner (with ``wake``, that message: another
    one taken first, a lease change's, is left to come back) as a consumer of the
    runtimes' group and ack it, as a holder that acked its wake and died; its id."""
    topic = mailbox_of(mesh, owner_id(run_id))
    sub = mesh.subscribe([topic], "actors", "gone", start="begin", visibility_timeout_ms=300)
    try:
        with anyio.fail_after(scaled(10)):
            async for delivery in sub:
                data = delivery.data if isinstance(delivery.data, dict) else {}
                assert data.get("to") == owner_id(run_id)  # the mesh holds one run
                if wake is not None and delivery.id != wake:
                    continue
                await delivery.ack()
                return delivery.id
    finally:
        await sub.close()
    raise AssertionError("the subscription ended")


async def ack_all(mesh: Mesh, run_id: str, quiet_s: float = 1.0) -> int:
    """Take and ack every message of ``run_id``'s owner until none comes for ``quiet_s``
    after the first (each waits out the visibility timeout); how many."""
    topic = mailbox_of(mesh, owner_id(run_id))
    sub = mesh.subscribe([topic], "actors", "gone", start="begin", visibility_timeout_ms=300)
    acked = 0
    try:
        with anyio.fail_after(scaled(10)):
            async for delivery in sub:
                await delivery.ack()
                acked += 1
                break
        with anyio.move_on_after(quiet_s) as scope:
            async for delivery in sub:
                await delivery.ack()
                acked += 1
                scope.deadline = anyio.current_time() + quiet_s
    finally:
        await sub.close()
    return acked


def human_graph() -> dict[str, Any]:
    return {
        "name": "ask",
        "agent": "assistant",
        "entry": "prep",
        "nodes": [
            {"id": "prep", "type": "agent", "prompt": "Prepare {{input}}", "next": "ask"},
            {"id": "ask", "type": "human", "ask": "Go on?", "next": "finish"},
            {"id": "finish", "type": "agent", "prompt": "Finish with {{ask}}"},
        ],
    }


# -- the index ------------------------------------------------------------------------


async def test_the_index_holds_the_runs_in_flight_from_start_to_end(mesh: Mesh) -> None:
    await store(mesh, human_graph())
    runs = Runs(mesh)
    model = ScriptedModel(
        [{"node": "prep", "text": "plan"}, {"node": "finish", "delay_ms": 500, "text": "ok"}]
    )
    started = await runs.start("assistant", "ask", "x")
    assert await listed(mesh, started.run_id)  # started, not yet served
    async with hosting(mesh, model):
        parked = await settle(runs, started.run_id)
        assert parked.status == "waiting_human"
        assert not await listed(mesh, started.run_id)
        await runs.resume(started.run_id, "yes", by=Human("ana"))

        async def running() -> bool:
            rec = await runs.get(started.run_id)
            return "finish" in rec.attempts

        await eventually(running)
        assert await listed(mesh, started.run_id)  # resumed: in flight again
        done = await settle(runs, started.run_id, since=parked)
    assert done.status == "done"
    assert not await listed(mesh, started.run_id)
    assert await all_listed(mesh) == set()


async def test_a_cancelled_or_retried_run_leaves_or_rejoins_the_index(mesh: Mesh) -> None:
    await store(mesh, agent_chain("two", ["one", "two"]))
    runs = Runs(mesh)
    cancelled = await runs.start("assistant", "two", "x")
    kept = await runs.start("assistant", "two", "y")
    assert await all_listed(mesh) == {cancelled.run_id, kept.run_id}
    await runs.cancel(cancelled.run_id, by=Human("ana"))
    assert await all_listed(mesh) == {kept.run_id}
    failing = ScriptedModel([{"node": "one", "error": "boom"}])
    async with hosting(mesh, failing):
        failed = await settle(runs, kept.run_id)
    assert failed.status == "failed"
    assert await all_listed(mesh) == set()
    await runs.retry(kept.run_id, by=Human("ana"))
    assert await all_listed(mesh) == {kept.run_id}


# -- takeover -------------------------------------------------------------------------


async def test_a_claim_whose_wake_was_acked_is_continued_by_the_partitions_next_holder(
    mesh: Mesh,
) -> None:
    await store(mesh, agent_chain("three", ["first", "second", "third"]))
    runs = Runs(mesh)
    started = await runs.start("assistant", "three", "x")
    wake = await take_and_ack(mesh, started.run_id)
    rec = await runs.get(started.run_id)
    assert rec.attempts["first"].wake == wake  # claimed for a message that is gone
    model = ScriptedModel([{"node": n, "text": n} for n in ("first", "second", "third")])
    async with leased(mesh, model):
        done = await settle(runs, started.run_id)
    assert done.status == "done" and done.visits == {"first": 1, "second": 1, "third": 1}
    assert [c.context.node for c in model.calls] == ["first", "second", "third"]
    await runs.verify(started.run_id)


async def die_during_second(
    mesh: Mesh, runs: Runs, host: str | None = None
) -> tuple[RunRecord, str]:
    """Start a run on a leased holder that is cut off while ``second`` runs."""
    model = ScriptedModel(
        [{"node": "first", "text": "one"}, {"node": "second", "delay_ms": 60_000, "text": "x"}]
    )
    async with leased(mesh, model, drain_timeout_s=0.01, host=host) as holder:
        started = await runs.start("assistant", "three", "x")

        async def second() -> RunRecord | None:
            rec = await runs.get(started.run_id)
            return rec if "second" in rec.attempts else None

        rec = await eventually(second)
        assert rec.attempts["second"].host == holder.host
    return rec, holder.host


@pytest.mark.parametrize(
    ("wake", "next_holder"),
    [
        ("acked", "another"),
        ("comes-back", "another"),
        ("acked", "restarted"),
        ("comes-back", "restarted"),
    ],
)
async def test_a_dead_holders_claim_is_run_once_by_the_next_holder(
    mesh: Mesh, wake: str, next_holder: str
) -> None:
    # "restarted": the next holder has the dead one's id, as a host Ray restarts does.
    await store(mesh, agent_chain("three", ["first", "second", "third"]))
    runs = Runs(mesh)
    same = "ray:plait/host-0" if next_holder == "restarted" else None
    rec, dead = await die_during_second(mesh, runs, host=same)
    if wake == "acked":
        wake_id = rec.attempts["second"].wake
        assert await take_and_ack(mesh, rec.run_id, wake_id) == wake_id
    # With its wake back (after the visibility timeout) while the takeover's visit
    # runs, the two must not both run it.
    model = ScriptedModel(
        [{"node": "second", "delay_ms": 800, "text": "two"}, {"node": "third", "text": "3"}]
    )
    async with leased(mesh, model, host=same) as holder:
        done = await settle(runs, rec.run_id)
    assert done.status == "done" and done.visits == {"first": 1, "second": 1, "third": 1}
    assert [c.context.node for c in model.calls] == ["second", "third"]
    assert done.usage.retries == 1
    events = await read_events(mesh, rec.run_id)
    committed = [(e.node, e.actor) for e in events if e.type == "node.committed"]
    assert committed == [("first", dead), ("second", holder.host), ("third", holder.host)]
    await runs.verify(rec.run_id)


async def test_each_of_a_dead_holders_fan_out_claims_is_taken_over_once(mesh: Mesh) -> None:
    """Three instances in flight, their wakes all gone: one takeover wake per run
    takes one claim and hands the next to another."""
    await store(mesh, EXAMPLES / "fan_out_map.json")
    runs = Runs(mesh)
    urls = '{"urls": ["https://a.example", "https://b.example", "https://c.example"]}'
    slow = ScriptedModel(
        [{"node": "researcher", "text": urls}, {"node": "fetcher", "delay_ms": 60_000}]
    )
    async with leased(mesh, slow, drain_timeout_s=0.01) as holder:
        started = await runs.start("assistant", "fan-out-map", "x")

        async def fetching() -> RunRecord | None:
            rec = await runs.get(started.run_id)
            fetchers = [a for a in rec.attempts.values() if a.node.startswith("fetcher[")]
            return rec if len(fetchers) == 3 else None

        rec = await eventually(fetching)
        assert {a.host for a in rec.attempts.values()} == {holder.host}
    assert await ack_all(mesh, started.run_id) >= 3
    quick = ScriptedModel([{"node": "fetcher", "text": "page"}])
    async with leased(mesh, quick):
        done = await settle(runs, started.run_id)
    assert done.status == "done", done.error
    fetched = sorted(c.context.instance or "" for c in quick.calls)
    assert fetched == ["fetcher[0]", "fetcher[1]", "fetcher[2]"]
    events = await read_events(mesh, started.run_id)
    committed = [e.node for e in events if e.type == "node.committed"]
    assert sorted(n for n in committed if n and n.startswith("fetcher[")) == fetched
    await runs.verify(started.run_id)


# -- never per transition -------------------------------------------------------------


@contextmanager
def traced() -> Iterator[list[str]]:
    """The SQL statements run by SQLite connections opened in the block."""
    statements: list[str] = []
    connect = sqlite3.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    sqlite3.connect = tracing  # type: ignore[assignment]
    try:
        yield statements
    finally:
        sqlite3.connect = connect


async def test_the_index_is_written_on_listing_changes_only(tmp_path: Path) -> None:
    steps = [f"s{i}" for i in range(12)]
    with traced() as statements:
        async with open_mesh(f"sqlite:///{tmp_path / 'mesh.db'}") as mesh:
            await store(mesh, agent_chain("long", steps))
            runs = Runs(mesh)
            model = ScriptedModel([{"node": n, "text": n} for n in steps])
            async with hosting(mesh, model):
                started = await runs.start("assistant", "long", "x")
                done = await settle(runs, started.run_id)
    assert done.status == "done" and len(done.visits) == len(steps)
    live = [s for s in statements if "runlive/" in s and not s.lstrip().startswith("SELECT")]
    # One put at the start, one delete at the end: none for the 12 transitions between.
    assert len(live) == 2, live
