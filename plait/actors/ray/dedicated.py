"""Dedicated actors: the Ray actor of one actor that asks for resources (GPUs, say).

An actor whose record's config names ``resources`` is handled in a Ray actor of its own
holding those resources; its host still owns the message (extends its visibility, fences
its ack), and the dedicated actor runs the handler with a mesh of its own and acks in the
handler's transaction.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.actors._base import (
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    ActorContext,
    ActorRuntime,
    Fence,
    Handler,
    Mail,
)
from plait.actors.directory import ActorRecord
from plait.actors.ray.guards import require_ray
from plait.mesh import Delivery, Event, Mesh, Transaction, open_mesh

DEDICATED_IDLE_S = 60.0
"""How long a dedicated actor lives without mail before it is released."""


@dataclass
class Dedicated:
    """A host's dedicated Ray actor: its handle, messages running, last use."""

    handle: Any
    running: int = 0
    last_used: float = field(default_factory=time.monotonic)


@functools.cache
def dedicated_class() -> Any:
    """:class:`DedicatedActor` as a Ray actor class (made once per process)."""
    return require_ray().remote(max_restarts=0)(DedicatedActor)


class _DedicatedRuntime(ActorRuntime):
    """What a dedicated actor's handler sees as ``ctx.runtime``: records and mail only.

    It serves no mailbox (its host does), so the commit-time hand-off is declined and
    the handler's next message comes through the host as usual.
    """

    def __init__(self, mesh: Mesh, host: str, services: object | None) -> None:
        self.mesh = mesh
        self.host = host
        self.services = services
        self.accepts = None
        self.max_attempts = DEFAULT_MAX_ATTEMPTS
        self.visibility_timeout_ms = MAILBOX_VISIBILITY_TIMEOUT_MS

    async def start(self) -> None:
        """Nothing to serve."""

    async def close(self) -> None:
        """Nothing to drain."""

    async def wait_idle(self) -> None:
        """Never busy with mail of its own."""

    def take_mail_in(self, tx: Transaction, actor_id: str, count: int = 1) -> bool:
        """Declined: the host serves the mailbox."""
        return False

    def handle_taken(self, deliveries: Sequence[Delivery]) -> None:
        """Nothing was taken here."""


class DedicatedActor:
    """The Ray actor of one actor with ``resources``: runs its handler on its messages."""

    def __init__(self, url: str, handler: Handler, services: object | None, host: str) -> None:
        self.url = url
        self.handler = handler
        self.services = services
        self.host = host
        self._mesh: Mesh | None = None
        self._stack = contextlib.AsyncExitStack()

    async def _open(self) -> Mesh:
        if self._mesh is None:
            self._mesh = await self._stack.enter_async_context(open_mesh(self.url))
        return self._mesh

    async def handle(
        self,
        record: ActorRecord,
        body: Any,
        shipped: tuple[tuple[str, str, str, Any, int], str, str, int, Any],
        fence: tuple[str, int] | None,
    ) -> bool:
        """Run the handler on one message; whether it is acked (acking it if the handler
        did not, fenced by the host's lease)."""
        mesh = await self._open()
        (event_id, topic, kind, data, at_ms), group, consumer, attempt, position = shipped

        async def ack(delivery: Delivery) -> None:
            async with mesh.transact() as tx:
                tx.ack(delivery)

        delivery = Delivery(
            Event(event_id, topic, kind, data, at_ms), group, consumer, attempt, position, ack
        )
        mail = Mail(
            record.id,
            body,
            delivery,
            fence=None if fence is None else Fence(mesh, fence[0], fence[1]),
        )
        runtime = _DedicatedRuntime(mesh, self.host, self.services)
        await self.handler(ActorContext(record, mesh, runtime), mail)
        if not mail.acked:
            await mail.ack()
        return True

    def pid(self) -> int:
        """This actor's process id."""
        return os.getpid()


__all__ = ["DEDICATED_IDLE_S", "Dedicated", "DedicatedActor", "dedicated_class"]
