"""The local actor runtime: actors as asyncio tasks in this process (the embedded default).

One subscription to every mailbox partition's topic, as a consumer of the group every
runtime on the mesh shares, feeds every actor this process hosts. A message activates its actor (its
record is read, its handler resolved); the activation holds a task only while it has
messages, so idle actors cost their records and nothing else. The tasks come from a
pool that grows to the most messages ever handled at once here (at most
``max_in_flight``) and stays, so a busy runtime does not start a task per message. Each
actor handles at most ``config["max_concurrency"]`` messages at once (default 1, in
mailbox order).

When a process dies, the messages it had taken but not acked are delivered to another
runtime of the group once the visibility timeout passes
(:data:`~plait.actors.MAILBOX_VISIBILITY_TIMEOUT_MS` by default); a message that keeps
failing is moved to :data:`~plait.actors.DEAD_LETTER_TOPIC` after ``max_attempts``,
its kind's dead-letter hook called first. While a handler runs, the runtime keeps its
message's visibility extended, so a slow handler in a live process is never mistaken
for a dead one. Not single activation: runtimes share the mailbox as one consumer
group, so two of them may handle messages of one actor at once (see
:mod:`plait.actors._base` for the contract).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from plait.actors._base import (
    DEAD_LETTER_TOPIC,
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    Accepts,
    ActorContext,
    ActorRuntime,
    Handler,
    Mail,
    delivery_attempt,
    new_host_id,
    resolve_dead_letter_hook,
    resolve_kind,
)
from plait.actors.directory import ActorRecord, find_record
from plait.actors.partitions import load_partitions, mailbox_of, mailbox_topics
from plait.errors import ActorError, MeshUnavailable, PlaitError
from plait.ids import ActorId
from plait.mesh import Backoff, Delivery, Mesh, Subscription, Transaction

log = logging.getLogger("plait.actors")

SERVING_GC_THRESHOLDS = (50_000, 20, 20)
"""Cyclic-GC thresholds for a process that serves runs (see :func:`tune_gc_for_serving`)."""


def tune_gc_for_serving() -> None:
    """Raise the cyclic garbage collector's thresholds for a process that serves runs.

    Serving allocates many short-lived objects per node transition, and at Python's
    default thresholds a busy host spends a large share of its time in collections
    that find little garbage: raising the first threshold lets a collection pay for
    tens of thousands of allocations instead of 700. Process-wide, so an application
    opts in once at startup; ``plait worker`` and the CLI commands that host runs do.
    """
    gc.set_threshold(*SERVING_GC_THRESHOLDS)


MAILBOX_GROUP = "actors"
"""The consumer group every runtime serving a mesh's mailboxes reads them as (default)."""

HAND_BACK_MS = 500
"""How long a message this runtime does not serve waits before it is offered again; each
further hand-back of the same message doubles it, up to :data:`HAND_BACK_MAX_MS`."""

HAND_BACK_MAX_MS = 30_000


@dataclass(eq=False)
class _Activation:
    record: ActorRecord
    handler: Handler
    queue: deque[tuple[Mail, str | None]] = field(default_factory=deque)
    """Messages to handle, each with the reason to dead-letter it instead (or None)."""
    running: int = 0
    starting: int = 0
    """Workers spawned that have not taken a message yet."""
    last_used: float = 0.0
    resting: bool = False
    """Its actor said it has nothing to do until its next message (see rest)."""

    @property
    def max_concurrency(self) -> int:
        return max(1, int(self.record.config.get("max_concurrency", 1)))


_current: contextvars.ContextVar[_Activation | None] = contextvars.ContextVar(
    "plait_actor_activation", default=None
)
"""The activation whose handler runs in this task (each worker task has its own)."""


class LocalRuntime(ActorRuntime):
    """Hosts actors of a mesh in this process.

    Use as ``async with LocalRuntime(mesh) as runtime:``; it serves messages until the
    block ends, then drains: it stops taking messages and waits (up to
    ``drain_timeout_s``) for the handlers in flight.

    Args:
        mesh: the mesh holding actor records and mailboxes.
        host: this runtime's id (default: hostname, pid and a random suffix).
        services: what handlers read from ``ctx.service(...)`` (owner services, say).
        group: the consumer group shared by every runtime serving the same actors.
        visibility_timeout_ms: how long an unacked message waits before another
            runtime may take it (the takeover time after a crash).
        idle_s: how long an idle actor's record stays cached.
        max_attempts: deliveries after which a failing message is dead-lettered.
        max_in_flight: messages taken but not finished, at most.
        handlers: handlers by kind, overriding import by reference (a function, or a
            kind object with an ``on_dead_letter`` method).
        accepts: which actors this runtime activates (default: all). A message for
            another is handed back to the mailbox at once (acked, and published again
            a little later, with its attempt count kept), for a runtime that serves it.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        host: str | None = None,
        services: object | None = None,
        group: str = MAILBOX_GROUP,
        visibility_timeout_ms: int = MAILBOX_VISIBILITY_TIMEOUT_MS,
        idle_s: float = 30.0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        max_in_flight: int = 512,
        drain_timeout_s: float = 30.0,
        handlers: Mapping[str, Handler] | None = None,
        accepts: Accepts | None = None,
    ) -> None:
        self.mesh = mesh
        self.accepts = accepts
        self.host = host or new_host_id()
        self.services = services
        self.group = group
        self.visibility_timeout_ms = visibility_timeout_ms
        self.idle_s = idle_s
        self.max_attempts = max_attempts
        self.drain_timeout_s = drain_timeout_s
        self._handlers = dict(handlers or {})
        self._imported: dict[str, Handler] = {}  # kinds resolved by reference, here only
        self._activations: OrderedDict[str, _Activation] = OrderedDict()
        self._ready: asyncio.Queue[_Activation] = asyncio.Queue()
        """Activations with mail and no worker yet, for the pool of worker tasks."""
        self._pool_idle = 0
        self._pool_starting = 0
        self._slots = anyio.Semaphore(max_in_flight)
        self._in_flight: dict[int, Delivery] = {}
        self._since: dict[int, float] = {}
        """When each in-flight message was last delivered or extended (monotonic)."""
        self._handling: set[str] = set()
        self._routing: dict[str, deque[Delivery]] = {}
        """Actors being activated, each with the messages that came for it meanwhile."""
        self._accepting = 0
        self._closing = False
        self._tg: TaskGroup | None = None
        self._sub: Subscription | None = None
        self._stack = contextlib.AsyncExitStack()
        self._idle = anyio.Event()
        self._idle.set()
        self.handled = 0
        """Messages handled (acked) by this runtime so far."""

    def _forget(self, actor_id: str) -> None:
        self._activations.pop(actor_id, None)

    @property
    def in_flight(self) -> int:
        """Mailbox messages delivered to this runtime and not acked yet."""
        return len(self._in_flight)

    @property
    def active_tasks(self) -> int:
        """Activations holding a task right now (an idle actor holds none)."""
        return sum(1 for a in self._activations.values() if a.running)

    # -- serving -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start serving the mailbox."""
        count = await load_partitions(self.mesh)
        self._ready = asyncio.Queue()
        self._pool_idle = self._pool_starting = 0
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._read(self._first_topics(count))
        self._tg.start_soon(self._keep_visible)

    def _first_topics(self, count: int) -> list[str]:
        """The mailbox topics read from the start: every partition's."""
        return mailbox_topics(count)

    def _read(self, topics: list[str]) -> None:
        """Read these mailbox topics from now on (none: stop reading)."""
        assert self._tg is not None
        old, self._sub = self._sub, None
        if old is not None:
            self._tg.start_soon(old.close)
        if topics:
            # "begin": mail sent before any runtime ever served this mesh must not be lost.
            self._sub = self.mesh.subscribe(
                topics,
                self.group,
                self.host,
                start="begin",
                visibility_timeout_ms=self.visibility_timeout_ms,
            )
            self._tg.start_soon(self._dispatch, self._sub)

    async def close(self) -> None:
        """Stop taking messages, wait for handlers in flight, then stop."""
        if self._tg is None:
            return
        self._closing = True
        try:
            if self._sub is not None:
                await self._sub.close()
            with anyio.move_on_after(self.drain_timeout_s):
                await self._idle.wait()
        finally:
            # Even when the task group is being cancelled (a task of it failed): its
            # scope must be left, or its cancellation leaks into the caller for good.
            self._tg.cancel_scope.cancel()
            await self._stack.aclose()
            self._tg = None
            self._closing = False

    async def wait_idle(self) -> None:
        """Wait until no message is in flight."""
        await self._idle.wait()

    def take_mail_in(self, tx: Transaction, actor_id: str, count: int = 1) -> bool:
        """Add to ``tx`` the take of up to ``count`` mailbox messages (see the contract).

        One mailbox serves every actor here, so the messages taken are the next ones of
        the group, ``actor_id``'s or not.
        """
        topic = self._mailbox_served(actor_id)
        if self._tg is None or self._closing or topic is None:
            return False
        for _ in range(count):
            tx.take(
                topic, self.group, self.host,
                visibility_timeout_ms=self.visibility_timeout_ms,
            )  # fmt: skip
        return True

    def _mailbox_served(self, actor_id: str) -> str | None:
        """The topic of ``actor_id``'s mailbox if this runtime reads it now."""
        return mailbox_of(self.mesh, actor_id)

    def _mail(self, actor_id: ActorId, body: Any, delivery: Delivery) -> Mail | None:
        """The :class:`Mail` a handler gets for a delivery (None: not to be handled here)."""
        return Mail(actor_id, body, delivery)

    def rest(self, actor_id: str) -> None:
        """See :meth:`ActorRuntime.rest`: a parked run's owner, say, holds no memory."""
        activation = self._activations.get(actor_id)
        if activation is not None:
            activation.resting = True

    def keeps(self, actor_id: str) -> bool:
        """See :meth:`ActorRuntime.keeps`: not while closing."""
        return self._tg is not None and not self._closing

    def handling(self, actor_id: str) -> set[str]:
        """See :meth:`ActorRuntime.handling` (a scan of the messages in flight: for rare
        callers, such as a run taken over)."""
        found: set[str] = set()
        for delivery in self._in_flight.values():
            data = delivery.data if isinstance(delivery.data, dict) else {}
            if data.get("to") == actor_id:
                first = data.get("first_id")
                found.add(first if isinstance(first, str) else delivery.id)
        return found

    def handle_taken(self, deliveries: Sequence[Delivery]) -> None:
        """Handle mailbox messages a committed transaction took (see :meth:`take_mail_in`)."""
        if self._tg is None:
            return
        for delivery in deliveries:
            if delivery.id in self._handling:
                continue
            self._busy()
            if not self._enqueue_now(delivery):
                self._accepting += 1
                self._tg.start_soon(self._accept_taken, delivery)

    def _enqueue_now(self, delivery: Delivery) -> bool:
        """Queue a delivery for an actor active here, without a task; False if it can't."""
        data = delivery.data if isinstance(delivery.data, dict) else {}
        actor_id = data.get("to")
        activation = self._activations.get(actor_id) if isinstance(actor_id, str) else None
        if activation is None or delivery_attempt(delivery) > self.max_attempts:
            return False
        mail = self._mail(activation.record.id, data.get("body"), delivery)
        if mail is None:
            return False
        try:
            self._slots.acquire_nowait()
        except anyio.WouldBlock:
            return False
        self._in_flight[id(delivery)] = delivery
        self._since[id(delivery)] = time.monotonic()
        self._handling.add(delivery.id)
        self._enqueue(activation, mail)
        return True

    def _busy(self) -> None:
        """Work arrived: :meth:`wait_idle` waits until it is done."""
        if self._idle.is_set():  # a busy runtime keeps the event its waiters hold
            self._idle = anyio.Event()

    async def _dispatch(self, sub: Subscription) -> None:
        backoff = Backoff(log)
        while True:
            try:
                async for delivery in sub:
                    await self._accept(delivery)
                return
            except MeshUnavailable as exc:
                # The subscription reads on once the mesh is back; what it had handed
                # out and nobody acked is delivered again, so nothing is lost.
                await backoff.wait(exc)

    async def _accept_taken(self, delivery: Delivery) -> None:
        try:
            await self._accept(delivery)
        finally:
            self._accepting -= 1
            if not self._in_flight and not self._accepting:
                self._idle.set()

    async def _accept(self, delivery: Delivery) -> None:
        if delivery.id in self._handling:
            # Redelivered while a handler here still runs it (it outlived the
            # visibility timeout): that handler acks it, so running it again here
            # would only do its work twice.
            return
        try:
            # Not acquire(): it yields to the loop even with a slot free, and the
            # mailbox reader then takes one message per loop iteration, each as long as
            # every handler's turn in it: a busy runtime started new runs 16 at a time
            # that way, one batch per 30 ms, however many waited.
            self._slots.acquire_nowait()
        except anyio.WouldBlock:
            await self._slots.acquire()
        self._in_flight[id(delivery)] = delivery
        self._since[id(delivery)] = time.monotonic()
        self._handling.add(delivery.id)
        self._busy()
        data = delivery.data if isinstance(delivery.data, dict) else {}
        actor_id = data.get("to")
        if not isinstance(actor_id, str) or actor_id in self._activations:
            await self._route_one(delivery)  # no read to wait on: the next message waits
            return
        # A new actor's activation reads its record (and maybe the run's): in a task of
        # its own, so the mailbox read goes on and many actors start at once. Mail for
        # it meanwhile queues behind, in mailbox order.
        waiting = self._routing.get(actor_id)
        if waiting is not None:
            waiting.append(delivery)
            return
        self._routing[actor_id] = deque()
        assert self._tg is not None
        self._tg.start_soon(self._activate_and_route, actor_id, delivery)

    async def _activate_and_route(self, actor_id: str, delivery: Delivery) -> None:
        waiting = self._routing[actor_id]
        try:
            await self._route_one(delivery)
            while waiting:
                await self._route_one(waiting.popleft())
        finally:
            del self._routing[actor_id]
            for left in waiting:  # only when cancelled: redelivered after the timeout
                self._finish(left)

    async def _route_one(self, delivery: Delivery) -> None:
        try:
            await self._route(delivery)
        except MeshUnavailable as exc:
            log.warning("mailbox message %s left for redelivery: %s", delivery.id, exc)
            self._finish(delivery)
        except PlaitError:
            log.exception("cannot route mailbox message %s", delivery.id)
            self._finish(delivery)

    async def _route(self, delivery: Delivery) -> None:
        data = delivery.data if isinstance(delivery.data, dict) else {}
        actor_id = data.get("to")
        if not isinstance(actor_id, str):
            log.error("dropping mailbox message %s without an addressee", delivery.id)
            await self._drop(delivery, "no addressee")
            return
        if self.accepts is not None and not await self.accepts(actor_id):
            await self._hand_back(delivery, data)
            return
        attempt = delivery_attempt(delivery)
        dead = f"failed {attempt - 1} times" if attempt > self.max_attempts else None
        try:
            activation = await self._activate(actor_id)
        except ActorError:
            if dead is None:
                raise
            activation = None  # a kind that cannot load has no hook to call either
        if activation is None:
            await self._drop(delivery, dead or "no such actor, or stopped")
            return
        mail = self._mail(ActorId(actor_id), data.get("body"), delivery)
        if mail is None:
            self._finish(delivery)  # left for the runtime that serves its partition now
            return
        self._enqueue(activation, mail, dead)

    def _enqueue(self, activation: _Activation, mail: Mail, dead: str | None = None) -> None:
        activation.queue.append((mail, dead))
        activation.last_used = time.monotonic()
        assert self._tg is not None
        # One worker per queued message not yet covered by a worker still starting, or
        # by the worker whose handler is queueing it (it takes the next one when done).
        ready = activation.starting + (1 if _current.get() is activation else 0)
        while activation.running < activation.max_concurrency and len(activation.queue) > ready:
            ready += 1
            activation.running += 1
            activation.starting += 1
            self._ready.put_nowait(activation)
            # A worker idle in the pool takes it; only if none is left does one start
            # (starting a task group task costs ten times what handing one work does).
            if self._ready.qsize() > self._pool_idle + self._pool_starting:
                self._pool_starting += 1
                self._tg.start_soon(self._pool_worker)

    async def _pool_worker(self) -> None:
        """Run activations handed to the pool, one at a time, until the runtime stops."""
        self._pool_starting -= 1
        while True:
            self._pool_idle += 1
            try:
                activation = await self._ready.get()
            finally:
                self._pool_idle -= 1
            await self._work(activation)

    async def _activate(self, actor_id: str) -> _Activation | None:
        activation = self._activations.get(actor_id)
        if activation is not None:
            activation.resting = False  # a new message: it has work again
            self._activations.move_to_end(actor_id)
            return activation
        record = await find_record(self.mesh, actor_id)
        if record is None or record.stopped:
            return None
        handler = self._handlers.get(record.kind) or self._imported.get(record.kind)
        if handler is None:
            handler = self._imported[record.kind] = resolve_kind(record.kind)
        activation = _Activation(record, handler, last_used=time.monotonic())
        self._activations[actor_id] = activation
        self._evict_idle()
        return activation

    def _evict_idle(self) -> None:
        cutoff = time.monotonic() - self.idle_s
        oldest = next(iter(self._activations.values()), None)
        if oldest is None or oldest.last_used >= cutoff:
            return  # the usual case, found without copying every activation
        for actor_id, activation in list(self._activations.items()):
            if activation.last_used >= cutoff:
                break
            if not activation.running and not activation.queue:
                del self._activations[actor_id]

    async def _work(self, activation: _Activation) -> None:
        activation.starting -= 1
        try:
            while activation.queue:
                mail, dead = activation.queue.popleft()
                ctx = ActorContext(activation.record, self.mesh, self)
                _current.set(activation)
                try:
                    if dead is not None:
                        await self._dead_letter(activation, ctx, mail, dead)
                    else:
                        await self._handle(activation, ctx, mail)
                except MeshUnavailable as exc:
                    # A commit that raised this may have landed or not. Landed, it
                    # acked this message too and its wakes carry the run on (one this
                    # runtime took for itself comes back after the visibility timeout
                    # and finds its node claimed: on_indeterminate decides). Not landed,
                    # this message comes back and finds its node still claimed for it.
                    # A cached record gone stale only fails its CAS; the record CAS
                    # and the attempt nonce let each visit commit once.
                    log.warning(
                        "actor %s: message %s left for redelivery: %s",
                        activation.record.id,
                        mail.delivery.id,
                        exc,
                    )
                except Exception as exc:
                    # Left unacked: the mesh delivers it again after the visibility
                    # timeout, and dead-letters it after max_attempts. One line per
                    # failed attempt; the traceback only in the debug log.
                    log.warning(
                        "actor %s failed on message %s (attempt %d): %s: %s",
                        activation.record.id,
                        mail.delivery.id,
                        mail.delivery.attempt,
                        type(exc).__name__,
                        str(exc).splitlines()[0] if str(exc) else "",
                    )
                    log.debug("traceback of message %s", mail.delivery.id, exc_info=True)
                finally:
                    self._finish(mail.delivery)
                activation.last_used = time.monotonic()
        finally:
            activation.running -= 1
            if activation.resting and not activation.running and not activation.queue:
                if self._activations.get(activation.record.id) is activation:
                    del self._activations[activation.record.id]

    async def _handle(self, activation: _Activation, ctx: ActorContext, mail: Mail) -> None:
        """Run the handler on one message, then ack it if the handler did not."""
        await activation.handler(ctx, mail)
        if not mail.acked:
            await mail.ack()
        self.handled += 1

    def _finish(self, delivery: Delivery) -> None:
        self._since.pop(id(delivery), None)
        if self._in_flight.pop(id(delivery), None) is not None:
            self._handling.discard(delivery.id)
            self._slots.release()
        if not self._in_flight and not self._accepting:
            self._idle.set()

    async def _hand_back(self, delivery: Delivery, data: dict[str, Any]) -> None:
        """Publish again, later, a message for an actor this runtime does not serve."""
        handed = int(data.get("handed_back", 0))
        again = {
            **data,
            "handed_back": handed + 1,
            # The run owner knows a message by its id, and whether it ran before by
            # its attempt: both survive the copy (this delivery, never handled, does
            # not count as an attempt).
            "first_id": data.get("first_id") or delivery.id,
            "attempts_before": delivery_attempt(delivery) - 1,
        }
        async with self.mesh.transact() as tx:
            tx.publish(
                delivery.topic,
                delivery.kind,
                again,
                after_ms=min(HAND_BACK_MAX_MS, HAND_BACK_MS * 2 ** min(handed, 16)),
            )
            tx.ack(delivery)
        self._finish(delivery)

    async def _dead_letter(
        self, activation: _Activation, ctx: ActorContext, mail: Mail, reason: str
    ) -> None:
        """Call the kind's dead-letter hook, then move the message to the dead letters."""
        kind = activation.record.kind
        try:
            hook = resolve_dead_letter_hook(
                kind, activation.handler, from_module=kind not in self._handlers
            )
            if hook is not None:
                await hook(ctx, mail, reason)
        except MeshUnavailable:
            raise  # left for redelivery: the hook is called again
        except Exception as exc:
            log.warning(
                "actor %s: dead-letter hook failed on message %s: %s: %s",
                ctx.id,
                mail.delivery.id,
                type(exc).__name__,
                exc,
            )
            log.debug("traceback of message %s", mail.delivery.id, exc_info=True)
        await self._drop(mail.delivery, reason)

    async def _drop(self, delivery: Delivery, reason: str) -> None:
        try:
            async with self.mesh.transact() as tx:
                tx.publish(
                    DEAD_LETTER_TOPIC,
                    "dead",
                    {
                        "event": delivery.id,
                        "data": delivery.data,
                        "reason": reason,
                        "host": self.host,
                    },
                )
                tx.ack(delivery)
        finally:
            self._finish(delivery)

    async def _keep_visible(self) -> None:
        """Extend the visibility of messages whose handlers are still running."""
        # At most a second apart whatever our own timeout: another runtime on the mesh
        # may take over with a shorter one (it judges by the last extension it sees).
        period = max(0.05, min(self.visibility_timeout_ms / 3000, 1.0))
        while True:
            await anyio.sleep(period / 2)
            # Most messages finish in milliseconds: only those older than a period need
            # their timeout restarted, so a busy runtime does not extend every message.
            due = time.monotonic() - period
            for key, delivery in list(self._in_flight.items()):
                if self._since.get(key, due) > due:
                    continue
                with contextlib.suppress(PlaitError):
                    await self.mesh.extend(delivery)
                    self._since[key] = time.monotonic()


__all__ = [
    "HAND_BACK_MAX_MS",
    "HAND_BACK_MS",
    "MAILBOX_GROUP",
    "SERVING_GC_THRESHOLDS",
    "LocalRuntime",
    "tune_gc_for_serving",
]
