"""A run's live channel: its models' replies stream to watchers as they come, the commit
that supersedes them follows, nothing is written while nobody watches, and a retry of
a visit streams as a new attempt after a restart marker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.mesh import Mesh
from plait.models.scripted import ScriptedModel
from plait.runs import Runs
from plait.runs.channel import LiveEvent, RunChannels, channel_of
from plait.runs.progress import Progress
from plait.runs.watch import follow_run
from tests._support.meshes import LIVE_BACKENDS, make_url_factory

from .helpers import agent_chain, hosting, settle, store

pytestmark = pytest.mark.anyio

TEXT = "".join(f"token{n} " for n in range(200))


def streaming_model(**rule: object) -> ScriptedModel:
    return ScriptedModel([{"node": "draft", "text": TEXT, "chunks": 200, **rule}, {"text": "fine"}])


async def collect(mesh: Mesh, run_id: str, after: int = 0) -> list[LiveEvent]:
    return [event async for event in follow_run(mesh, run_id, after=after)]


@pytest.fixture(params=LIVE_BACKENDS)
def mesh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """This test's mesh URL, once per backend with live channels."""
    url, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield url()
    finally:
        cleanup()


async def test_a_watcher_sees_every_chunk_in_order_then_the_commit(mesh: Mesh) -> None:
    await store(mesh, agent_chain("one", ["draft"]))
    runs = Runs(mesh)
    async with hosting(mesh, streaming_model(chunk_delay_ms=1)):
        rec = await runs.start("assistant", "one", "x")
        watching = asyncio.create_task(collect(mesh, rec.run_id))
        done = await settle(runs, rec.run_id)
        events = await asyncio.wait_for(watching, 30)
    assert done.status == "done"
    deltas = [e for e in events if e.kind == "delta" and e.node == "draft"]
    # A watcher that came while the draft streamed got the queued part first: all 200.
    assert len(deltas) == 200
    assert "".join(e.text or "" for e in deltas) == TEXT == await runs.output(done)
    assert [e.offset for e in events] == sorted(e.offset for e in events)
    kinds = [e.kind for e in events if e.node == "draft" or e.progress]
    assert kinds.index("attempt") < kinds.index("delta")
    committed = [e for e in events if e.progress and e.progress.node == "draft"]
    assert committed and committed[0].offset > deltas[-1].offset
    assert events[-1].ends and events[-1].progress is not None
    assert events[-1].progress.status == "done"
    attempt = next(e for e in events if e.kind == "attempt" and e.node == "draft")
    assert (attempt.attempt, attempt.restart) == (1, False)


async def test_watchers_in_one_process_share_each_event(mesh: Mesh) -> None:
    await store(mesh, agent_chain("one", ["draft"]))
    runs = Runs(mesh)
    async with hosting(mesh, streaming_model(chunk_delay_ms=1)):
        rec = await runs.start("assistant", "one", "x")
        watching = [asyncio.create_task(collect(mesh, rec.run_id)) for _ in range(3)]
        await settle(runs, rec.run_id)
        seen = await asyncio.wait_for(asyncio.gather(*watching), 30)
    first, *others = [[e for e in events if e.offset] for events in seen]
    assert len([e for e in first if e.kind == "delta"]) == 200
    for events in others:
        # the very same events: each item read and parsed once for all the watchers
        assert len(events) == len(first)
        assert all(a is b for a, b in zip(events, first, strict=True))


async def test_nothing_is_written_while_nobody_watches(mesh: Mesh) -> None:
    await store(mesh, agent_chain("two", ["draft", "check"]))
    runs = Runs(mesh)
    async with hosting(mesh, streaming_model()):
        rec = await runs.start("assistant", "two", "x")
        done = await settle(runs, rec.run_id)  # wait() watches: its channel is written
        assert done.status == "done"
        unwatched = await runs.start("assistant", "two", "y")
        for _ in range(200):
            got = await runs.get(unwatched.run_id)
            if got.terminal:
                break
            await asyncio.sleep(0.01)
    assert mesh.live is not None
    assert (await mesh.live.read(channel_of(rec.run_id))).last > 200
    assert (await mesh.live.read(channel_of(unwatched.run_id))).last == 0


async def test_a_settled_run_gives_its_kept_events_and_ends(mesh: Mesh) -> None:
    await store(mesh, agent_chain("one", ["draft"]))
    runs = Runs(mesh)
    async with hosting(mesh, streaming_model()):
        rec = await runs.start("assistant", "one", "x")
        await settle(runs, rec.run_id)
    events = await collect(mesh, rec.run_id)
    assert "".join(e.text or "" for e in events if e.kind == "delta") == TEXT
    assert events[-1].ends
    tail = await collect(mesh, rec.run_id, after=events[-2].offset)
    assert [e.offset for e in tail] == [events[-1].offset]


async def test_a_second_claim_of_a_visit_streams_as_a_restarted_attempt(mesh: Mesh) -> None:
    channels = RunChannels(mesh, keep_bytes=1 << 20)
    assert mesh.live is not None
    async with mesh.live.watch(channel_of("grun_x")):
        channels.delta("grun_x", "draft", 1, "aaa", "Hel")
        channels.delta("grun_x", "draft", 1, "aaa", "lo")
        await asyncio.sleep(0.05)
        # another process (no memory of the first claim) takes the visit over
        other = RunChannels(mesh, keep_bytes=1 << 20)
        other.delta("grun_x", "draft", 1, "bbb", "Hello again")
        other.progress("grun_x", Progress(status="done", audit_seq=3, node="draft", visit=1))
        for _ in range(100):
            found = await mesh.live.read(channel_of("grun_x"))
            if found.last >= 6:
                break
            await asyncio.sleep(0.01)
    parsed = [LiveEvent.parse(i.offset, i.data) for i in found.items]
    shown = [
        (e.kind, e.attempt, e.restart, e.text)
        for e in parsed
        if e is not None and e.kind != "progress"
    ]
    assert shown == [
        ("attempt", 1, False, None),
        ("delta", 1, False, "Hel"),
        ("delta", 1, False, "lo"),
        ("attempt", 2, True, None),
        ("delta", 2, False, "Hello again"),
    ]
