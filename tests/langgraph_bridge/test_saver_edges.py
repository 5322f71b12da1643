"""PlaitSaver's edges: heads that move when their checkpoint goes, a missing head, and
bad input refused with one clear line."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from plait.errors import ConfigError
from plait.langgraph import PlaitSaver
from plait.mesh import Mesh, open_mesh

pytestmark = pytest.mark.anyio


async def _chain(saver: PlaitSaver, thread: str, runs: list[str]) -> list[str]:
    ids: list[str] = []
    for run in runs:
        config = generate_config(thread)
        if ids:
            config["configurable"]["checkpoint_id"] = ids[-1]
        checkpoint = generate_checkpoint()
        await saver.aput(config, checkpoint, generate_metadata(run_id=run), {})
        ids.append(checkpoint["id"])
    return ids


async def _latest_id(saver: PlaitSaver, thread: str) -> str | None:
    found = await saver.aget_tuple(generate_config(thread))
    return None if found is None else found.checkpoint["id"]


async def test_deleting_the_head_runs_moves_the_head_back(mesh: Mesh) -> None:
    saver = PlaitSaver(mesh)
    ids = await _chain(saver, "t", ["r1", "r2", "r3"])
    await saver.adelete_for_runs(["r3"])
    assert await _latest_id(saver, "t") == ids[1]
    head = await mesh.get(saver.layout.head("t", ""))
    assert head is not None and head.value["id"] == ids[1]
    await saver.adelete_for_runs(["r1", "r2"])
    assert await _latest_id(saver, "t") is None
    assert await mesh.get(saver.layout.head("t", "")) is None


async def test_a_missing_head_falls_back_to_the_newest_checkpoint(mesh: Mesh) -> None:
    saver = PlaitSaver(mesh)
    ids = await _chain(saver, "t", ["r1", "r2"])
    await mesh.delete(saver.layout.head("t", ""))
    assert await _latest_id(saver, "t") == ids[1]


async def test_prune_keeps_the_newest_and_its_head(mesh: Mesh) -> None:
    saver = PlaitSaver(mesh)
    ids = await _chain(saver, "t", ["r1", "r2", "r3"])
    await saver.aprune(["t"])
    assert [t.checkpoint["id"] async for t in saver.alist(generate_config("t"))] == [ids[2]]
    assert await _latest_id(saver, "t") == ids[2]
    with pytest.raises(ValueError, match="unknown prune strategy 'all'"):
        await saver.aprune(["t"], strategy="all")


async def test_prune_and_delete_for_runs_leave_no_writes_of_dropped_checkpoints(
    mesh: Mesh,
) -> None:
    saver = PlaitSaver(mesh)
    ids = await _chain(saver, "t", ["r1", "r2", "r3", "r4"])
    for checkpoint_id in ids:
        config = generate_config("t", checkpoint_id=checkpoint_id)
        await saver.aput_writes(config, [("a", checkpoint_id)], "task")
    await saver.adelete_for_runs(["r4"])
    await saver.aprune(["t"])
    left = {e.key async for e in mesh.scan(saver.layout.writes("t"))}
    assert left == {saver.layout.write("t", "", ids[2], "task", 0)}
    assert [e.key async for e in mesh.scan(saver.layout.runs("r4"))] == []
    assert [e.key async for e in mesh.scan(saver.layout.runs("r1"))] == []
    got = await saver.aget_tuple(generate_config("t"))
    assert got is not None and got.pending_writes == [("task", "a", ids[2])]


async def test_a_head_moved_by_another_saver_is_read_not_guessed(mesh: Mesh) -> None:
    mine, theirs = PlaitSaver(mesh), PlaitSaver(mesh)
    first = await _chain(mine, "t", ["r1"])
    assert await _latest_id(mine, "t") == first[0]
    config = generate_config("t", checkpoint_id=first[0])
    checkpoint = generate_checkpoint()
    await theirs.aput(config, checkpoint, generate_metadata(), {})
    assert await _latest_id(mine, "t") == checkpoint["id"]
    await theirs.adelete_thread("t")
    assert await _latest_id(mine, "t") is None


async def test_a_listing_with_limit_and_before_reads_one_namespace_newest_first(
    mesh: Mesh,
) -> None:
    saver = PlaitSaver(mesh)
    ids = await _chain(saver, "t", ["r1", "r2", "r3", "r4", "r5"])
    other = await _chain(saver, "u", ["r1"])
    config = generate_config("t")

    async def listed(**kwargs: object) -> list[str]:
        return [t.checkpoint["id"] async for t in saver.alist(config, **kwargs)]  # type: ignore[arg-type]

    assert await listed() == ids[::-1]
    assert await listed(limit=2) == [ids[4], ids[3]]
    assert await listed(limit=2, before=generate_config("t", checkpoint_id=ids[3])) == [
        ids[2],
        ids[1],
    ]
    assert await listed(limit=0) == []
    assert await listed(limit=1, filter={"run_id": "r2"}) == [ids[1]]

    for checkpoint_id in ids[:4]:  # the writes of a listing are read in one range
        written = generate_config("t", checkpoint_id=checkpoint_id)
        await saver.aput_writes(written, [("a", checkpoint_id), ("b", 1)], "task")
    await saver.aput_writes(generate_config("u", checkpoint_id=other[0]), [("a", "u")], "task")
    tuples = [t async for t in saver.alist(config, limit=4)]
    assert [t.pending_writes for t in tuples] == [
        [],
        *([("task", "a", checkpoint_id), ("task", "b", 1)] for checkpoint_id in ids[3:0:-1]),
    ]
    newest = generate_config("t", checkpoint_id=ids[4])
    await saver.aput_writes(newest, [("a", ids[4])], "task")
    tuples = [t async for t in saver.alist(config, limit=2, before=newest)]
    assert [t.pending_writes for t in tuples] == [
        [("task", "a", checkpoint_id), ("task", "b", 1)] for checkpoint_id in ids[3:1:-1]
    ]
    everything = [t.checkpoint["id"] async for t in saver.alist(None, limit=2)]
    assert everything == [other[0], ids[4]]


def test_a_saver_needs_the_loop_of_its_mesh() -> None:
    with pytest.raises(ConfigError, match="open_saver"):
        PlaitSaver(open_mesh("memory://"))


async def test_a_prefix_with_a_slash_is_refused(mesh: Mesh) -> None:
    with pytest.raises(ConfigError, match="without '/'"):
        PlaitSaver(mesh, prefix="a/b")
