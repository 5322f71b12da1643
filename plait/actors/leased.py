"""The leased runtime: a local runtime that serves only the mailbox partitions it leases.

:class:`LeasedRuntime` is :class:`~plait.actors.LocalRuntime` (asyncio tasks in this
process) reading only the partitions its :class:`~plait.actors.leases.LeaseKeeper`
holds, so an actor is active in at most one process of the mesh at a time
(``single_activation``): a live runtime's messages are never taken by another, however
short that one's visibility timeout. Every message's ack is fenced by its partition's
epoch (:class:`~plait.actors.Fence`): a handler's commit that acks it fails once
another runtime took the partition, so a runtime paused past its lease (SIGSTOP)
commits nothing when it continues; it drops those activations and rejoins.

A foreground ``graph run`` or ``resume`` with no worker serving runs one of these with
``family`` set to its run's owner: it leases only its run's partition (a run and its
child runs share one, see :mod:`plait.actors.partitions`), and only while no runtime
serving every run is live; it hands back other actors' mail in that partition
(``accepts``). A worker that starts while it runs makes it release the partition after
its messages in flight, and the worker continues the run (the foreground watches).
Two foregrounds whose runs share a partition take turns: one waits for the other.

Partitions gained. Whatever actors of a partition were doing when its last holder died
may have no message left to come back. Services that implement
:class:`GainsPartitions` are told each time this runtime takes partitions it did not
hold (after an expiry, a release or on its first beat), once it reads them, and find
that work themselves (the run layer wakes each run in flight there).

Partitions avoided. Services that implement :class:`AvoidsPartitions` are asked, each
beat, which partitions this runtime should leave to another (the run layer: runs there
need a tool only another live worker offers); see :mod:`plait.actors.leases`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, runtime_checkable

import anyio

from plait.actors._base import ActorContext, Fence, Mail
from plait.actors.leases import DEFAULT_LEASE_S, EPOCH_PREFIX, LeaseKeeper
from plait.actors.local import LocalRuntime, _Activation
from plait.actors.partitions import (
    load_partitions,
    mailbox_topic,
    partition_of,
    partition_of_topic,
    partitions,
)
from plait.errors import PlaitError
from plait.ids import ActorId
from plait.mesh import Delivery, Mesh

log = logging.getLogger("plait.actors")


@runtime_checkable
class GainsPartitions(Protocol):
    """Services told of the partitions their :class:`LeasedRuntime` takes over."""

    async def partitions_gained(self, runtime: LeasedRuntime, gained: set[int]) -> None:
        """Called once per beat that took ``gained`` (not held before), after the
        runtime started reading them; raising a :class:`~plait.errors.PlaitError`
        calls it again at the next beat with those of them still served."""


@runtime_checkable
class AvoidsPartitions(Protocol):
    """Services that tell their :class:`LeasedRuntime` which partitions to leave to others."""

    async def partitions_to_avoid(self, runtime: LeasedRuntime, count: int) -> set[int]:
        """The partitions (of ``count``) another runtime should serve, asked once a beat;
        raising a :class:`~plait.errors.PlaitError` avoids none this beat."""


class LeasedRuntime(LocalRuntime):
    """A :class:`~plait.actors.LocalRuntime` serving only the partitions it leases.

    Args:
        mesh: the mesh.
        lease_s: how long a lease lasts unrenewed (the takeover time after a crash).
        partitions: the mesh's partition count, fixed on its first use (None: the
            stored count, or the default on a new mesh).
        family: serve only this actor family's partition (a foreground command).
        on_change: called with the partitions served whenever they change.
        **options: as for :class:`~plait.actors.LocalRuntime`.
    """

    single_activation: ClassVar[bool] = True

    def __init__(
        self,
        mesh: Mesh,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        partitions: int | None = None,
        family: str | None = None,
        on_change: Callable[[set[int], int], None] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(mesh, **options)
        self.lease_s = lease_s
        self.partitions = partitions
        self.family = family
        self.on_change = on_change
        self.keeper: LeaseKeeper | None = None
        self._serving: set[int] = set()
        self._scopes: dict[int, tuple[int, anyio.CancelScope]] = {}
        """The cancel scope of each handler running, by its delivery, with its partition."""
        self._gained: set[int] = set()
        """Partitions taken that the services were not yet told of (GainsPartitions)."""
        self._telling = False

    @property
    def serving(self) -> set[int]:
        """The partitions this runtime reads now."""
        return set(self._serving)

    async def start(self) -> None:
        """Start beating: take a share of the partitions, and serve them."""
        count = await load_partitions(self.mesh, self.partitions)
        self.keeper = LeaseKeeper(
            self.mesh,
            self.host,
            count,
            lease_s=self.lease_s,
            family=self.family,
            in_flight=self._in_flight_in,
        )
        await super().start()
        assert self._tg is not None
        self._tg.start_soon(self._keep_leases)

    def _first_topics(self, count: int) -> list[str]:
        return []  # partitions are read as they are leased

    async def close(self) -> None:
        """Drain as a local runtime does, then release every lease."""
        if self._tg is None:
            return
        await super().close()
        if self.keeper is not None:
            with anyio.CancelScope(shield=True):
                await self.keeper.leave()
        self._serving = set()

    def _in_flight_in(self, partition: int | None) -> int:
        if partition is None:
            return len(self._in_flight)
        return sum(1 for d in self._in_flight.values() if partition_of_topic(d.topic) == partition)

    async def _keep_leases(self) -> None:
        assert self.keeper is not None
        keeper = self.keeper
        while True:
            before = set(keeper.held)
            try:
                lost = await keeper.beat(await self._to_avoid(keeper.count))
            except PlaitError as exc:
                log.warning("runtime %s cannot beat: %s", self.host, exc)
                lost = keeper.expire()
            self._apply(keeper.serving(), lost)
            self._tell_gained(set(keeper.held) - before)
            # Wake again when the first trusted lease would lapse, or at the next beat.
            await anyio.sleep(keeper.beat_s)

    async def _to_avoid(self, count: int) -> set[int]:
        """The partitions the services ask to leave to others (see AvoidsPartitions)."""
        if self.family is not None or not isinstance(self.services, AvoidsPartitions):
            return set()
        try:
            return await self.services.partitions_to_avoid(self, count)
        except PlaitError as exc:
            log.warning("runtime %s: partitions to avoid not known this beat: %s", self.host, exc)
            return set()

    def _apply(self, serving: set[int], lost: set[int]) -> None:
        """Read ``serving`` from now on; drop the activations of ``lost`` partitions."""
        if lost:
            self._drop_partitions(lost)
        if serving != self._serving and not self._closing:
            self._serving = serving
            self._read(sorted(mailbox_topic(n) for n in serving))
            if self.on_change is not None and self.keeper is not None:
                self.on_change(set(serving), self.keeper.count)

    def _tell_gained(self, gained: set[int]) -> None:
        """Tell the services (if they ask, see GainsPartitions) of partitions taken."""
        if not isinstance(self.services, GainsPartitions):
            return
        self._gained = (self._gained | gained) & self._serving
        if self._gained and not self._telling and self._tg is not None:
            self._telling = True
            self._tg.start_soon(self._tell, self.services, set(self._gained))

    async def _tell(self, services: GainsPartitions, gained: set[int]) -> None:
        try:
            await services.partitions_gained(self, gained)
        except PlaitError as exc:
            log.warning("runtime %s: partitions %s gained, told again: %s", self.host, gained, exc)
        else:
            self._gained -= gained
        finally:
            self._telling = False

    def _drop_partitions(self, lost: set[int]) -> None:
        log.warning("runtime %s lost partition(s) %s: dropping their work", self.host, sorted(lost))
        for key, (partition, scope) in list(self._scopes.items()):
            if partition in lost:
                scope.cancel()
                self._scopes.pop(key, None)
        for actor_id, activation in list(self._activations.items()):
            if partition_of(actor_id, partitions(self.mesh)) in lost and not activation.running:
                del self._activations[actor_id]

    def keeps(self, actor_id: str) -> bool:
        """See :meth:`ActorRuntime.keeps`: while the actor's partition is served here
        (held, trusted and not being released to a runtime that joined)."""
        partition = partition_of(actor_id, partitions(self.mesh))
        return super().keeps(actor_id) and partition in self._serving

    def _mailbox_served(self, actor_id: str) -> str | None:
        partition = partition_of(actor_id, partitions(self.mesh))
        if self.keeper is None or self.keeper.trusted(partition) is None:
            return None
        return mailbox_topic(partition) if partition in self._serving else None

    def _mail(self, actor_id: ActorId, body: Any, delivery: Delivery) -> Mail | None:
        partition = partition_of_topic(delivery.topic)
        held = None if partition is None or self.keeper is None else self.keeper.trusted(partition)
        if held is None:
            return None  # this partition is no longer ours: its next holder handles it
        return Mail(
            actor_id,
            body,
            delivery,
            fence=Fence(self.mesh, EPOCH_PREFIX + str(partition), held.epoch),
        )

    async def _handle(self, activation: _Activation, ctx: ActorContext, mail: Mail) -> None:
        partition = partition_of_topic(mail.delivery.topic)
        assert partition is not None
        held = self.keeper.trusted(partition) if self.keeper is not None else None
        if held is None or mail.fence is None or held.epoch != mail.fence.version:
            return  # taken before the partition was lost: its next holder handles it
        with anyio.CancelScope() as scope:
            self._scopes[id(mail.delivery)] = (partition, scope)
            try:
                await super()._handle(activation, ctx, mail)
            finally:
                self._scopes.pop(id(mail.delivery), None)
        if scope.cancelled_caught:
            log.warning("actor %s: message %s dropped with its partition", ctx.id, mail.delivery.id)


__all__ = ["AvoidsPartitions", "GainsPartitions", "LeasedRuntime"]
