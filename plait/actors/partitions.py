"""Mailbox partitions: which of a mesh's P mailbox topics an actor's mail goes to.

A mesh has P mailbox partitions (:data:`DEFAULT_PARTITIONS` unless the first runtime to
use it asks for another count), fixed for its life and stored at
:data:`PARTITIONS_KEY` (written once, ``if_version=0``); a runtime asking for another P
is refused (:class:`~plait.errors.PartitionCountMismatch`). Partition ``n`` is the
topic ``actors.mailbox.{n}``: the braces make it a Redis Cluster hash tag, so each
partition's stream can live on its own node.

An actor's partition is a stable hash (blake2b) of its *family*, its id up to the first
``__``: a child run's owner (``run:grun_1__fetch.1``) shares its parent's partition,
so one lease covers a run and its child runs (a foreground ``graph run`` holds just that
one partition) and a child's end wakes its parent within the partition.

Tellers need P without a read inside a transaction: it is cached per mesh object once
read (:func:`load_partitions`, which every runtime calls on start, as does
:func:`~plait.actors.directory.tell_now`); a process that never read it assumes the
default.
"""

from __future__ import annotations

import hashlib
import weakref

from plait.errors import PartitionCountMismatch, VersionConflict
from plait.mesh import Mesh

DEFAULT_PARTITIONS = 64
"""Mailbox partitions of a mesh whose first runtime asked for no other count."""

PARTITIONS_KEY = "cluster/partitions"
"""The mesh key holding ``{"count": P}``."""

MAILBOX_PREFIX = "actors.mailbox."
"""Partition ``n``'s topic is this prefix and ``{n}``."""

MESH_KEYS = (PARTITIONS_KEY,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

MESH_TOPICS = (MAILBOX_PREFIX,)
"""The topics (or topic prefixes) this service owns: code given the mesh may not publish
on them (``plait.programs.capabilities`` guards them; a test checks it does)."""

_counts: weakref.WeakKeyDictionary[Mesh, int] = weakref.WeakKeyDictionary()


def mailbox_topic(partition: int) -> str:
    """The topic of mailbox partition ``partition`` (``actors.mailbox.{7}``)."""
    return f"{MAILBOX_PREFIX}{{{partition}}}"


def partition_of_topic(topic: str) -> int | None:
    """The partition a mailbox topic holds, or None for another topic."""
    if not topic.startswith(MAILBOX_PREFIX + "{") or not topic.endswith("}"):
        return None
    digits = topic[len(MAILBOX_PREFIX) + 1 : -1]
    return int(digits) if digits.isdigit() else None


def actor_family(actor_id: str) -> str:
    """The part of an actor id that picks its partition: up to the first ``__``."""
    return actor_id.split("__", 1)[0]


def partition_of(actor_id: str, count: int) -> int:
    """Which of ``count`` partitions holds ``actor_id``'s mailbox (stable across processes)."""
    digest = hashlib.blake2b(actor_family(actor_id).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def partitions(mesh: Mesh) -> int:
    """The partition count of ``mesh`` as this process knows it (the default if unread)."""
    return _counts.get(mesh, DEFAULT_PARTITIONS)


def mailbox_of(mesh: Mesh, actor_id: str) -> str:
    """The topic of ``actor_id``'s mailbox on ``mesh``."""
    return mailbox_topic(partition_of(actor_id, partitions(mesh)))


def mailbox_topics(count: int) -> list[str]:
    """Every mailbox topic of a mesh with ``count`` partitions."""
    return [mailbox_topic(n) for n in range(count)]


async def load_partitions(mesh: Mesh, count: int | None = None) -> int:
    """The partition count of ``mesh``, fixing it on first use (``count`` or the default).

    Raises:
        PartitionCountMismatch: ``count`` is given and the mesh was made with another.
    """
    if count is None and mesh in _counts:
        return _counts[mesh]
    entry = await mesh.get(PARTITIONS_KEY)
    if entry is None:
        asked = count or DEFAULT_PARTITIONS
        try:
            await mesh.put(PARTITIONS_KEY, {"count": asked}, if_version=0)
        except VersionConflict:
            entry = await mesh.get(PARTITIONS_KEY)
        else:
            _counts[mesh] = asked
            return asked
    assert entry is not None
    stored = int(entry.value["count"])
    if count is not None and count != stored:
        raise PartitionCountMismatch(mesh.url, stored, count)
    _counts[mesh] = stored
    return stored


def ranges(held: list[int] | set[int]) -> str:
    """Partition numbers as ranges: ``0-15, 32-47`` (``none`` for none)."""
    parts: list[str] = []
    ordered = sorted(held)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts) or "none"


__all__ = [
    "DEFAULT_PARTITIONS",
    "MAILBOX_PREFIX",
    "MESH_KEYS",
    "MESH_TOPICS",
    "PARTITIONS_KEY",
    "actor_family",
    "load_partitions",
    "mailbox_of",
    "mailbox_topic",
    "mailbox_topics",
    "partition_of",
    "partition_of_topic",
    "partitions",
    "ranges",
]
