"""The actor directory: actor records and the mailbox format, shared by every runtime.

An actor's record lives at ``actors/<id>`` (:func:`actor_key`): its kind, its topics and
its config. Its mailbox is its share of its mailbox partition's topic
(:mod:`plait.actors.partitions`): every mailbox message is an event of kind
:data:`MAIL_KIND` whose data is :func:`mail_data` (the addressee and the body). A
runtime reads and writes records and mail only through this module, so records created
by one runtime are served by any other on the same mesh, and a message told by one
process is handled wherever its actor is activated.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from plait.actors.partitions import MAILBOX_PREFIX, load_partitions, mailbox_of
from plait.errors import ActorError, ActorNotFound, VersionConflict
from plait.ids import ActorId
from plait.mesh import Mesh, Transaction

MAILBOX_TOPIC = MAILBOX_PREFIX
"""The prefix of the mailbox topics, one per partition (see :func:`mailbox_of`)."""

MAIL_KIND = "mail"
"""The event kind of a mailbox message."""

ACTORS_PREFIX = "actors/"
"""Where actor records live: ``actors/<actor id>``."""

MESH_KEYS = (ACTORS_PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""


def actor_key(actor_id: str) -> str:
    """The mesh key of an actor's record."""
    return f"{ACTORS_PREFIX}{actor_id}"


class ActorRecord(BaseModel):
    """What the mesh holds about an actor.

    Attributes:
        id: the actor's id.
        kind: the handler reference, ``"package.module:attr"``.
        topics: topics the actor is concerned with (kept for its handler and tools).
        config: free settings for the handler; ``max_concurrency`` (default 1) bounds
            how many of its messages run at once.
        created_at: epoch seconds.
        stopped: a stopped actor's messages are dropped.
    """

    id: ActorId
    kind: str
    topics: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0
    stopped: bool = False


async def create_record(
    mesh: Mesh,
    actor_id: str,
    kind: str,
    *,
    topics: list[str] | None = None,
    config: dict[str, Any] | None = None,
    exist_ok: bool = False,
) -> ActorRecord:
    """Create an actor's record; with ``exist_ok`` an existing one is returned as it is.

    Raises:
        ActorError: the actor exists and ``exist_ok`` is false.
    """
    record = ActorRecord(
        id=actor_id, kind=kind, topics=topics or [], config=config or {}, created_at=time.time()
    )
    try:
        await mesh.put(actor_key(actor_id), record.model_dump(), if_version=0)
    except VersionConflict:
        if not exist_ok:
            raise ActorError(f"actor {actor_id!r} already exists") from None
        return await get_record(mesh, actor_id)
    return record


async def get_record(mesh: Mesh, actor_id: str) -> ActorRecord:
    """An actor's record.

    Raises:
        ActorNotFound: there is none.
    """
    record = await find_record(mesh, actor_id)
    if record is None:
        raise ActorNotFound(f"no actor {actor_id!r}")
    return record


async def find_record(mesh: Mesh, actor_id: str) -> ActorRecord | None:
    """An actor's record, or None if there is none."""
    entry = await mesh.get(actor_key(actor_id))
    return None if entry is None else ActorRecord.model_validate(entry.value)


async def stop_record(mesh: Mesh, actor_id: str) -> None:
    """Mark an actor's record stopped (compare-and-swap, retried on a conflict).

    Raises:
        ActorNotFound: there is none.
    """
    while True:
        entry = await mesh.get(actor_key(actor_id))
        if entry is None:
            raise ActorNotFound(f"no actor {actor_id!r}")
        record = ActorRecord.model_validate(entry.value)
        record.stopped = True
        try:
            await mesh.put(actor_key(actor_id), record.model_dump(), if_version=entry.version)
        except VersionConflict:
            continue
        return


def mail_data(actor_id: str, body: Any) -> dict[str, Any]:
    """The payload of a mailbox event."""
    return {"to": actor_id, "body": body}


def tell_in(
    tx: Transaction, actor_id: str, body: Any, *, after_ms: int = 0, key: str | None = None
) -> str:
    """Add a message to ``actor_id`` to a transaction (sent only if it commits)."""
    return tx.publish(
        mailbox_of(tx.mesh, actor_id),
        MAIL_KIND,
        mail_data(actor_id, body),
        after_ms=after_ms,
        key=key,
    )


async def tell_now(
    mesh: Mesh, actor_id: str, body: Any, *, after_ms: int = 0, key: str | None = None
) -> str:
    """Send ``body`` to an actor's mailbox now (optionally later, with a schedule key)."""
    await load_partitions(mesh)
    return await mesh.publish(
        mailbox_of(mesh, actor_id), MAIL_KIND, mail_data(actor_id, body), after_ms=after_ms, key=key
    )


__all__ = [
    "ACTORS_PREFIX",
    "MAILBOX_TOPIC",
    "MAIL_KIND",
    "MESH_KEYS",
    "ActorId",
    "ActorRecord",
    "actor_key",
    "create_record",
    "find_record",
    "get_record",
    "mail_data",
    "stop_record",
    "tell_in",
    "tell_now",
]
