"""The actor-runtime contract: what every runtime guarantees and what a handler may assume.

An actor is an id and a record in the mesh (:mod:`plait.actors.directory`): its kind
names its handler (``"package.module:attr"``), its config its settings. A runtime
serves the mailbox of a mesh: it activates an actor when a message for it arrives (its
record is read, its handler resolved) and lets it go when idle, so a parked actor costs
only its record. Every runtime (``local`` today, ``ray`` to come) implements
:class:`ActorRuntime`; one conformance suite (``tests/actors``) holds them to it.

Activation. Within one runtime an actor has at most one activation. Whether it has at
most one in the whole mesh is :attr:`ActorRuntime.single_activation`: false for the
local runtime, whose runtimes share the mailbox as one consumer group (two of them may
each handle a message of the same actor at once); true for a runtime that serves only
the mailbox partitions it holds a lease on. Handlers never rely on it: the mesh's
compare-and-swap is the last fence.

Delivery is at least once. A message is handed to its actor's handler until one
delivery is acked; an actor handles at most ``config["max_concurrency"]`` messages at
once (default 1), started in the order the runtime received them, which for first
deliveries is mailbox order (a message delivered again comes back behind later ones).

Ack. A handler acks after its effects commit, ideally in the same mesh transaction
(:meth:`Mail.ack_in`), so effects and ack land together or not at all. A handler that
returns without acking is acked by the runtime; one that raises is not (an ack already
committed in its transaction stands).

Visibility and redelivery. A message taken but not acked is delivered again once its
visibility timeout passes without an extension: after a handler raised, or after its
runtime died. While a handler runs, its runtime keeps extending the visibility, so a
slow handler in a live process is never taken for a dead one. :attr:`Mail.attempt`
counts deliveries (1 on the first).

Dead letters. A message delivered more than :attr:`ActorRuntime.max_attempts` times,
or addressed to an actor that does not exist or is stopped, is moved to
:data:`DEAD_LETTER_TOPIC` (published and acked in one transaction) instead of handled.
Before a message of an existing actor is dead-lettered for its attempts, the kind's
dead-letter hook (:func:`resolve_dead_letter_hook`) is called with the reason, in
mailbox order like a message; it is called at least once (a hook that raises
:class:`~plait.errors.MeshUnavailable` leaves the message for redelivery and is called
again; any other error is logged and the message dead-lettered all the same).

What a handler may assume: its actor's record exists and is not stopped (as of its
activation); the message may have been handled before (``mail.attempt > 1``, or an
earlier delivery's effects committed and its ack was lost with its process); its
runtime's services (:attr:`ActorContext.services`) are whatever the serving process
constructed the runtime with. Handlers are therefore idempotent.
"""

from __future__ import annotations

import abc
import importlib
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType, TracebackType
from typing import Any, ClassVar, Protocol, Self, TypeVar

from plait.actors.directory import ActorRecord, create_record, get_record, stop_record, tell_now
from plait.errors import ActorError, DeliveryLost, VersionConflict
from plait.ids import ActorId, new_id
from plait.mesh import Delivery, Mesh, Transaction

MAILBOX_VISIBILITY_TIMEOUT_MS = 10_000
"""A runtime's default visibility timeout for mailbox messages: how long a message a
dead runtime took waits before another runtime takes it (the takeover time after a
crash). Shorter than the mesh's generic ``DEFAULT_VISIBILITY_TIMEOUT_MS`` because a
runtime extends the messages it is still handling, so a short timeout costs a live
handler nothing."""

DEFAULT_MAX_ATTEMPTS = 25
"""A runtime's default deliveries of one message before it is dead-lettered."""

DEAD_LETTER_TOPIC = "actors.dead"
"""Where messages go that are not handled: failed ``max_attempts`` times, or addressed
to no actor or a stopped one. Each event's data: ``event`` (the message's event id),
``data`` (its mailbox data), ``reason`` and ``host``."""

MESH_TOPICS = (DEAD_LETTER_TOPIC,)
"""The topics (or topic prefixes) this service owns: code given the mesh may not publish
on them (``plait.programs.capabilities`` guards them; a test checks it does)."""

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Fence:
    """What a leased runtime's acks are fenced by: ``key`` must be at ``version``."""

    mesh: Mesh
    key: str
    version: int


@dataclass(eq=False)
class Mail:
    """One mailbox message being handled.

    Attributes:
        actor_id: the addressee.
        body: the message.
        delivery: the mesh delivery (its ``attempt`` > 1 means it came again).
        acked: whether this message's ack was committed (or added to a transaction).
        fence: a key and the version it must be at for the ack to commit (a partition
            lease's epoch, set by a leased runtime): a transaction that acks this
            message fails, whole, once its runtime lost the partition.
    """

    actor_id: ActorId
    body: Any
    delivery: Delivery
    acked: bool = field(default=False)
    fence: Fence | None = None

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
        """Ack this message as part of ``tx``, so the ack commits with the effects; with a
        :attr:`fence`, ``tx`` commits only while it holds (else VersionConflict)."""
        if self.fence is not None:
            tx.check(self.fence.key, self.fence.version)
        tx.ack(self.delivery)
        self.acked = True

    def hold_in(self, tx: Transaction) -> None:
        """Make ``tx`` commit only while this message is still this handler's: fenced
        like :meth:`ack_in`, and while this consumer still holds the delivery (not
        delivered to another after its visibility timeout). For a commit that leaves the
        message unacked and goes on under it (see :meth:`lost` for what it raises)."""
        if self.fence is not None:
            tx.check(self.fence.key, self.fence.version)
        tx.hold(self.delivery)

    def lost(self, exc: VersionConflict) -> bool:
        """Whether ``exc``, raised by a commit with :meth:`hold_in` or :meth:`ack_in`,
        says this message is no longer this handler's (another consumer holds it, or
        the runtime lost its partition). If so, the handler stops: the message is its
        holder's to ack, so this one is marked acked and no ack of it is sent."""
        if isinstance(exc, DeliveryLost) or (self.fence is not None and exc.key == self.fence.key):
            self.acked = True
            return True
        return False

    async def ack(self) -> None:
        """Ack this message now (fenced like :meth:`ack_in`)."""
        if self.fence is None:
            await self.delivery.ack()
        else:
            async with self.fence.mesh.transact() as tx:
                self.ack_in(tx)
        self.acked = True


def _handed_back(delivery: Delivery) -> dict[str, Any]:
    data = delivery.data
    return data if isinstance(data, dict) else {}


def delivery_attempt(delivery: Delivery) -> int:
    """A mailbox delivery's attempt, counting those of the messages it was handed back as."""
    before = _handed_back(delivery).get("attempts_before", 0)
    return delivery.attempt + (before if isinstance(before, int) else 0)


class ServiceParts(Protocol):
    """Services made of typed parts: :meth:`ActorContext.service` asked for the type of
    a part gets that part."""

    def part(self, kind: type[S]) -> S | None:
        """The part of these services that is a ``kind``, if any."""
        ...


@dataclass(eq=False)
class ActorContext:
    """What a handler gets besides the message: who it is and how to reach others."""

    record: ActorRecord
    mesh: Mesh
    runtime: ActorRuntime

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

    @property
    def services(self) -> object | None:
        """What the serving process gave its runtime for handlers (see :meth:`service`)."""
        return self.runtime.services

    def service(self, kind: type[S]) -> S:
        """The runtime's services as a ``kind``, or the part of them that is one (a run
        owner asks for its owner services, an agent actor for the run services holding them).

        Raises:
            ActorError: the runtime was constructed without services of that type.
        """
        found: Any = self.runtime.services
        if not isinstance(found, kind):
            # A ServiceParts, found by its method: an isinstance of a runtime-checkable
            # protocol costs tens of microseconds, and a run owner asks once per message.
            part = getattr(found, "part", None)
            if part is not None:
                found = part(kind)
        if not isinstance(found, kind):
            raise ActorError(
                f"actor {self.id!r} needs a {kind.__name__} in its runtime's services, "
                f"got {type(found).__name__}: construct the runtime with services=..."
            )
        return found

    async def tell(
        self, actor_id: ActorId, body: Any, *, after_ms: int = 0, key: str | None = None
    ) -> str:
        """Send ``body`` to ``actor_id`` (optionally later, with a schedule key)."""
        return await self.runtime.tell(actor_id, body, after_ms=after_ms, key=key)

    async def stop(self) -> None:
        """Stop this actor: its record is marked stopped and later messages dropped."""
        await self.runtime.stop(self.record.id)

    def rest(self) -> None:
        """Say this actor has nothing to do until its next message: the runtime lets its
        activation go once its handlers finish, instead of keeping it until idle."""
        self.runtime.rest(self.record.id)


Handler = Callable[[ActorContext, Mail], Awaitable[None]]
"""An actor's behaviour: ``async def handle(ctx, mail) -> None``."""

DeadLetterHook = Callable[[ActorContext, Mail, str], Awaitable[None]]
"""Called before a message is dead-lettered: ``async def on_dead_letter(ctx, mail,
reason)``. It may ack the message in a transaction of its own effects."""

Accepts = Callable[[str], Awaitable[bool]]
"""Whether a runtime activates an actor (by id); the messages of others are handed back."""

DEAD_LETTER_HOOK = "on_dead_letter"
"""The attribute naming a kind's dead-letter hook (see :func:`resolve_dead_letter_hook`)."""


@dataclass(frozen=True, slots=True)
class ActorKind:
    """A kind's handler and its dead-letter hook, as a serving process's table of kinds
    holds them (``serve(..., kinds={name: ActorKind(handle, on_dead_letter)})``).

    Attributes:
        handle: the handler.
        on_dead_letter: the hook called before one of its messages is dead-lettered.
    """

    handle: Handler
    on_dead_letter: DeadLetterHook | None = None

    async def __call__(self, ctx: ActorContext, mail: Mail) -> None:
        await self.handle(ctx, mail)


def _split_kind(kind: str) -> tuple[ModuleType, str]:
    module_name, _, attr = kind.partition(":")
    if not module_name or not attr:
        raise ActorError(f"actor kind {kind!r} must look like 'package.module:handler'")
    try:
        return importlib.import_module(module_name), attr
    except ImportError as exc:
        raise ActorError(f"cannot load actor kind {kind!r}: {exc}") from exc


def resolve_kind(kind: str) -> Handler:
    """The handler a kind names (``"package.module:attr"``), imported: for a kind the
    serving process was not given (runtimes keep what they resolved, never a global)."""
    module, attr = _split_kind(kind)
    handler = getattr(module, attr, None)
    if handler is None:
        raise ActorError(f"cannot load actor kind {kind!r}: {module.__name__} has no {attr!r}")
    if not callable(handler):
        raise ActorError(f"actor kind {kind!r} is not callable")
    return handler  # type: ignore[no-any-return]


def resolve_dead_letter_hook(
    kind: str, handler: Handler, *, from_module: bool = True
) -> DeadLetterHook | None:
    """A kind's dead-letter hook, or None if it has none.

    Resolved like the handler: the handler's own ``on_dead_letter`` attribute (a kind
    object with an ``on_dead_letter`` method), else, with ``from_module`` (a handler
    resolved by reference ``"package.module:handle"``), the module's
    ``on_dead_letter``: one kind per module, or a kind object.
    """
    hook = getattr(handler, DEAD_LETTER_HOOK, None)
    if hook is None and from_module:
        hook = getattr(_split_kind(kind)[0], DEAD_LETTER_HOOK, None)
    if hook is not None and not callable(hook):
        raise ActorError(f"the {DEAD_LETTER_HOOK} of actor kind {kind!r} is not callable")
    return hook


def new_host_id() -> str:
    """A host id unique to this process: ``hostname:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()}"


class ActorRuntime(abc.ABC):
    """Serves the actors of a mesh: the contract every runtime implements.

    Use as ``async with Runtime(mesh, ...) as runtime:``: it serves mailbox messages
    until the block ends, then drains (stops taking messages and waits, up to its drain
    timeout, for the handlers in flight; those cut short are left unacked, for another
    runtime after the visibility timeout). Records and mail go through
    :mod:`plait.actors.directory`, so :meth:`create`, :meth:`get`, :meth:`tell` and
    :meth:`stop` work whether or not the runtime is serving.

    Constructors take the mesh and, by keyword, at least ``host``, ``services``,
    ``visibility_timeout_ms``, ``max_attempts``, ``drain_timeout_s``, ``handlers``
    (handlers by kind, overriding import by reference) and ``accepts``.
    """

    single_activation: ClassVar[bool] = False
    """Whether an actor is active in at most one runtime of the mesh at a time."""

    mesh: Mesh
    """The mesh holding actor records and mailboxes."""

    host: str
    """This runtime's id, unique on the mesh (default :func:`new_host_id`)."""

    max_attempts: int
    """Deliveries of one message after which it is dead-lettered."""

    visibility_timeout_ms: int
    """How long a message this runtime took waits, unextended, before another takes it."""

    services: object | None
    """What the serving process injects for handlers (owner services, for run owners): set
    at construction, or assigned before :meth:`start`. Handlers read it through
    :meth:`ActorContext.service`; the runtime never looks inside it, but for the hooks it
    offers services (a leased runtime tells :class:`~plait.actors.GainsPartitions` of
    partitions it takes over)."""

    accepts: Accepts | None
    """Which actors this runtime activates (None: all). A message for another is handed
    back to the mailbox at once, its id and attempt count kept, for a runtime that
    serves it. Set before :meth:`start`."""

    # -- actor records (shared by every runtime) --------------------------------------

    async def create(
        self,
        actor_id: ActorId,
        kind: str,
        *,
        topics: list[str] | None = None,
        config: dict[str, Any] | None = None,
        exist_ok: bool = False,
    ) -> ActorRecord:
        """Create an actor's record; with ``exist_ok`` an existing one is returned.

        Raises:
            ActorError: it exists and ``exist_ok`` is false.
        """
        return await create_record(
            self.mesh, actor_id, kind, topics=topics, config=config, exist_ok=exist_ok
        )

    async def get(self, actor_id: ActorId) -> ActorRecord:
        """An actor's record.

        Raises:
            ActorNotFound: there is none.
        """
        return await get_record(self.mesh, actor_id)

    async def tell(
        self, actor_id: ActorId, body: Any, *, after_ms: int = 0, key: str | None = None
    ) -> str:
        """Send ``body`` to an actor's mailbox (optionally later, with a schedule key);
        the message's event id. In a transaction, use :func:`~plait.actors.tell_in`."""
        return await tell_now(self.mesh, actor_id, body, after_ms=after_ms, key=key)

    async def stop(self, actor_id: ActorId) -> None:
        """Mark an actor stopped; its later messages are dropped (dead-lettered).

        Raises:
            ActorNotFound: there is none.
        """
        await stop_record(self.mesh, actor_id)
        self._forget(actor_id)

    def _forget(self, actor_id: str) -> None:  # noqa: B027 -- optional hook
        """Let go of a stopped actor's activation here (runtimes that cache one)."""

    # -- serving -----------------------------------------------------------------------

    @abc.abstractmethod
    async def start(self) -> None:
        """Start serving the mailbox (mail sent before any runtime served it included)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop taking messages, wait (up to the drain timeout) for handlers, then stop.

        Handlers still running after the drain timeout are cancelled, their messages
        left unacked. Closing a runtime that is not serving does nothing.
        """

    @abc.abstractmethod
    async def wait_idle(self) -> None:
        """Wait until no message taken by this runtime is in flight."""

    @abc.abstractmethod
    def take_mail_in(self, tx: Transaction, actor_id: str, count: int = 1) -> bool:
        """Add to ``tx`` the take of up to ``count`` mailbox messages its own commit sends
        to ``actor_id``: the commit-time hand-off.

        A handler that tells an actor (its own next wake) in a transaction calls this on
        the same transaction and, once it commits, passes
        :attr:`~plait.mesh.TransactionResult.taken` to :meth:`handle_taken`: the runtime
        continues with those messages without reading them back from the mesh. It may
        take other messages of the same mailbox instead; whatever it takes it handles
        like any delivery. False (nothing added) while not serving, or when this
        runtime cannot serve ``actor_id``'s mailbox: the messages are delivered as usual.
        """

    def rest(self, actor_id: str) -> None:  # noqa: B027 -- optional hook
        """See :meth:`ActorContext.rest`; a runtime without activations ignores it."""

    def keeps(self, actor_id: str) -> bool:
        """Whether a handler of ``actor_id`` may go on with more of its actor's work
        in the message it holds (a run's owner continuing with its next node) rather
        than leave it to a new message: False once this runtime is closing, or (where
        mailboxes are leased) gives up the actor's partition."""
        return True

    def handling(self, actor_id: str) -> set[str] | None:
        """The ids (:attr:`Mail.id`) of ``actor_id``'s messages this runtime has taken
        and not finished, queued or running; None if this runtime cannot tell."""
        return None

    @abc.abstractmethod
    def handle_taken(self, deliveries: Sequence[Delivery]) -> None:
        """Handle the mailbox messages a committed transaction took (see
        :meth:`take_mail_in`); returns at once.

        They are pending for this runtime; if it stops before handling them the mesh
        delivers them again after the visibility timeout, as any other.
        """

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


__all__ = [
    "DEAD_LETTER_HOOK",
    "DEAD_LETTER_TOPIC",
    "DEFAULT_MAX_ATTEMPTS",
    "MAILBOX_VISIBILITY_TIMEOUT_MS",
    "MESH_TOPICS",
    "Accepts",
    "ActorContext",
    "ActorKind",
    "ActorRuntime",
    "DeadLetterHook",
    "Fence",
    "Handler",
    "Mail",
    "ServiceParts",
    "delivery_attempt",
    "new_host_id",
    "resolve_dead_letter_hook",
    "resolve_kind",
]
