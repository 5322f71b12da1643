"""The live-run index: which runs of each mailbox partition have work in flight.

::

    runlive/<partition>/<run_id>       present while the run is listed ``running``

A run's key is put in the commit that makes its listing status ``running`` (its start,
a retry or a fork, a resume from parked) and deleted in the one that takes it away (it
parks, ends or is cancelled): beside its listing summary, so the index costs nothing per
transition. ``<partition>`` is its owner's mailbox partition
(:func:`~plait.actors.partition_of`), so the runtime that takes a partition over lists
one prefix.

Takeover. A run in flight may have no message left that would wake it: the holder that
died had acked the wake that claimed its node, or the wake is lost. When a runtime
takes a partition it did not hold (see :class:`~plait.actors.GainsPartitions`), each
run listed under it gets one ``takeover`` wake. The record decides what that wake
does, never the message: a claim left by a holder of the partition before this one,
whose wake is not in this runtime's hands, is a crash, and the node's
``on_indeterminate`` policy decides. A first delivery of such a wake still on its way
runs nothing: its claim is no longer its own once the takeover wake claimed it again.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

from plait.actors import ActorRuntime, partition_of
from plait.actors.partitions import partitions
from plait.graphs.state import Attempt
from plait.mesh import Mesh, Transaction
from plait.runs.heartbeats import serves_run
from plait.runs.record import RunRecord, index_key, listing_status, owner_id, summary_of
from plait.runs.wake import Wake

log = logging.getLogger("plait.runs")

LIVE_PREFIX = "runlive/"
"""The key prefix of the live-run index."""

MESH_KEYS = (LIVE_PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

TAKEOVER: Final = "takeover"
"""The ``why`` of the wake a run gets when a runtime takes its partition over."""


def live_prefix(partition: int) -> str:
    """The key prefix of the runs in flight in mailbox partition ``partition``."""
    return f"{LIVE_PREFIX}{partition}/"


def live_key(mesh: Mesh, run_id: str) -> str:
    """The index key of ``run_id`` (under its owner's partition on ``mesh``)."""
    return live_prefix(partition_of(owner_id(run_id), partitions(mesh))) + run_id


def list_run(tx: Transaction, rec: RunRecord) -> None:
    """Add ``rec``'s listing to ``tx``: its summary, and its live-index entry (put while
    the run is listed ``running``, deleted otherwise). Written on a change of its
    listing status only, never per transition."""
    tx.put(index_key(rec.run_id), summary_of(rec).model_dump())
    key = live_key(tx.mesh, rec.run_id)
    if listing_status(rec.status) == "running":
        tx.put(key, {})
    else:
        tx.delete(key)


async def live_runs(mesh: Mesh, partition: int) -> list[str]:
    """The runs listed in flight under ``partition``."""
    prefix = live_prefix(partition)
    return [entry.key[len(prefix) :] async for entry in mesh.scan(prefix)]


async def live_in(mesh: Mesh, partitions: set[int], *, only_run: str | None = None) -> list[str]:
    """The runs listed in flight under ``partitions`` (with ``only_run``, that run and
    its children only): those a runtime that took the partitions over wakes, each with
    one ``takeover`` wake (:meth:`plait.runs.commit.RunCommit.wake_all`)."""
    return [
        run_id
        for partition in sorted(partitions)
        for run_id in await live_runs(mesh, partition)
        if only_run is None or serves_run(only_run, owner_id(run_id))
    ]


class Incarnation(Protocol):
    """A host as a takeover judges claims: its id, and when it started."""

    id: str
    started_at: float


def taken_over(
    runtime: ActorRuntime, host: Incarnation, woken: Wake, rec: RunRecord
) -> list[Attempt]:
    """The attempts of ``rec`` a takeover wake (``woken``) treats as crashed.

    Only a runtime that is the single activation of its partitions may judge so: a
    claim made by another host (a holder before this one) or by this host's id before
    this host started (an incarnation before this one, under the same id), whose wake
    this runtime is not handling, and not a retry waiting for its backoff (its
    scheduled wake is in the mesh and comes). Claims this host made are its own live
    work. None for any other wake.
    """
    if woken.why != TAKEOVER or not runtime.single_activation:
        return []
    handling = runtime.handling(owner_id(rec.run_id))
    if handling is None:
        return []  # a runtime that cannot tell what it handles judges nothing
    return [
        a
        for a in rec.attempts.values()
        if (a.host != host.id or a.started_at < host.started_at)
        and a.wake not in handling
        and not rec.retrying.get(a.node)
    ]


__all__ = [
    "LIVE_PREFIX",
    "MESH_KEYS",
    "TAKEOVER",
    "Incarnation",
    "list_run",
    "live_in",
    "live_key",
    "live_prefix",
    "live_runs",
    "taken_over",
]
