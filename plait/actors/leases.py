"""Partition leases and membership: which runtime serves which mailbox partitions.

Keys (all under ``cluster/``):

- ``cluster/members/<host>`` (:class:`Member`): each leased runtime's heartbeat, renewed
  every :attr:`LeaseKeeper.beat_s` (a quarter of the lease); what it serves (``"all"``
  or ``"run"``, a foreground command), the partitions it holds and its messages in
  flight. A member whose ``expires_ms`` passed is gone.
- ``cluster/leases/<n>`` (:class:`PartitionLease`): partition ``n``'s holder, epoch and
  expiry, written by compare-and-swap only. Renewing rewrites it (same holder, same
  epoch); a holder that finds it moved has lost the partition.
- ``cluster/epochs/<n>``: written in the same transaction as every change of holder, so
  its *version* is the lease's epoch, the fencing token: a handler's commit checks it
  (:class:`~plait.actors.Fence`), and fails once another runtime took the partition.

Shares. Members that serve all runs split the P partitions: sorted by host id, member
``r`` of ``k`` holds ``⌊P/k⌋``, one more if ``r < P mod k``. A member serving one run
(a foreground command) holds only its run's partition, and only while no member
serving all runs is live. Each beat a member renews what it holds, stops reading what
is over its share and releases it once its messages in flight are done, and takes free
or expired partitions up to its share, so a joining member gets its share within two
beats of the others.

Avoided partitions. A member serving all runs may be told, each beat, of partitions it
should not serve (the run layer: runs there need a tool it lacks and another live
worker offers). It says so in its membership (``avoids``), releases them once idle and
does not take them; a member that does not avoid a partition others avoid takes it when
free even past its share, and keeps it when over its share (it releases others instead),
so the work reaches it without the shares swinging back. A partition every other live
member avoids too is not avoided (someone must serve it), so two members lacking each
other's tools do not hand one partition back and forth.

Time. Expiries (``expires_ms`` of leases and members) are written and judged by the
mesh's clock (:meth:`~plait.mesh.Mesh.now_ms`: the Redis server's ``TIME``, the one
host's clock of a SQLite mesh), read once a beat, never by a worker's own wall clock: a
worker whose clock runs a minute ahead would otherwise find every live lease expired
and take it, and its handlers would run what another worker is running. A worker whose
clock strays from the mesh's by more than a fifth of the lease is told in the log. A
holder judges its own lease by the monotonic clock from the start of its last renewal
and gives up at 80% of the lease, so it stops and drops its activations before anyone
may take over. A holder paused past that (SIGSTOP) finds on waking that it lost
everything; its commits in between are fenced by the epoch.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ValidationError

from plait.actors.partitions import partition_of
from plait.errors import PlaitError, VersionConflict
from plait.mesh import Entry, Mesh
from plait.mesh._base import now_ms

log = logging.getLogger("plait.actors")

DEFAULT_LEASE_S = 10.0
"""How long a partition lease lasts unrenewed: the takeover time after a crash."""

LEASE_PREFIX = "cluster/leases/"
EPOCH_PREFIX = "cluster/epochs/"
MEMBER_PREFIX = "cluster/members/"

MESH_KEYS = (LEASE_PREFIX, EPOCH_PREFIX, MEMBER_PREFIX)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

SAFETY = 0.8
"""The share of the lease its holder trusts itself to hold it without a renewal."""


class PartitionLease(BaseModel):
    """A partition's lease as stored.

    Attributes:
        holder: the holding runtime's host id (None: released).
        epoch: the fencing token, the version of the partition's epoch key.
        expires_ms: when the lease is over unless renewed (epoch milliseconds).
    """

    holder: str | None
    epoch: int
    expires_ms: int


class Member(BaseModel):
    """One leased runtime's heartbeat.

    Attributes:
        host: its host id.
        pid: its process id.
        serves: ``"all"`` runs, or one ``"run"`` (a foreground command).
        family: for ``"run"``, the actor family whose partition it serves.
        expires_ms: when it is gone unless it beats again.
        held: the partitions it holds.
        in_flight: its messages taken and not finished.
        avoids: the partitions it asks others to serve (see the module docstring).
    """

    host: str
    pid: int
    serves: Literal["all", "run"]
    family: str | None = None
    expires_ms: int
    held: list[int] = []
    in_flight: int = 0
    avoids: list[int] = []


@dataclass(slots=True)
class Held:
    """A lease this runtime holds: its epoch, its key's version, until when it is trusted."""

    epoch: int
    version: int
    trusted_until: float


def fair_share(count: int, hosts: list[str], host: str) -> int:
    """How many of ``count`` partitions ``host`` holds among ``hosts`` (sorted order)."""
    if host not in hosts:
        return 0
    rank = sorted(hosts).index(host)
    return count // len(hosts) + (1 if rank < count % len(hosts) else 0)


async def read_members(mesh: Mesh, now: int | None = None) -> list[Member]:
    """The live members of ``mesh`` at ``now`` (default: the mesh's clock now); a
    corrupt heartbeat is skipped."""
    if now is None:
        now = await mesh.now_ms()
    found: list[Member] = []
    async for entry in mesh.scan(MEMBER_PREFIX):
        try:
            member = Member.model_validate(entry.value)
        except ValidationError:
            continue
        if member.expires_ms > now:
            found.append(member)
    return found


async def read_leases(mesh: Mesh) -> dict[int, tuple[PartitionLease, int]]:
    """Every partition lease stored, with its key's version, by partition."""
    found: dict[int, tuple[PartitionLease, int]] = {}
    async for entry in mesh.scan(LEASE_PREFIX):
        n = entry.key[len(LEASE_PREFIX) :]
        if n.isdigit():
            found[int(n)] = (PartitionLease.model_validate(entry.value), entry.version)
    return found


class LeaseKeeper:
    """Holds one runtime's partition leases and its membership (see the module docstring).

    Args:
        mesh: the mesh.
        host: the runtime's host id.
        count: the mesh's partition count.
        lease_s: how long a lease lasts unrenewed.
        family: serve only this actor family's partition (a foreground command), and
            only while no member serving all is live; None serves a fair share.
        in_flight: the runtime's messages in flight in a partition (None: in total).
    """

    def __init__(
        self,
        mesh: Mesh,
        host: str,
        count: int,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        family: str | None = None,
        in_flight: Callable[[int | None], int],
    ) -> None:
        self.mesh = mesh
        self.host = host
        self.count = count
        self.lease_s = lease_s
        self.family = family
        self.in_flight = in_flight
        self.held: dict[int, Held] = {}
        self.releasing: set[int] = set()
        """Held partitions over this runtime's share: not read, released once idle."""
        self._mesh_ms = 0
        self._read_at = time.monotonic()
        self._strayed = False

    @property
    def beat_s(self) -> float:
        """How often this runtime beats (renews its membership and leases)."""
        return self.lease_s / 4

    def serving(self) -> set[int]:
        """The partitions to read now: held, trusted and not being released."""
        now = time.monotonic()
        return {n for n, h in self.held.items() if h.trusted_until > now} - self.releasing

    def trusted(self, partition: int) -> Held | None:
        """The lease on ``partition`` if this runtime holds it and may still trust it."""
        held = self.held.get(partition)
        return held if held is not None and held.trusted_until > time.monotonic() else None

    def expire(self) -> set[int]:
        """Forget leases no longer trusted (not renewed in time); the partitions lost."""
        now = time.monotonic()
        lost = {n for n, h in self.held.items() if h.trusted_until <= now}
        for n in lost:
            del self.held[n]
            self.releasing.discard(n)
        return lost

    async def _read_clock(self) -> None:
        """Read the mesh's clock (see the module docstring), and say if ours strays."""
        self._mesh_ms = await self.mesh.now_ms()
        self._read_at = time.monotonic()
        stray = now_ms() - self._mesh_ms
        strays = abs(stray) > self.lease_s * 1000 * (1 - SAFETY)
        if strays and not self._strayed:
            log.warning(
                "the clock of %s is %+.1f s off the mesh's: leases are judged by the "
                "mesh's clock, but fix this host's time (NTP)",
                self.host,
                stray / 1000,
            )
        self._strayed = strays

    def _mesh_now(self) -> int:
        """The mesh's time now: its clock as last read, plus the monotonic time since."""
        return self._mesh_ms + int((time.monotonic() - self._read_at) * 1000)

    def _lease(self, epoch: int) -> dict[str, object]:
        return PartitionLease(
            holder=self.host, epoch=epoch, expires_ms=self._mesh_now() + int(self.lease_s * 1000)
        ).model_dump()

    async def beat(self, avoid: set[int] | None = None) -> set[int]:
        """One heartbeat: membership, renewals, releases and takes; the partitions lost.

        ``avoid``: partitions this runtime should leave to others (see the module
        docstring); ignored by a member serving one run.
        """
        avoid = set() if avoid is None or self.family is not None else avoid
        lost = self.expire()
        await self._read_clock()
        await self.mesh.put(
            MEMBER_PREFIX + self.host,
            Member(
                host=self.host,
                pid=os.getpid(),
                serves="all" if self.family is None else "run",
                family=self.family,
                expires_ms=self._mesh_now() + int(self.lease_s * 1000),
                held=sorted(self.held),
                in_flight=self.in_flight(None),
                avoids=sorted(avoid),
            ).model_dump(),
        )
        members = await read_members(self.mesh, self._mesh_now())
        leases = await read_leases(self.mesh)
        for n, held in list(self.held.items()):
            if not await self._renew(n, held, leases.get(n)):
                del self.held[n]
                self.releasing.discard(n)
                lost.add(n)
        avoided, claimed = self._avoidance(members, avoid)
        wanted = self._wanted(members) - avoided
        share = self._share(members)
        keep = len(self.held) - len(self.releasing)
        for n in sorted(self.held, reverse=True):
            if n in self.releasing:
                continue
            if n not in wanted or (keep > share and n not in claimed):
                self.releasing.add(n)
                keep -= 1
        for n in sorted(self.releasing):
            if self.in_flight(n) == 0:
                await self._release(n)
        await self._take(members, leases, wanted)
        await self._take(members, leases, claimed - set(self.held), past_share=True)
        return lost

    def _avoidance(self, members: list[Member], avoid: set[int]) -> tuple[set[int], set[int]]:
        """The partitions this runtime avoids, and those it claims: avoided by another
        live member serving all runs and not by this one."""
        others = [m for m in members if m.serves == "all" and m.host != self.host]
        # One avoided by every other member too is served here: someone must serve it.
        avoided = {n for n in avoid if not all(n in m.avoids for m in others)}
        claimed = {n for m in others for n in m.avoids} - avoid if self.family is None else set()
        return avoided, claimed

    def _share(self, members: list[Member]) -> int:
        if self.family is not None:
            return 0 if any(m.serves == "all" for m in members) else 1
        return fair_share(self.count, [m.host for m in members if m.serves == "all"], self.host)

    def _wanted(self, members: list[Member]) -> set[int]:
        """Partitions this runtime would take if free: its own run's, or any."""
        if self.family is not None:
            if self._share(members) == 0:
                return set()
            return {partition_of(self.family, self.count)}
        return set(range(self.count))

    async def _renew(self, n: int, held: Held, found: tuple[PartitionLease, int] | None) -> bool:
        if found is None or found[0].holder != self.host or found[1] != held.version:
            return False
        started = time.monotonic()
        try:
            entry = await self.mesh.put(
                LEASE_PREFIX + str(n), self._lease(held.epoch), if_version=held.version
            )
        except VersionConflict:
            return False
        except PlaitError as exc:
            log.warning("cannot renew the lease on partition %d: %s", n, exc)
            return True  # kept until it is no longer trusted
        held.version = entry.version
        held.trusted_until = started + self.lease_s * SAFETY
        return True

    async def _release(self, n: int) -> None:
        held = self.held.pop(n)
        self.releasing.discard(n)
        await self._give_up(n, held.epoch, held.version)

    async def _give_up(self, n: int, epoch: int, version: int) -> None:
        released = PartitionLease(holder=None, epoch=epoch, expires_ms=0).model_dump()
        try:
            await self.mesh.put(LEASE_PREFIX + str(n), released, if_version=version)
        except PlaitError as exc:
            log.info("partition %d released by expiry: %s", n, exc)

    async def _take(
        self,
        members: list[Member],
        leases: dict[int, tuple[PartitionLease, int]],
        wanted: set[int],
        *,
        past_share: bool = False,
    ) -> None:
        now = self._mesh_now()
        share = self._share(members)
        for n in sorted(wanted):
            if len(self.held) >= share and not past_share:
                return
            found = leases.get(n)
            if n in self.held or (
                found is not None and found[0].holder is not None and found[0].expires_ms > now
            ):
                continue
            epoch = found[0].epoch if found is not None else 0
            started = time.monotonic()
            try:
                async with self.mesh.transact() as tx:
                    tx.put(
                        LEASE_PREFIX + str(n),
                        self._lease(epoch + 1),
                        if_version=found[1] if found else 0,
                    )
                    tx.put(EPOCH_PREFIX + str(n), {"holder": self.host}, if_version=epoch)
                result = await tx.commit()
            except VersionConflict:
                continue  # another member took it first
            entry: Entry = result.entries[LEASE_PREFIX + str(n)]
            self.held[n] = Held(epoch + 1, entry.version, started + self.lease_s * SAFETY)

    async def leave(self) -> None:
        """Release every lease and the membership (a runtime stopping cleanly).

        Also the leases the mesh says this host holds that this keeper never learned
        of: a beat cancelled by the stop while its take was on the wire may have landed
        it, and it would otherwise keep the partition from others until it expires.
        """
        for n in list(self.held):
            await self._release(n)
        try:
            unseen = [
                (n, lease.epoch, version)
                for n, (lease, version) in (await read_leases(self.mesh)).items()
                if lease.holder == self.host
            ]
        except PlaitError as exc:
            log.info("leases of %s not read again, left to expire: %s", self.host, exc)
            unseen = []
        for n, epoch, version in unseen:
            await self._give_up(n, epoch, version)
        try:
            await self.mesh.delete(MEMBER_PREFIX + self.host)
        except PlaitError as exc:
            log.info("membership of %s left to expire: %s", self.host, exc)


__all__ = [
    "DEFAULT_LEASE_S",
    "EPOCH_PREFIX",
    "LEASE_PREFIX",
    "MEMBER_PREFIX",
    "MESH_KEYS",
    "SAFETY",
    "Held",
    "LeaseKeeper",
    "Member",
    "PartitionLease",
    "fair_share",
    "read_leases",
    "read_members",
]
