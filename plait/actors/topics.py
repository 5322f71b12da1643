"""Topic subscriptions between actors: a publish on a topic reaches its subscribers' mailboxes.

:func:`subscribe` and :func:`unsubscribe` keep an actor's subscriptions in the mesh, at
``subscriptions/<actor id>`` (:func:`subscriptions_key`), so they outlive every process.
A pattern is a topic (``tasks.new``) or a prefix ending in ``*`` (``tasks.*``: every
topic starting with ``tasks.``, including ones made later; mailbox and dead-letter
topics never match).

Delivery. A :class:`TopicRouter` runs beside a serving runtime. For each subscription
of an actor whose mailbox that runtime serves, it reads the topic as consumer group
``actor:<actor id>`` (:func:`subscriber_group`) and forwards each event into the
actor's mailbox, acking it in the same transaction as the mailbox message it becomes
(fenced by the partition lease on a :class:`~plait.actors.LeasedRuntime`). Hence:

- at least once: an event is acked only with its forward; a router killed between
  taking and forwarding leaves it pending, and the next router takes it again after
  the visibility timeout (never twice in a mailbox: forward and ack commit together);
- in publish order per subscriber and topic: one router reads a subscriber's group at
  a time (the one holding its partition), one event at a time, and an expired pending
  event comes before newer ones; its visibility timeout is shorter than a lease, so a
  takeover finds the dead router's event expired and forwards it first. Beside a
  :class:`~plait.actors.LocalRuntime` in several processes, each event still arrives
  once, but two routers may interleave;
- a subscriber added later does not get earlier events: each subscription remembers
  when it was made, and events published before are acked unforwarded, unless it was
  made ``from: earliest`` (every event the topic still holds; topics are trimmed once
  all their groups acked).

Fan-out cost. A publish stores its event once, whatever the number of subscribers N;
each subscriber's group keeps its own place in the topic. Delivering to N subscribers
costs N reads and N small transactions (the mailbox message and the ack). On SQLite
that is one ``events`` row, plus for each subscriber a ``pending`` row (inserted on
read, deleted on ack), a cursor update and a mailbox ``events`` row; the router's
commits share the per-loop-iteration batch, so N forwards cost a few fsync-free
commits, not N. On Redis it is one ``XADD``; each subscriber group's
``XREADGROUP`` and one Lua transaction (``XADD`` to the mailbox stream, ``XACK``).
``bench/fleet.py`` measures it against plain publishes.

Forwarded mail. The actor's handler gets ``{"topic_event": {...}}`` as its mail body
(:func:`topic_event` reads it back as an :class:`~plait.mesh.Event`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import anyio
from anyio.abc import TaskGroup

from plait.actors._base import DEAD_LETTER_TOPIC, ActorRuntime, Fence
from plait.actors.directory import tell_in
from plait.actors.leased import LeasedRuntime
from plait.actors.leases import EPOCH_PREFIX
from plait.actors.partitions import MAILBOX_PREFIX, partition_of, partitions
from plait.errors import ActorError, MeshError, VersionConflict
from plait.mesh import Event, Mesh
from plait.mesh._base import now_ms

log = logging.getLogger("plait.actors")

SUBSCRIPTIONS_PREFIX = "subscriptions/"
"""Where actors' subscriptions live: ``subscriptions/<actor id>``."""

TOPIC_EVENT = "topic_event"
"""The key of a forwarded event in a mailbox body."""

StartAt = Literal["new", "earliest"]
"""Where a new subscription starts.

- ``"new"``: events published from the moment it is made.
- ``"earliest"``: every event the topic still holds.
"""

ROUTER_VISIBILITY_MS = 2_000
"""How long an event a router took waits, unforwarded, before another router takes it;
shorter than a partition lease, so a takeover forwards the dead router's event first."""


def subscriptions_key(actor_id: str) -> str:
    """The mesh key of an actor's subscriptions."""
    return f"{SUBSCRIPTIONS_PREFIX}{actor_id}"


def subscriber_group(actor_id: str) -> str:
    """The consumer group an actor reads its subscribed topics as."""
    return f"actor:{actor_id}"


def is_pattern(pattern: str) -> bool:
    """Whether ``pattern`` is a prefix wildcard (``tasks.*``)."""
    return pattern.endswith("*")


def matches(pattern: str, topic: str) -> bool:
    """Whether ``topic`` falls under ``pattern`` (internal topics never do)."""
    if _internal(topic):
        return False
    return topic.startswith(pattern[:-1]) if is_pattern(pattern) else topic == pattern


def _internal(topic: str) -> bool:
    return topic.startswith(MAILBOX_PREFIX) or topic == DEAD_LETTER_TOPIC


def _check_pattern(pattern: str) -> None:
    if not isinstance(pattern, str) or not pattern or pattern == "*":
        raise ActorError(
            f"a subscription needs a topic or a prefix like 'tasks.*', not {pattern!r}"
        )
    if "*" in pattern[:-1]:
        raise ActorError(f"a wildcard goes only at the end of a pattern: {pattern!r}")
    if _internal(pattern.rstrip("*")):
        raise ActorError(f"actors cannot subscribe to the internal topic {pattern!r}")


async def subscriptions(mesh: Mesh, actor_id: str) -> dict[str, int]:
    """An actor's subscriptions: each pattern and the epoch ms its events count from."""
    entry = await mesh.get(subscriptions_key(actor_id))
    return {} if entry is None else {str(k): int(v) for k, v in entry.value.items()}


async def subscribe(
    mesh: Mesh, actor_id: str, pattern: str, *, start: StartAt = "new"
) -> dict[str, int]:
    """Subscribe ``actor_id`` to a topic or prefix pattern; its subscriptions after.

    Subscribing again to a pattern it has keeps the original start.

    Raises:
        ActorError: the pattern is empty, internal, or has a ``*`` before its end.
    """
    _check_pattern(pattern)
    since = 0 if start == "earliest" else now_ms()
    return await _update(mesh, actor_id, lambda subs: subs.setdefault(pattern, since))


async def unsubscribe(mesh: Mesh, actor_id: str, pattern: str) -> dict[str, int]:
    """Drop a subscription (and the group's place in its topics); its subscriptions after."""
    subs = await _update(mesh, actor_id, lambda subs: subs.pop(pattern, None))
    topics = await mesh.topics(pattern[:-1]) if is_pattern(pattern) else [pattern]
    still = [t for t in topics if matches(pattern, t) and not any(matches(p, t) for p in subs)]
    if still:
        await mesh.drop_group(still, subscriber_group(actor_id))
    return subs


async def _update(mesh: Mesh, actor_id: str, change: Any) -> dict[str, int]:
    key = subscriptions_key(actor_id)
    while True:
        entry = await mesh.get(key)
        subs = {} if entry is None else dict(entry.value)
        change(subs)
        try:
            if subs:
                await mesh.put(key, subs, if_version=0 if entry is None else entry.version)
            elif entry is not None:
                await mesh.delete(key, if_version=entry.version)
        except VersionConflict:
            continue
        return {str(k): int(v) for k, v in subs.items()}


def topic_mail(event: Event) -> dict[str, Any]:
    """The mailbox body a forwarded event becomes."""
    return {
        TOPIC_EVENT: {
            "id": event.id,
            "topic": event.topic,
            "kind": event.kind,
            "data": event.data,
            "at_ms": event.at_ms,
        }
    }


def topic_event(body: Any) -> Event | None:
    """The event a mailbox body forwards, or None for another message."""
    found = body.get(TOPIC_EVENT) if isinstance(body, dict) else None
    if not isinstance(found, dict):
        return None
    return Event(
        str(found["id"]),
        str(found["topic"]),
        str(found["kind"]),
        found["data"],
        int(found["at_ms"]),
    )


@dataclass
class _Forward:
    since: int
    scope: anyio.CancelScope


class TopicRouter:
    """Forwards subscribed topics into the mailboxes ``runtime`` serves, while in use.

    Use as ``async with TopicRouter(runtime):`` inside the runtime's own block.

    Args:
        runtime: the serving runtime; the router forwards for the actors whose mailbox
            partition it serves (every actor, for a runtime that is not leased).
        refresh_s: how often subscriptions, leases and wildcard topics are re-read.
        visibility_timeout_ms: see :data:`ROUTER_VISIBILITY_MS` (capped below a lease).
    """

    def __init__(
        self,
        runtime: ActorRuntime,
        *,
        refresh_s: float = 0.5,
        visibility_timeout_ms: int = ROUTER_VISIBILITY_MS,
    ) -> None:
        self.runtime = runtime
        self.mesh = runtime.mesh
        self.refresh_s = refresh_s
        lease_s = runtime.lease_s if isinstance(runtime, LeasedRuntime) else None
        cap = int(lease_s * 500) if lease_s else visibility_timeout_ms
        self.visibility_timeout_ms = max(50, min(visibility_timeout_ms, cap))
        self._forwards: dict[tuple[str, str], _Forward] = {}
        self._tg: TaskGroup | None = None
        self._refreshed = anyio.Event()

    async def __aenter__(self) -> Self:
        self._tg = await anyio.create_task_group().__aenter__()
        self._tg.start_soon(self._refresh_loop)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tg is None:
            return
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self._tg = None

    @property
    def forwarding(self) -> set[tuple[str, str]]:
        """The (actor id, topic) pairs this router forwards now."""
        return set(self._forwards)

    async def refreshed(self) -> None:
        """Wait for the next refresh to finish (tests and benches)."""
        await self._refreshed.wait()

    async def _refresh_loop(self) -> None:
        while True:
            try:
                await self.refresh()
            except MeshError as exc:
                log.warning("topic router %s cannot refresh: %s", self.runtime.host, exc)
            done, self._refreshed = self._refreshed, anyio.Event()
            done.set()
            await anyio.sleep(self.refresh_s)

    async def refresh(self) -> None:
        """Start forwarding new subscriptions and stop the ones gone or no longer served."""
        wanted: dict[tuple[str, str], int] = {}
        listed: dict[str, list[str]] = {}
        gone: set[tuple[str, str]] = set()
        async for entry in self.mesh.scan(SUBSCRIPTIONS_PREFIX):
            actor_id = entry.key[len(SUBSCRIPTIONS_PREFIX) :]
            if self._fence(actor_id) is False:
                continue
            for pattern, since in dict(entry.value).items():
                if is_pattern(pattern):
                    prefix = pattern[:-1]
                    if prefix not in listed:
                        listed[prefix] = await self.mesh.topics(prefix)
                    topics = [t for t in listed[prefix] if matches(pattern, t)]
                else:
                    topics = [pattern]
                for topic in topics:
                    pair = (actor_id, topic)
                    wanted[pair] = min(int(since), wanted.get(pair, int(since)))
        for pair, forward in list(self._forwards.items()):
            if pair not in wanted or wanted[pair] != forward.since:
                forward.scope.cancel()
                del self._forwards[pair]
                gone.add(pair)
        assert self._tg is not None
        for pair, since in wanted.items():
            if pair not in self._forwards:
                scope = anyio.CancelScope()
                self._forwards[pair] = _Forward(since, scope)
                self._tg.start_soon(self._forward, pair, since, scope)

    def _fence(self, actor_id: str) -> Fence | Literal[False] | None:
        """The fence forwards to ``actor_id`` commit under; False: not served here."""
        runtime = self.runtime
        if not isinstance(runtime, LeasedRuntime):
            return None
        partition = partition_of(actor_id, partitions(self.mesh))
        held = runtime.keeper.trusted(partition) if runtime.keeper is not None else None
        if held is None or partition not in runtime.serving:
            return False
        return Fence(self.mesh, EPOCH_PREFIX + str(partition), held.epoch)

    async def _forward(self, pair: tuple[str, str], since: int, scope: anyio.CancelScope) -> None:
        actor_id, topic = pair
        try:
            with scope:
                await self._forward_events(actor_id, topic, since)
        except (MeshError, VersionConflict) as exc:
            log.warning("topic router: %s -> %s stops: %s", topic, actor_id, exc)
            await anyio.sleep(min(1.0, self.refresh_s))
        finally:
            current = self._forwards.get(pair)
            if current is not None and current.scope is scope:
                del self._forwards[pair]  # the next refresh starts it again if still wanted

    async def _forward_events(self, actor_id: str, topic: str, since: int) -> None:
        group = subscriber_group(actor_id)
        sub = self.mesh.subscribe(
            topic,
            group,
            self.runtime.host,
            start="begin",
            visibility_timeout_ms=self.visibility_timeout_ms,
        )
        async with sub:
            async for delivery in sub:
                fence = self._fence(actor_id)
                if fence is False:
                    return  # the partition moved: its new holder forwards from here
                async with self.mesh.transact() as tx:
                    if fence is not None:
                        tx.check(fence.key, fence.version)
                    if delivery.event.at_ms >= since:
                        tell_in(tx, actor_id, topic_mail(delivery.event))
                    tx.ack(delivery)


__all__ = [
    "ROUTER_VISIBILITY_MS",
    "SUBSCRIPTIONS_PREFIX",
    "TOPIC_EVENT",
    "StartAt",
    "TopicRouter",
    "is_pattern",
    "matches",
    "subscribe",
    "subscriber_group",
    "subscriptions",
    "subscriptions_key",
    "topic_event",
    "topic_mail",
    "unsubscribe",
]
