"""Durable actors: an id and a record in the mesh, a mailbox, a handler.

An actor's record lives at ``actors/<id>``: its kind (a handler reference
``"package.module:attr"``), its topics and its config. Its mailbox is its share of a
mesh topic (:data:`MAILBOX_TOPIC`, every message addressed by actor id), so a message
outlives the process that was meant to handle it. Actors are virtual: a runtime
activates one when a message for it arrives and lets it go when idle, so a parked actor
costs only its record.

Delivery is at least once. A handler acks after its effects commit, ideally inside the
same mesh transaction (:meth:`Mail.ack_in`); a message the handler did not ack because
it raised, or because its process died, is delivered again after the runtime's
visibility timeout. Handlers must therefore be idempotent: the run owner fences every
node with a nonce in its record for exactly this reason.
"""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NewType

from pydantic import BaseModel, Field

from plait.errors import ActorError
from plait.mesh import Delivery, Mesh, Transaction

if TYPE_CHECKING:
    from plait.actors.local import LocalRuntime

ActorId = NewType("ActorId", str)
"""The id of a durable actor (``"run:grun_1a2b3c"``)."""

MAILBOX_TOPIC = "actors.mailbox"
"""The mesh topic holding every actor's mailbox messages."""

MAIL_KIND = "mail"


def actor_key(actor_id: str) -> str:
    """The mesh key of an actor's record."""
    return f"actors/{actor_id}"


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

    id: str
    kind: str
    topics: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0
    stopped: bool = False


@dataclass(eq=False)
class Mail:
    """One mailbox message being handled.

    Attributes:
        actor_id: the addressee.
        body: the message.
        delivery: the mesh delivery (its ``attempt`` > 1 means it came again).
    """

    actor_id: str
    body: Any
    delivery: Delivery
    acked: bool = field(default=False)

    @property
    def id(self) -> str:
        """The message's id: its first delivery's event id, kept when a runtime that does
        not serve the actor hands it back (publishing it again as a new event)."""
        first = _handed_back(self.delivery).get("first_id")
        return first if isinstance(first, str) else self.delivery.id

    @property
    def attempt(self) -> int:
        """1 on first delivery; more when delivered again (hand-backs do not count)."""
        return delivery_attempt(self.delivery)

    def ack_in(self, tx: Transaction) -> None:
        """Ack this message as part of ``tx``, so the ack commits with the effects."""
        tx.ack(self.delivery)
        self.acked = True

    async def ack(self) -> None:
        """Ack this message now."""
        await self.delivery.ack()
        self.acked = True


def _handed_back(delivery: Delivery) -> dict[str, Any]:
    data = delivery.data
    return data if isinstance(data, dict) else {}


def delivery_attempt(delivery: Delivery) -> int:
    """A mailbox delivery's attempt, counting those of the messages it was handed back as."""
    before = _handed_back(delivery).get("attempts_before", 0)
    return delivery.attempt + (before if isinstance(before, int) else 0)


@dataclass(eq=False)
class ActorContext:
    """What a handler gets besides the message: who it is and how to reach others."""

    record: ActorRecord
    mesh: Mesh
    runtime: LocalRuntime

    def self(self) -> ActorRecord:
        """This actor's record."""
        return self.record

    @property
    def id(self) -> str:
        """This actor's id."""
        return self.record.id

    @property
    def host(self) -> str:
        """The id of the runtime hosting this activation."""
        return self.runtime.host

    async def tell(
        self, actor_id: str, body: Any, *, after_ms: int = 0, key: str | None = None
    ) -> str:
        """Send ``body`` to ``actor_id`` (optionally later, with a schedule key)."""
        return await self.runtime.tell(actor_id, body, after_ms=after_ms, key=key)

    async def stop(self) -> None:
        """Stop this actor: its record is marked stopped and later messages dropped."""
        await self.runtime.stop(self.record.id)


Handler = Callable[[ActorContext, Mail], Awaitable[None]]
"""An actor's behaviour: ``async def handle(ctx, mail) -> None``."""

_handlers: dict[str, Handler] = {}


def resolve_kind(kind: str) -> Handler:
    """The handler a kind names (``"package.module:attr"``), imported once."""
    found = _handlers.get(kind)
    if found is not None:
        return found
    module_name, _, attr = kind.partition(":")
    if not module_name or not attr:
        raise ActorError(f"actor kind {kind!r} must look like 'package.module:handler'")
    try:
        handler = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ActorError(f"cannot load actor kind {kind!r}: {exc}") from exc
    if not callable(handler):
        raise ActorError(f"actor kind {kind!r} is not callable")
    _handlers[kind] = handler
    return handler  # type: ignore[no-any-return]


def mail_data(actor_id: str, body: Any) -> dict[str, Any]:
    """The payload of a mailbox event."""
    return {"to": actor_id, "body": body}


def tell_in(
    tx: Transaction, actor_id: str, body: Any, *, after_ms: int = 0, key: str | None = None
) -> str:
    """Add a message to ``actor_id`` to a transaction (sent only if it commits)."""
    return tx.publish(
        MAILBOX_TOPIC, MAIL_KIND, mail_data(actor_id, body), after_ms=after_ms, key=key
    )


def new_host_id() -> str:
    """A host id unique to this process: ``hostname:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


__all__ = [
    "MAILBOX_TOPIC",
    "ActorContext",
    "ActorId",
    "ActorRecord",
    "Handler",
    "Mail",
    "actor_key",
    "mail_data",
    "new_host_id",
    "resolve_kind",
    "tell_in",
]
