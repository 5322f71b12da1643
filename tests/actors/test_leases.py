"""Partitions and leases: the count is fixed per mesh, runtimes split the partitions
fairly, a joiner gets its share, a leaver's partitions move, and a runtime that lost its
partition commits nothing (its acks are fenced by the epoch)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio
import pytest

from plait.actors import LeasedRuntime, load_partitions, partition_of
from plait.actors.leases import (
    EPOCH_PREFIX,
    LEASE_PREFIX,
    LeaseKeeper,
    PartitionLease,
    read_leases,
)
from plait.actors.partitions import mailbox_of, partition_of_topic
from plait.errors import PartitionCountMismatch
from plait.mesh import Mesh
from plait.mesh._base import now_ms
from tests._support.timing import scaled

from .conftest import LEASE_S
from .kinds import BEHAVE, EFFECT_PREFIX, KIND, LogReader

pytestmark = pytest.mark.anyio

COUNT = 8


def leased(mesh: Mesh, host: str) -> LeasedRuntime:
    return LeasedRuntime(
        mesh, host=host, lease_s=LEASE_S, partitions=COUNT, handlers={KIND: BEHAVE},
        visibility_timeout_ms=300, drain_timeout_s=2.0,
    )  # fmt: skip


async def until_split(runtimes: Sequence[LeasedRuntime], sizes: list[int]) -> None:
    with anyio.fail_after(scaled(10)):
        while True:
            held = [rt.serving for rt in runtimes]
            union = set().union(*held)
            if sorted(len(h) for h in held) == sizes and len(union) == COUNT:
                return
            await anyio.sleep(0.05)


async def test_the_partition_count_is_fixed_per_mesh(mesh: Mesh) -> None:
    assert await load_partitions(mesh, COUNT) == COUNT
    with pytest.raises(PartitionCountMismatch, match="has 8 mailbox partitions, not 16"):
        await load_partitions(mesh, 16)
    assert await load_partitions(mesh) == COUNT
    topic = mailbox_of(mesh, "run:grun_1")
    assert topic == f"actors.mailbox.{{{partition_of('run:grun_1', COUNT)}}}"
    assert partition_of_topic(topic) == partition_of("run:grun_1__child.1", COUNT)


async def test_runtimes_split_a_joiner_gets_its_share_a_leaver_is_replaced(mesh: Mesh) -> None:
    one, two, three = leased(mesh, "a"), leased(mesh, "b"), leased(mesh, "c")
    async with one, two:
        await until_split([one, two], [4, 4])
        assert one.serving.isdisjoint(two.serving)
        async with three:
            await until_split([one, two, three], [2, 3, 3])
        await until_split([one, two], [4, 4])


async def test_a_runtime_that_lost_its_partition_commits_nothing(mesh: Mesh) -> None:
    log = LogReader(mesh)
    try:
        async with leased(mesh, "a") as rt:
            await rt.create("f", KIND)
            await until_split([rt], [COUNT])
            # Another runtime took the partition (its epoch moved): this one is fenced.
            await mesh.put(EPOCH_PREFIX + str(partition_of("f", COUNT)), {"holder": "b"})
            await rt.tell("f", {"n": "fenced", "ack_then_raise": True})
            await log.count("start", 1)
        # Leaving drained the handler: its transaction was tried and refused, not cut short.
        assert await mesh.get(EFFECT_PREFIX + "f") is None
    finally:
        await log.close()


async def test_leaving_releases_a_lease_whose_take_the_keeper_never_saw(mesh: Mesh) -> None:
    # A beat cancelled by the stop while its take was on the wire: the take landed, the
    # keeper never learned of it. Leaving releases it anyway, not at its expiry, and
    # leaves another runtime's lease alone.
    count = await load_partitions(mesh)
    keeper = LeaseKeeper(mesh, "host-a", count, lease_s=LEASE_S, in_flight=lambda _: 0)
    until = now_ms() + 60_000
    for n, holder in ((0, "host-a"), (1, "host-b")):
        lease = PartitionLease(holder=holder, epoch=7, expires_ms=until).model_dump()
        await mesh.put(LEASE_PREFIX + str(n), lease)
    assert keeper.held == {}
    await keeper.leave()
    holders = {n: lease.holder for n, (lease, _) in (await read_leases(mesh)).items()}
    assert holders == {0: None, 1: "host-b"}


async def test_a_worker_whose_clock_runs_ahead_takes_no_live_lease(
    mesh: Mesh, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Expiries are judged by the mesh's clock: a worker whose own clock runs a minute
    # ahead must not find the leases of a live holder expired and take them (its
    # handlers would run what the holder is running).
    count = await load_partitions(mesh, COUNT)
    lease_s = 30.0  # under the skew, so judging by the worker's clock would take them
    holder = LeaseKeeper(mesh, "host-a", count, lease_s=lease_s, in_flight=lambda _: 0)
    await holder.beat()
    assert len(holder.held) == COUNT
    true_ns = time.time_ns
    if backend != "redis":
        # A memory or SQLite mesh lives on its workers' one host, and tells that host's
        # time; here it stands for a mesh whose clock is right while this worker's is not.
        async def mesh_clock() -> int:
            return true_ns() // 1_000_000

        monkeypatch.setattr(mesh, "now_ms", mesh_clock)
    ahead_ns = 60 * 10**9
    monkeypatch.setattr(time, "time_ns", lambda: true_ns() + ahead_ns)
    monkeypatch.setattr(time, "time", lambda: (true_ns() + ahead_ns) / 1e9)
    ahead = LeaseKeeper(mesh, "host-b", count, lease_s=lease_s, in_flight=lambda _: 0)
    await ahead.beat()
    assert ahead.held == {}
    holders = {n: lease.holder for n, (lease, _) in (await read_leases(mesh)).items()}
    assert holders == dict.fromkeys(range(COUNT), "host-a")
    # Both are members by the mesh's clock: the holder gives the joiner its share.
    await holder.beat()
    await ahead.beat()
    assert len(ahead.held) == len(holder.held) == COUNT // 2
    assert ahead.held.keys().isdisjoint(holder.held)


async def test_an_avoided_partition_moves_to_a_member_that_does_not_avoid_it(
    mesh: Mesh,
) -> None:
    # A member asked to avoid a partition releases it and the other member takes it,
    # past its share, and keeps it (it releases another to even the shares). One both
    # avoid stays served: neither hands it to the other.
    count = await load_partitions(mesh, COUNT)
    a = LeaseKeeper(mesh, "host-a", count, lease_s=LEASE_S, in_flight=lambda _: 0)
    b = LeaseKeeper(mesh, "host-b", count, lease_s=LEASE_S, in_flight=lambda _: 0)
    await a.beat()
    await b.beat()
    await a.beat()  # over its share now: releases half
    await b.beat()
    mine = set(a.held)
    assert len(mine) == COUNT // 2 and len(b.held) == COUNT // 2
    avoid = min(mine)
    for _ in range(3):
        await a.beat({avoid})
        await b.beat()
    assert avoid in b.held and avoid not in a.held
    assert len(a.held) == len(b.held) == COUNT // 2  # shares even again, the avoided kept
    # Both avoid one partition each holds: nothing moves.
    theirs = min(b.held)
    for _ in range(3):
        await a.beat({avoid, min(a.held)})
        await b.beat({avoid, min(a.held)})
    assert avoid in b.held and theirs in b.held
    assert set(a.held) | set(b.held) == set(range(COUNT))
