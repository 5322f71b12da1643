"""Backlog markers: which messages an actor was sent and has not handled yet, readable.

A mailbox is a share of a partition topic, so it cannot be counted per actor. An actor
that wants its backlog shown (an agent actor) is sent mail with a marker beside it, at
``backlog/<actor id>/<message id>``, written in the transaction that sends the message
(:func:`tell_tracked_in`); its handler deletes the marker in the transaction that acks
the message (:func:`clear_backlog_in`). The markers are then the backlog: every message
sent and not yet handled, oldest first (message ids sort by time).
"""

from __future__ import annotations

from typing import Any

from plait.actors.directory import tell_in
from plait.actors.partitions import load_partitions
from plait.mesh import Entry, Mesh, Transaction
from plait.mesh._base import now_ms

BACKLOG_PREFIX = "backlog/"
"""Where backlog markers live: ``backlog/<actor id>/<message id>``."""

MESH_KEYS = (BACKLOG_PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""


def backlog_key(actor_id: str, message_id: str) -> str:
    """The key of the backlog marker of one message."""
    return f"{BACKLOG_PREFIX}{actor_id}/{message_id}"


def tell_tracked_in(tx: Transaction, actor_id: str, body: Any) -> str:
    """Add a message to ``actor_id`` and its backlog marker to ``tx``; the message id."""
    message_id = tell_in(tx, actor_id, body)
    tx.put(backlog_key(actor_id, message_id), {"body": body, "at_ms": now_ms()})
    return message_id


async def tell_tracked(mesh: Mesh, actor_id: str, body: Any) -> str:
    """Send ``actor_id`` a message with its backlog marker, now; the message id."""
    await load_partitions(mesh)
    tx = mesh.transact()
    message_id = tell_tracked_in(tx, actor_id, body)
    await tx.commit()
    return message_id


def clear_backlog_in(tx: Transaction, actor_id: str, message_id: str) -> None:
    """Add the delete of a handled message's marker to ``tx`` (none there is harmless)."""
    tx.delete(backlog_key(actor_id, message_id))


async def backlog(mesh: Mesh, actor_id: str) -> list[Entry]:
    """The markers of the messages ``actor_id`` was sent and has not handled, oldest first."""
    return [e async for e in mesh.scan(f"{BACKLOG_PREFIX}{actor_id}/")]


__all__ = [
    "BACKLOG_PREFIX",
    "MESH_KEYS",
    "backlog",
    "backlog_key",
    "clear_backlog_in",
    "tell_tracked",
    "tell_tracked_in",
]
