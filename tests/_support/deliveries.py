"""Reading a subscription in a test: an event that should come, within a deadline; and
"nothing more comes", proved by a marker or the group's backlog instead of by silence."""

from __future__ import annotations

import anyio

from plait.mesh import Delivery, Mesh, Subscription
from tests._support.timing import scaled

MARKER = "drained"
"""The kind of the marker event :func:`drain` publishes behind the events under test."""


async def next_within(sub: Subscription, seconds: float) -> Delivery | None:
    """The next delivery, or None if none comes within ``seconds`` (stretched on a busy
    machine): a deadline for an event that should come, never proof that none does."""
    with anyio.move_on_after(scaled(seconds)):
        return await sub.__anext__()
    return None


async def drain(mesh: Mesh, sub: Subscription, topic: str, after_ms: int = 0) -> list[Delivery]:
    """Every delivery ``sub`` gets before a marker published now on ``topic`` (one of
    its topics), ``after_ms`` later for a marker behind delayed events; the marker is
    acked and left out.

    A group reads a topic in order, so the marker says "nothing more was there" without
    waiting for silence (``[]`` proves a negative).
    """
    await mesh.publish(topic, MARKER, None, after_ms=after_ms)
    out: list[Delivery] = []
    with anyio.fail_after(scaled(10 + after_ms / 1000)):
        while True:
            delivery = await sub.__anext__()
            if delivery.kind == MARKER and delivery.topic == topic:
                await delivery.ack()
                return out
            out.append(delivery)


async def settled(mesh: Mesh, sub: Subscription, topic: str, group: str) -> list[Delivery]:
    """After an ack: nothing of ``topic`` is left for ``group`` to deliver (so nothing can
    come again), and nothing else came before a marker; what did come."""
    assert await mesh.backlog(topic, group) == 0
    return await drain(mesh, sub, topic)


async def undelivered_mail(mesh: Mesh) -> dict[str, int]:
    """The actor mailbox partitions holding messages no runtime has acked, with their
    counts: ``{}`` once every runtime has stopped means no message can come again."""
    from plait.actors import MAILBOX_GROUP
    from plait.actors.partitions import MAILBOX_PREFIX

    return {
        topic: count
        for topic in await mesh.topics(MAILBOX_PREFIX)
        if (count := await mesh.backlog(topic, MAILBOX_GROUP))
    }
