"""Live channels, held against every backend: offsets, the kept window, watchers woken
without polling, and a watcher in another process."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.mesh import LiveChannels, Mesh, open_mesh
from plait.mesh._live import READ_LIMIT, LiveItem, LiveSlice
from tests._support.meshes import LIVE_BACKENDS, make_url_factory
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio


def live_of(mesh: Mesh) -> LiveChannels:
    live = mesh.live
    assert live is not None
    return live


@pytest.fixture(params=LIVE_BACKENDS)
def mesh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """This test's mesh URL, once per backend with live channels."""
    url, cleanup = make_url_factory(request.param, tmp_path)
    try:
        yield url()
    finally:
        cleanup()


async def test_offsets_count_from_one_and_reads_resume_after_an_offset(mesh: Mesh) -> None:
    live = live_of(mesh)
    assert (await live.read("c")).last == 0
    assert await live.append("c", [{"t": "a"}, {"t": "b"}], keep_bytes=10_000) == 2
    assert await live.append("c", ["c"], keep_bytes=10_000) == 3
    whole = await live.read("c")
    assert [(i.offset, i.data) for i in whole.items] == [(1, {"t": "a"}), (2, {"t": "b"}), (3, "c")]
    assert (whole.first, whole.last) == (1, 3)
    after = await live.read("c", 2)
    assert [i.offset for i in after.items] == [3]
    assert [i.offset for i in (await live.read("c", 0, limit=2)).items] == [1, 2]
    assert (await live.read("c", 3)).items == []


async def test_a_channel_keeps_its_last_bytes_and_says_what_it_dropped(mesh: Mesh) -> None:
    live = live_of(mesh)
    for n in range(100):
        await live.append("c", ["x" * 98 + f"{n:02d}"], keep_bytes=1_000)
    kept = await live.read("c")
    assert kept.last == 100
    assert 90 <= kept.first <= 92  # about 1000 bytes of 102-byte items
    assert [i.offset for i in kept.items] == list(range(kept.first, 101))
    assert kept.items[-1].data.endswith("99")
    # a reader behind the window gets what is kept, and sees the gap from first
    behind = await live.read("c", 10)
    assert behind.items[0].offset == kept.first
    # the newest item stays, however large
    await live.append("c", ["y" * 5_000], keep_bytes=1_000)
    assert [i.offset for i in (await live.read("c")).items] == [101]


async def test_channels_are_apart_and_drop_forgets(mesh: Mesh) -> None:
    live = live_of(mesh)
    await live.append("a", [1], keep_bytes=1_000)
    await live.append("b", [2, 3], keep_bytes=1_000)
    assert [i.data for i in (await live.read("a")).items] == [1]
    await live.drop("b")
    assert (await live.read("b")).last == 0
    assert await live.append("b", [4], keep_bytes=1_000) == 1


async def test_a_watch_marks_the_channel_watched_and_wakes_on_append(mesh: Mesh) -> None:
    live = live_of(mesh)
    assert not live.watched("c")
    async with live.watch("c") as watch:
        deadline = asyncio.get_running_loop().time() + scaled(5)
        while not live.watched("c"):  # Redis learns it over pub/sub
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        assert not live.watched("other")
        waiting = asyncio.create_task(watch.next(0, scaled(10)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await live.append("c", ["hello"], keep_bytes=1_000)
        found = await waiting
        assert [i.data for i in found.items] == ["hello"]
        nothing = await watch.next(1, 0.05)
        assert nothing.items == [] and nothing.last == 1
    deadline = asyncio.get_running_loop().time() + scaled(5)
    while live.watched("c"):
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)


async def test_watches_in_one_process_share_one_read_per_growth(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = live_of(mesh)
    await live.append("c", list(range(5)), keep_bytes=100_000)
    async with contextlib.AsyncExitStack() as stack:
        watches = [await stack.enter_async_context(live.watch("c")) for _ in range(20)]
        for watch in watches:  # each watch's first read is a fresh one
            assert [i.data for i in (await watch.next(5, 0)).items] == []
        deadline = asyncio.get_running_loop().time() + scaled(5)
        while not live.watched("c"):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        reads: list[int] = []
        real = live.read

        async def counted(channel: str, after: int = 0, *, limit: int = READ_LIMIT) -> LiveSlice:
            reads.append(after)
            return await real(channel, after, limit=limit)

        monkeypatch.setattr(live, "read", counted)
        waiting = [asyncio.create_task(watch.next(5, scaled(10))) for watch in watches]
        await asyncio.sleep(0.05)  # every watch waits on its wake-up
        await live.append("c", ["x", "y"], keep_bytes=100_000)
        found = await asyncio.gather(*waiting)
        assert all([(i.offset, i.data) for i in f.items] == [(6, "x"), (7, "y")] for f in found)
        # one read for twenty watches; none where the append's wake-up carried its
        # items (Redis), as the watches held what came before
        assert reads == ([] if mesh.url.startswith("redis") else [5])
        # a watch behind what they share reads for itself
        behind = await watches[0].next(0, 0)
        assert [i.data for i in behind.items] == [0, 1, 2, 3, 4, "x", "y"]
        assert reads[-1:] == [0]
        # a channel dropped and begun again: the watches see its end go back, then it
        await live.drop("c")
        await live.append("c", ["new"], keep_bytes=100_000)
        again = await watches[1].next(7, scaled(10))
        assert again.items == [] and again.last == 1
        assert [i.data for i in (await watches[1].next(0, scaled(10))).items] == ["new"]
        assert [i.data for i in (await watches[2].next(0, scaled(10))).items] == ["new"]


async def test_a_tail_takes_pushed_items_only_when_they_follow_what_it_holds(
    mesh: Mesh,
) -> None:
    live = live_of(mesh)
    await live.append("c", [0, 1], keep_bytes=100_000)
    async with live.watch("c") as watch:
        assert [i.data for i in (await watch.next(0, 0)).items] == [0, 1]
        tail = watch._tail
        # what it holds already is dropped, what follows is taken
        assert tail.offer([LiveItem(2, 1), LiveItem(3, "a")])
        assert [(i.offset, i.data) for i in (await watch.next(2, 0)).items] == [(3, "a")]
        assert not tail.offer([LiveItem(5, "after a gap")])  # the watches read instead


WATCHER = textwrap.dedent(
    """
    import asyncio, json, sys

    from plait.mesh import open_mesh

    async def main(url: str) -> None:
        async with open_mesh(url) as mesh:
            async with mesh.live.watch("c") as watch:
                print("ready", flush=True)
                after, seen = 0, []
                while len(seen) < 50:
                    found = await watch.next(after, 60)
                    seen += [item.data for item in found.items]
                    after = found.last
                print(json.dumps(seen), flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.parametrize(
    "mesh_url",
    [
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
async def test_a_watcher_in_another_process_sees_every_item_in_order(mesh_url: str) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER, mesh_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        line = await asyncio.to_thread(watcher.stdout.readline)
        assert line == "ready\n", watcher.communicate()[1]
        async with open_mesh(mesh_url) as mesh:
            live = live_of(mesh)
            deadline = asyncio.get_running_loop().time() + scaled(10)
            while not live.watched("c"):
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
            for n in range(50):
                await live.append("c", [n], keep_bytes=100_000)
        out, err = await asyncio.to_thread(watcher.communicate, timeout=scaled(30))
        assert watcher.returncode == 0, err
        assert out.strip() == str(list(range(50)))
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
