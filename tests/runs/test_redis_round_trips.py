"""One run at a time on Redis: each transition costs one round trip.

A transition's commit takes the next node's wake in the same script (the mesh's take
op), so a running run never reads its next claim back. Counted on the client: every
request redis-py writes to a socket in this process is one round trip (a pipeline is
one). A request is the run's own when the code sending it is the runs package (its
commits, its owner's activation); the rest is the process's timers (the subscription's
polls and blocking reads, the topic router's refresh), which cost time, not
transitions. Two runs, a short and a long one, are counted: the long one's extra
transitions may cost at most one round trip each.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import pytest
import redis.asyncio.connection as redis_connection

from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.runs import RunRecord, Runs, serve
from plait.runs.store import RunStore
from tests._support.meshes import REDIS_URL, drop_redis_prefix, redis_available
from tests._support.timing import scaled


class Ends(RunStore):
    """The owner's record cache, which also tells when a run ends: waiting for a run
    this way sends nothing to Redis."""

    def __init__(self, mesh: Mesh) -> None:
        super().__init__(mesh)
        self.ended: dict[str, anyio.Event] = {}
        self.last: dict[str, RunRecord] = {}

    def remember(self, rec: RunRecord, version: int) -> None:
        super().remember(rec, version)
        if rec.terminal:
            self.last[rec.run_id] = rec
            self.ended.setdefault(rec.run_id, anyio.Event()).set()

    async def wait(self, run_id: str) -> RunRecord:
        with anyio.fail_after(scaled(60)):
            await self.ended.setdefault(run_id, anyio.Event()).wait()
        return self.last[run_id]


pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not redis_available(), reason="Redis is not running"),
]

LOOP = {
    "name": "loop", "entry": "draft", "budget": {"steps": 100},
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft {{input}}. {{verify?}}",
         "next": "verify"},
        {"id": "verify", "type": "verifier", "prompt": "Review: {{draft}}",
         "verdicts": {"pass": "publish", "fail": "draft"}},
        {"id": "publish", "type": "agent", "prompt": "Publish {{draft}}"},
    ],
}  # fmt: skip


def model(fails: int) -> ScriptedModel:
    return ScriptedModel(
        [
            {"node": "verify", "visit": fails + 1, "text": "Good now.\npass"},
            {"node": "verify", "text": "Needs a source.\nfail"},
            {"text": "A draft."},
        ]
    )


class Requests:
    """Counts the requests redis-py sends in this process: the runs package's, the rest."""

    def __init__(self) -> None:
        self.run = 0
        self.other = 0

    @staticmethod
    def _from_runs() -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if "/plait/runs/" in frame.f_code.co_filename:
                return True
            frame = frame.f_back  # type: ignore[assignment]
        return False

    @contextmanager
    def counting(self) -> Iterator[None]:
        cls = redis_connection.AbstractConnection
        send = cls.send_packed_command

        async def counted(conn: Any, command: Any, check_health: bool = True) -> None:
            if self._from_runs():
                self.run += 1
            else:
                self.other += 1
            await send(conn, command, check_health)

        cls.send_packed_command = counted  # type: ignore[method-assign]
        try:
            yield
        finally:
            cls.send_packed_command = send  # type: ignore[method-assign]


@asynccontextmanager
async def redis_mesh() -> AsyncIterator[Mesh]:
    prefix = f"plait-test-rt-{uuid.uuid4().hex[:10]}:"
    try:
        async with open_mesh(f"{REDIS_URL}?prefix={prefix}") as mesh:
            yield mesh
    finally:
        drop_redis_prefix(prefix)


async def counted_run(fails: int) -> tuple[RunRecord, Requests]:
    """A run of the loop with ``fails`` failed verdicts, after one to warm the caches."""
    async with redis_mesh() as mesh:
        await import_graph(mesh, load_graph(LOOP))
        ends = Ends(mesh)
        async with serve(mesh, model=model(fails), store=ends, beat=False):
            runs = Runs(mesh)
            warm = await runs.start("assistant", "loop", "x")
            await ends.wait(warm.run_id)
            counter = Requests()
            started = await runs.start("assistant", "loop", "x")
            with counter.counting():
                rec = await ends.wait(started.run_id)
    assert rec.status == "done", rec
    return rec, counter


async def test_a_transition_costs_one_round_trip() -> None:
    short, short_requests = await counted_run(2)
    long, long_requests = await counted_run(30)
    transitions = sum(long.visits.values()) - sum(short.visits.values())
    assert transitions == 56
    extra = long_requests.run - short_requests.run
    assert extra <= transitions, (extra, transitions, short_requests.run, long_requests.run)
    # and a whole run costs one request per transition, its commit, and one more: its
    # owner's read of the record when the run's first wake arrives (the run was started
    # by another writer, so the owner has not seen it)
    for rec, requests in ((short, short_requests), (long, long_requests)):
        assert requests.run <= sum(rec.visits.values()) + 1, (requests.run, rec.visits)
