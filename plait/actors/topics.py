"""Topic subscriptions between actors: a publish on a topic reaches its subscribers' mailboxes.

:func:`subscribe` and :func:`unsubscribe` keep an actor's subscriptions in the mesh, at
``subscriptions/<actor id>`` (:func:`subscriptions_key`: ``{"patterns": {pattern:
since_ms}, "backlog": bool}``), so they outlive every process.
A pattern is a topic (``tasks.new``) or a prefix ending in ``*`` (``tasks.*``: every
topic starting with ``tasks.``, including ones made later; mailbox and dead-letter
topics never match).

Delivery. A :class:`TopicRouter` runs beside each serving runtime (:func:`plait.runs.serve`
starts one). A topic is forwarded by the runtime holding the lease of the partition its
name hashes to: it reads the topic as the group :data:`SHARED_GROUP` and puts each
event into the mailbox of every subscriber, acking it in the same transaction, which
also checks the lease and :data:`SUBSCRIPTIONS_VERSION_KEY`. Hence:

- at least once: an event is acked only with its forward; a router killed between
  taking and forwarding leaves it pending, and the next holder takes it again after the
  visibility timeout (never twice into a mailbox: forward and ack commit together);
- in publish order per subscriber: one router reads a topic at a time, one event at a
  time, and an expired pending event comes before newer ones; its visibility timeout is
  shorter than a lease, so a takeover finds the dead router's event expired and forwards
  it first. Beside a :class:`~plait.actors.LocalRuntime` in several processes, each
  event still arrives once, but two routers may interleave;
- a subscriber added later does not get earlier events: each subscription remembers
  when it was made, and gets only the events published since; a router whose view of
  the subscriptions is older than an event's forward re-reads them first (the version
  check), so no subscriber made before a publish is skipped. A ``from: earliest``
  subscription gets every event the topic still holds (topics are trimmed once all
  their groups acked), read as a group of its own (:func:`subscriber_group`) by the
  holder of the actor's partition.

Fan-out cost. A publish stores its event once, whatever the number of subscribers N.
Delivering it costs one read by the router and one transaction holding N mailbox
messages and the ack. On SQLite: one ``events`` row for the publish; the router's read
is a ``pending`` row and a cursor update; the forward adds N mailbox ``events`` rows and
deletes the ``pending`` row, in one commit. On Redis: one ``XADD``; one ``XREADGROUP``;
one Lua transaction of N ``XADD`` to the mailbox streams and an ``XACK``. Each mailbox
message then costs what any message to an actor costs (its read and ack by the runtime
serving the subscriber). ``bench/fleet.py`` measures it against plain publishes.

Forwarded mail. The actor's handler gets ``{"topic_event": {...}}`` as its mail body
(:func:`topic_event` reads it back as an :class:`~plait.mesh.Event`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal, Self

import anyio
from anyio.abc import TaskGroup

from plait.actors._base import DEAD_LETTER_TOPIC, ActorRuntime, Fence
from plait.actors.backlog import tell_tracked_in
from plait.actors.directory import tell_in
from plait.actors.leased import LeasedRuntime
from plait.actors.leases import EPOCH_PREFIX
from plait.actors.partitions import MAILBOX_PREFIX, partition_of, partitions
from plait.errors import ActorError, MeshError, VersionConflict
from plait.mesh import Delivery, Event, Mesh
from plait.mesh._base import now_ms
from plait.telemetry import STATE, lift_trace, observe_delivery

log = logging.getLogger("plait.actors")

SUBSCRIPTIONS_PREFIX = "subscriptions/"
"""Where actors' subscriptions live: ``subscriptions/<actor id>``."""

SUBSCRIPTIONS_VERSION_KEY = "cluster/subscriptions"
"""Written with every change of any subscription: its version tells a router whether
the subscriptions it forwards by are current (every forward checks it)."""

MESH_KEYS = (SUBSCRIPTIONS_PREFIX, SUBSCRIPTIONS_VERSION_KEY)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

TOPIC_EVENT = "topic_event"
"""The key of a forwarded event in a mailbox body."""

StartAt = Literal["new", "earliest"]
"""Where a new subscription starts.

- ``"new"``: events published from the moment it is made.
- ``"earliest"``: every event the topic still holds.
"""

SHARED_GROUP = "topic-router"
"""The consumer group routers read a topic as, for its subscribers that start now."""

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
    return (await _read(mesh, actor_id))[0]


async def _read(mesh: Mesh, actor_id: str) -> tuple[dict[str, int], bool, int]:
    entry = await mesh.get(subscriptions_key(actor_id))
    if entry is None:
        return {}, False, 0
    patterns = {str(k): int(v) for k, v in dict(entry.value.get("patterns", {})).items()}
    return patterns, bool(entry.value.get("backlog")), entry.version


async def subscribe(
    mesh: Mesh,
    actor_id: str,
    pattern: str,
    *,
    start: StartAt = "new",
    backlog: bool = False,
) -> dict[str, int]:
    """Subscribe ``actor_id`` to a topic or prefix pattern; its subscriptions after.

    Subscribing again to a pattern it has keeps the original start. With ``backlog``,
    each event forwarded to the actor comes with a backlog marker
    (:mod:`plait.actors.backlog`), for actors whose backlog is shown.

    Raises:
        ActorError: the pattern is empty, internal, or has a ``*`` before its end.
    """
    _check_pattern(pattern)
    since = 0 if start == "earliest" else now_ms()

    def change(subs: dict[str, int]) -> bool:
        subs.setdefault(pattern, since)
        return backlog

    return await _update(mesh, actor_id, change)


async def unsubscribe(mesh: Mesh, actor_id: str, pattern: str) -> dict[str, int]:
    """Drop a subscription (and the group's place in its topics); its subscriptions after."""

    def change(subs: dict[str, int]) -> None:
        subs.pop(pattern, None)

    subs = await _update(mesh, actor_id, change)
    topics = await mesh.topics(pattern[:-1]) if is_pattern(pattern) else [pattern]
    still = [t for t in topics if matches(pattern, t) and not any(matches(p, t) for p in subs)]
    if still:
        await mesh.drop_group(still, subscriber_group(actor_id))
    return subs


async def _update(
    mesh: Mesh, actor_id: str, change: Callable[[dict[str, int]], bool | None]
) -> dict[str, int]:
    key = subscriptions_key(actor_id)
    while True:
        subs, tracked, version = await _read(mesh, actor_id)
        tracked = bool(change(subs)) or tracked
        try:
            async with mesh.transact() as tx:
                if subs:
                    tx.put(key, {"patterns": subs, "backlog": tracked}, if_version=version)
                elif version:
                    tx.delete(key, if_version=version)
                tx.put(SUBSCRIPTIONS_VERSION_KEY, {})  # routers re-read before they forward
        except VersionConflict:
            continue
        return subs


def topic_mail(event: Event) -> dict[str, Any]:
    """The mailbox body a forwarded event becomes (its taint with it, if it has one,
    and its publisher's trace context, see :func:`plait.telemetry.lift_trace`)."""
    data, trace = lift_trace(event.data)
    forwarded = {
        "id": event.id,
        "topic": event.topic,
        "kind": event.kind,
        "data": data,
        "at_ms": event.at_ms,
    }
    if event.tainted:
        forwarded["tainted"] = True
    if trace is not None:
        return {TOPIC_EVENT: forwarded, "traceparent": trace}
    return {TOPIC_EVENT: forwarded}


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
        found.get("tainted") is True,
    )


Pair = tuple[str, str]
"""An (actor id, topic) pair."""


class TopicRouter:
    """Forwards subscribed topics into actors' mailboxes while in use, beside ``runtime``.

    Use as ``async with TopicRouter(runtime):`` inside the runtime's own block.

    A topic is forwarded by the runtime holding the lease of the partition its name
    hashes to (every runtime reading it as one group, for a runtime that is not
    leased): one read of each event, and one transaction putting it into every
    subscriber's mailbox, acking it, and checking that the lease and the subscriptions
    (:data:`SUBSCRIPTIONS_VERSION_KEY`) are as the router last read them. A router that
    finds the subscriptions changed re-reads them and forwards the event again, so a
    subscriber added a moment ago is never skipped. A ``from: earliest`` subscription is
    read as a group of its own (``actor:<id>``), by the holder of the actor's partition.

    Args:
        runtime: the serving runtime whose leases decide what this router forwards.
        refresh_s: how often subscriptions, leases and wildcard topics are re-read.
        visibility_timeout_ms: see :data:`ROUTER_VISIBILITY_MS` (capped below a lease).

    Attributes:
        forwarded: the mailbox messages this router committed (a figure for benches).
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
        self.forwarded = 0
        self._version = 0
        self._tracked: set[str] = set()
        """The subscribers whose forwarded mail comes with a backlog marker."""
        self._shared: dict[str, dict[str, int]] = {}
        """Each topic forwarded here: its subscribers (by the shared group) and since when."""
        self._tasks: dict[str | Pair, anyio.CancelScope] = {}
        """A forwarding task per topic (shared group) or pair (a subscriber's own group)."""
        self._lock = anyio.Lock()
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
    def forwarding(self) -> set[Pair]:
        """The (actor id, topic) pairs this router forwards now."""
        pairs = {(actor, topic) for topic, subs in self._shared.items() for actor in subs}
        return pairs | {key for key in self._tasks if isinstance(key, tuple)}

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
        """Re-read subscriptions and leases: start and stop forwarding to match."""
        async with self._lock:
            await self._refresh()

    async def _fresh(self) -> None:
        """Refresh unless another task did since the subscriptions last changed."""
        async with self._lock:
            entry = await self.mesh.get(SUBSCRIPTIONS_VERSION_KEY)
            if (0 if entry is None else entry.version) != self._version:
                await self._refresh()

    async def _refresh(self) -> None:
        entry = await self.mesh.get(SUBSCRIPTIONS_VERSION_KEY)
        version = 0 if entry is None else entry.version
        shared: dict[str, dict[str, int]] = {}
        own: set[Pair] = set()
        listed: dict[str, list[str]] = {}
        tracked: set[str] = set()
        async for sub in self.mesh.scan(SUBSCRIPTIONS_PREFIX):
            actor_id = sub.key[len(SUBSCRIPTIONS_PREFIX) :]
            if sub.value.get("backlog"):
                tracked.add(actor_id)
            for pattern, since in dict(sub.value.get("patterns", {})).items():
                if is_pattern(pattern):
                    prefix = pattern[:-1]
                    if prefix not in listed:
                        listed[prefix] = await self.mesh.topics(prefix)
                    topics = [t for t in listed[prefix] if matches(pattern, t)]
                else:
                    topics = [pattern]
                for topic in topics:
                    if int(since) == 0:
                        own.add((actor_id, topic))
                    else:
                        subs = shared.setdefault(topic, {})
                        subs[actor_id] = min(int(since), subs.get(actor_id, int(since)))
        for actor_id, topic in own:  # its own group has every event: none from the shared
            shared.get(topic, {}).pop(actor_id, None)
        subscribed = {t for t, subs in shared.items() if subs}
        shared = {t: subs for t, subs in shared.items() if subs and self._fence(t) is not False}
        own = {pair for pair in own if self._fence(pair[0]) is not False}
        self._version, self._shared, self._tracked = version, shared, tracked
        for key, scope in list(self._tasks.items()):
            if key not in shared and key not in own:
                scope.cancel()
                del self._tasks[key]
                if isinstance(key, str) and key not in subscribed:
                    # nobody reads it any more: its place would keep the topic from trimming
                    await self.mesh.drop_group(key, SHARED_GROUP)
        assert self._tg is not None
        wanted: list[str | Pair] = [*shared, *own]
        for task in wanted:
            if task not in self._tasks:
                scope = self._tasks[task] = anyio.CancelScope()
                self._tg.start_soon(self._forward, task, scope)

    def _fence(self, name: str) -> Fence | Literal[False] | None:
        """The fence forwards for ``name`` (a topic, or an actor id for its own group)
        commit under: its partition's lease; False when this runtime does not hold it."""
        runtime = self.runtime
        if not isinstance(runtime, LeasedRuntime):
            return None
        partition = partition_of(name, partitions(self.mesh))
        held = runtime.keeper.trusted(partition) if runtime.keeper is not None else None
        if held is None or partition not in runtime.serving:
            return False
        return Fence(self.mesh, EPOCH_PREFIX + str(partition), held.epoch)

    async def _forward(self, key: str | Pair, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await self._forward_group(key)
        except MeshError as exc:
            log.warning("topic router: forwarding %s stops: %s", key, exc)
            await anyio.sleep(min(1.0, self.refresh_s))
        finally:
            if self._tasks.get(key) is scope:
                del self._tasks[key]  # the next refresh starts it again if still wanted

    async def _forward_group(self, key: str | Pair) -> None:
        """Forward a topic as the shared group (``key`` a topic) or as one subscriber's
        own group (``key`` an actor id and topic), fenced by the partition of its name."""
        if isinstance(key, tuple):
            owner, topic = key
            group = subscriber_group(owner)
        else:
            owner = topic = key
            group = SHARED_GROUP
        async with self.mesh.subscribe(
            topic,
            group,
            self.runtime.host,
            start="begin",
            visibility_timeout_ms=self.visibility_timeout_ms,
        ) as sub:
            async for delivery in sub:
                while True:
                    fence = self._fence(owner)
                    if fence is False:
                        return  # the partition moved: its new holder forwards from here
                    if await self._commit(delivery, self._targets(key, delivery.event), fence):
                        break

    def _targets(self, key: str | Pair, event: Event) -> list[str]:
        """Who gets ``event``: the one subscriber of its own group, or every subscriber
        of the shared group whose subscription is older than the event."""
        if isinstance(key, tuple):
            return [key[0]]
        return [a for a, since in self._shared.get(key, {}).items() if event.at_ms >= since]

    async def _commit(self, delivery: Delivery, targets: list[str], fence: Fence | None) -> bool:
        """Forward ``delivery`` to ``targets`` and ack it, in one transaction; False when
        the subscriptions changed since the last refresh (refreshed now: try again).

        Raises:
            VersionConflict: the lease moved (a :class:`MeshError`: the task stops).
        """
        tx = self.mesh.transact()
        tx.check(SUBSCRIPTIONS_VERSION_KEY, self._version)
        if fence is not None:
            tx.check(fence.key, fence.version)
        body = topic_mail(delivery.event) if targets else None
        if body is not None and (STATE.tracing or STATE.metrics):
            body = observe_delivery(delivery, body)
        for actor_id in targets:
            if actor_id in self._tracked:
                tell_tracked_in(tx, actor_id, body)
            else:
                tell_in(tx, actor_id, body)
        tx.ack(delivery)
        try:
            await tx.commit()
        except VersionConflict as exc:
            if exc.key != SUBSCRIPTIONS_VERSION_KEY:
                raise
            await self._fresh()
            return False
        self.forwarded += len(targets)
        return True


__all__ = [
    "MESH_KEYS",
    "ROUTER_VISIBILITY_MS",
    "SHARED_GROUP",
    "SUBSCRIPTIONS_PREFIX",
    "SUBSCRIPTIONS_VERSION_KEY",
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
