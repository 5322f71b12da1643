"""The mesh contract: versioned keys with compare-and-swap, durable topics, transactions.

Every backend (memory, SQLite, Redis) implements :class:`Mesh` with the same behaviour;
one conformance suite (``tests/mesh``) holds them to it.

Keys. ``get``/``put``/``delete`` work on single keys. Every key has a version: the first
write makes version 1, and each later write raises it by exactly one. ``put(..,
if_version=0)`` creates only; ``if_version=N`` writes only if the current version is N;
``None`` writes unconditionally. A failed expectation raises :class:`VersionConflict`
and writes nothing. Of any number of concurrent writers with the same ``if_version``,
exactly one succeeds. Deleting a key forgets its version; a later create starts at 1.

Topics. ``publish`` appends an event to a topic; events of one topic are delivered in
publish order. ``after_ms`` delays delivery: the event is held in a schedule and moved
into its topic when due (never early). A ``key`` makes scheduling idempotent: publishing
with a key that is still pending replaces that pending event (one delivery, the latest
data), and ``cancel(key)`` drops it. Scheduled events are durable on SQLite and Redis.

Groups. ``subscribe(topics, group, consumer)`` reads as a member of a consumer group.
Every group sees every event; the consumers of one group share them. Delivery is at
least once: an event stays pending for its group until acked, and an event that a
consumer received but did not ack within ``visibility_timeout_ms`` is delivered again
to a consumer of the group (another one, if another is reading). Consumers therefore
ack only after the effects of an event are committed, ideally in the same transaction.
An ack applies only while the acking consumer still holds the delivery: a late ack
(the event went to another consumer meanwhile) does nothing, so the event stays pending
for its holder. A transaction's ``hold(delivery)`` goes further and fails the batch
(:class:`~plait.errors.DeliveryLost`) once the delivery is no longer its consumer's.

Transactions. ``transact()`` collects puts (each with its own ``if_version``), deletes,
publishes, cancels and acks, and applies them all or none on commit. A failed
expectation on any put or delete raises :class:`VersionConflict` naming that key, and
nothing of the batch happens. A ``check(key, version)`` writes nothing and fails the
batch the same way unless ``key`` is at ``version`` (0: absent) when it commits, so a
commit can be fenced by a key another process moves (a lease's epoch).

Errors. Bad input raises before anything is written: an empty key
(:class:`InvalidKey`), a value msgpack cannot encode (:class:`ValueNotEncodable`), a
value over ``max_value_bytes`` (:class:`ValueTooLarge`). A backend that cannot be
reached, or does not answer in time, raises :class:`MeshUnavailable` (retryable); no
driver exception escapes. The backend never retries a call itself: a write that raised
:class:`MeshUnavailable` may have been applied (its reply was lost, or a paused server
ran it late) or not, all or none, so the caller retries only what a version check or an
idempotent key makes safe to repeat. A subscription whose read raised it may be
iterated again once the backend is back: nothing it delivered and nobody acked is lost,
it is delivered again after its visibility timeout.

Taint. A value or an event may carry one bit of metadata beside it, as a Kafka record
carries headers: ``tainted``, set by a writer that acted on outside content (a fetched
page, an untrusted message). ``put(..., tainted=True)`` stores it with the value and
``publish(..., tainted=True)`` with the event; :class:`Entry` and :class:`Event` give it
back (``False`` unless set), through ``get``, ``scan``, transactions, deliveries and
scheduled events alike. A later untainted put of the key clears it. The mesh only keeps
the bit; what reads a tainted value decides what it means (see :mod:`plait.tools.trust`).
"""

from __future__ import annotations

import abc
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

from plait.errors import InvalidKey, MeshError, VersionConflict
from plait.ids import new_id
from plait.mesh._codec import (
    DEFAULT_MAX_VALUE_BYTES,
    OnCorrupt,
    check_key,
    encode,
    prefix_end,
)
from plait.mesh._live import LiveChannels
from plait.telemetry import STATE, observed_commit

StartFrom = Literal["new", "begin"]
"""Where a consumer group that does not exist yet starts reading a topic.

- ``"new"``: only events published after the group is created.
- ``"begin"``: every event the topic still holds.
"""

DEFAULT_VISIBILITY_TIMEOUT_MS = 30_000
"""How long a received, unacked event waits before it is delivered again, for a
subscription that names no timeout. Actor runtimes pass their own
(:data:`plait.actors.MAILBOX_VISIBILITY_TIMEOUT_MS`, shorter: they extend what they
still handle)."""

TRIM_INTERVAL_S = 10.0
"""How often a subscription trims the topics it reads (see :meth:`Mesh.trim`)."""


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch, the mesh's one notion of time."""
    return time.time_ns() // 1_000_000


def new_event_id() -> str:
    """A fresh event id, ordered by time (see :mod:`plait.ids`)."""
    return new_id()


@dataclass(frozen=True, slots=True)
class Entry:
    """A key's value and its version (1 after the first write)."""

    key: str
    value: Any
    version: int
    tainted: bool = False
    """Whether the writer of this value had read outside content (see the module doc)."""


@dataclass(frozen=True, slots=True)
class Event:
    """An event on a topic.

    Attributes:
        id: the event id :meth:`Mesh.publish` returned.
        topic: the topic it was published on.
        kind: a short type name chosen by the publisher (``"wake"``, ``"decision.answered"``).
        data: the payload, any msgpack-encodable value.
        at_ms: when it was published, in epoch milliseconds.
        tainted: whether its publisher had read outside content (see the module doc).
    """

    id: str
    topic: str
    kind: str
    data: Any
    at_ms: int
    tainted: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class Delivery:
    """An event received by one consumer of a group; ack it once its effects commit.

    Attributes:
        event: the event.
        group: the consumer group that received it.
        consumer: the consumer it was delivered to.
        attempt: 1 on first delivery, more when redelivered after a visibility timeout.
        position: the backend's handle on the event within its topic (opaque).
    """

    event: Event
    group: str
    consumer: str
    attempt: int
    position: Any
    _ack: Callable[[Delivery], Awaitable[None]] = field(repr=False)

    @property
    def id(self) -> str:
        """The event id."""
        return self.event.id

    @property
    def topic(self) -> str:
        """The event's topic."""
        return self.event.topic

    @property
    def kind(self) -> str:
        """The event's kind."""
        return self.event.kind

    @property
    def data(self) -> Any:
        """The event's payload."""
        return self.event.data

    async def ack(self) -> None:
        """Mark the event handled for this group, if this consumer still holds it.

        Acking twice is harmless. A late ack (the delivery outlived its visibility
        timeout and went to another consumer, which holds it now) does nothing: the
        event stays pending for its holder, which acks it, or is delivered again if
        that holder dies before it does.
        """
        await self._ack(self)


# -- transactions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutOp:
    """A put inside a transaction: the value encoded, and as given (for the result)."""

    key: str
    data: bytes
    if_version: int | None
    value: Any = None
    tainted: bool = False


@dataclass(frozen=True, slots=True)
class InsertOp:
    """An insert-if-absent inside a transaction: creates the key unless it exists."""

    key: str
    data: bytes
    value: Any = None
    tainted: bool = False


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """A delete inside a transaction."""

    key: str
    if_version: int | None


@dataclass(frozen=True, slots=True)
class PublishOp:
    """A publish inside a transaction (payload already encoded)."""

    topic: str
    event_id: str
    kind: str
    data: bytes
    at_ms: int
    after_ms: int
    key: str | None
    tainted: bool = False


@dataclass(frozen=True, slots=True)
class CancelOp:
    """A cancel of a scheduled event inside a transaction."""

    key: str


@dataclass(frozen=True, slots=True)
class AckOp:
    """An ack inside a transaction."""

    delivery: Delivery


@dataclass(frozen=True, slots=True)
class HoldOp:
    """A hold check inside a transaction: it fails the batch with
    :class:`~plait.errors.DeliveryLost` unless the delivery's consumer still holds it;
    it writes nothing."""

    delivery: Delivery


@dataclass(frozen=True, slots=True)
class CheckOp:
    """A version check inside a transaction: it fails the batch unless ``key`` is at
    ``version`` (0: absent); it writes nothing."""

    key: str
    version: int


@dataclass(frozen=True, slots=True)
class TakeOp:
    """A take inside a transaction: the next event of a group, for one consumer."""

    topic: str
    group: str
    consumer: str
    visibility_timeout_ms: int


Op = PutOp | InsertOp | DeleteOp | PublishOp | CancelOp | AckOp | TakeOp | CheckOp | HoldOp


@dataclass(frozen=True, slots=True)
class TransactionResult:
    """What a committed transaction wrote.

    Attributes:
        entries: the entry each put produced, by key (and each insert that created
            its key).
        event_ids: the ids of the events it published, in order.
        taken: the deliveries its takes made, in order (a take that found nothing
            makes none).
    """

    entries: dict[str, Entry]
    event_ids: list[str]
    taken: list[Delivery] = field(default_factory=list)


class Transaction:
    """A batch of writes applied atomically by :meth:`commit` (or on leaving ``async with``).

    Values are encoded as they are added, so bad input raises at the call that added it.
    """

    def __init__(self, mesh: Mesh) -> None:
        self._mesh = mesh
        self.ops: list[Op] = []
        self._committed: TransactionResult | None = None

    @property
    def mesh(self) -> Mesh:
        """The mesh this transaction commits to."""
        return self._mesh

    def put(
        self, key: str, value: Any, if_version: int | None = None, *, tainted: bool = False
    ) -> None:
        """Add a put; see :meth:`Mesh.put`."""
        check_key(key)
        _check_version(if_version)
        data = encode(key, value, self._mesh.max_value_bytes)
        self.ops.append(PutOp(key, data, if_version, value, tainted))

    def insert(self, key: str, value: Any, *, tainted: bool = False) -> None:
        """Add an insert-if-absent: create ``key`` at version 1 unless it exists.

        Unlike ``put(key, value, if_version=0)``, a key that exists already does not
        fail the batch: it is left as it is, and the key is missing from
        :attr:`TransactionResult.entries` (an inserted key is there, at version 1).
        Earlier puts and deletes of the same key in the batch are seen by it.
        """
        check_key(key)
        data = encode(key, value, self._mesh.max_value_bytes)
        self.ops.append(InsertOp(key, data, value, tainted))

    def delete(self, key: str, if_version: int | None = None) -> None:
        """Add a delete; see :meth:`Mesh.delete`."""
        check_key(key)
        _check_version(if_version)
        self.ops.append(DeleteOp(key, if_version))

    def check(self, key: str, version: int) -> None:
        """Fail the whole batch with :class:`VersionConflict` unless ``key`` is at
        ``version`` when it commits (0: the key does not exist); writes nothing."""
        check_key(key)
        _check_version(version)
        self.ops.append(CheckOp(key, version))

    def publish(
        self,
        topic: str,
        kind: str,
        data: Any = None,
        *,
        after_ms: int = 0,
        key: str | None = None,
        tainted: bool = False,
    ) -> str:
        """Add a publish and return the id the event will have; see :meth:`Mesh.publish`."""
        op = self._mesh._publish_op(topic, kind, data, after_ms, key, tainted)
        self.ops.append(op)
        return op.event_id

    def cancel(self, key: str) -> None:
        """Add the cancel of a scheduled event; see :meth:`Mesh.cancel`."""
        check_key(key, "schedule key")
        self.ops.append(CancelOp(key))

    def ack(self, delivery: Delivery) -> None:
        """Add the ack of a delivery; like :meth:`Delivery.ack`, it does nothing (and
        fails nothing) once its consumer no longer holds it."""
        self.ops.append(AckOp(delivery))

    def hold(self, delivery: Delivery) -> None:
        """Fail the whole batch with :class:`~plait.errors.DeliveryLost` unless
        ``delivery``'s consumer still holds it when it commits (not acked, not delivered
        to another consumer since); writes nothing.

        For work done under a delivery that is left unacked: a consumer whose delivery
        went to another meanwhile must not write as if it were still its handler.
        """
        self.ops.append(HoldOp(delivery))

    def take(
        self,
        topic: str,
        group: str,
        consumer: str,
        *,
        visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS,
    ) -> None:
        """Deliver to ``consumer`` the next new event of ``group`` on ``topic``, atomically.

        After the batch's own publishes, the event the group would hand out next (if
        any) becomes pending for ``consumer``, exactly as if its subscription had read
        it, and comes back in :attr:`TransactionResult.taken`. A consumer that publishes
        work for itself takes it in the same commit instead of reading it back. The
        group must exist already (a subscription created it); otherwise nothing is
        taken.
        """
        check_key(topic, "topic")
        self.ops.append(TakeOp(topic, group, consumer, visibility_timeout_ms))

    async def commit(self) -> TransactionResult:
        """Apply every operation atomically, or none.

        Raises:
            VersionConflict: a put or delete's ``if_version``, or a check, did not hold; nothing was
                written, published, cancelled or acked.
            DeliveryLost: a held delivery is no longer its consumer's (a VersionConflict).
        """
        if self._committed is None:
            if STATE.tracing or STATE.metrics:
                mesh, ops = self._mesh, self.ops
                self._committed = await observed_commit(
                    mesh.backend, ops, lambda: mesh._commit(ops)
                )
            else:
                self._committed = await self._mesh._commit(self.ops)
        return self._committed

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self.commit()


def scan_bounds(
    prefix: str, reverse: bool, limit: int | None, after: str | None
) -> tuple[str | None, str | None, bool, bool]:
    """The key range a scan reads, (low, high, low inclusive, high inclusive) with None
    for no bound, after checking the scan's arguments.

    Raises:
        InvalidKey: ``prefix`` or ``after`` is not a str.
        ValueError: ``limit`` is not None or an int >= 0.
    """
    if not isinstance(prefix, str):
        raise InvalidKey(f"a scan prefix must be a str, got {type(prefix).__name__}")
    if after is not None and not isinstance(after, str):
        raise InvalidKey(f"a scan's after must be a str, got {type(after).__name__}")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"a scan's limit must be None or an int >= 0, got {limit!r}")
    low: str | None = prefix or None
    high = prefix_end(prefix)
    low_in, high_in = True, False
    if after is not None:
        if not reverse and (low is None or after >= low):
            low, low_in = after, False
        elif reverse and (high is None or after < high):
            high, high_in = after, False
    return low, high, low_in, high_in


def check_prefix(prefix: str) -> None:
    """Refuse the prefix of a prefix delete unless it is a non-empty str."""
    if not isinstance(prefix, str) or not prefix:
        raise InvalidKey("delete_prefix needs a non-empty str prefix")


def _check_version(if_version: int | None) -> None:
    if if_version is not None and (
        not isinstance(if_version, int) or isinstance(if_version, bool) or if_version < 0
    ):
        raise ValueError(f"if_version must be None or an int >= 0, got {if_version!r}")


# -- the mesh -----------------------------------------------------------------------


class Subscription(abc.ABC):
    """An async iterator of :class:`Delivery` for one consumer of one group.

    Iteration waits for events and ends once :meth:`close` is called (or the mesh is
    closed). Use as ``async with mesh.subscribe(...) as sub: async for d in sub: ...``.
    """

    def __aiter__(self) -> Self:
        return self

    @abc.abstractmethod
    async def __anext__(self) -> Delivery:
        """The next delivery; waits until there is one."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop reading; unacked deliveries stay pending for the group."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Mesh(abc.ABC):
    """A versioned key-value store with CAS, durable topics and atomic transactions.

    Use as ``async with open_mesh(url) as mesh:``; every method may also be called
    after :meth:`open` and before :meth:`close`.
    """

    url: str
    """The mesh URL, with any password replaced by ``***``."""

    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES

    commit_yields: bool = False
    """Whether every commit returns to the event loop before it completes (a batched
    flush, a round trip), so a caller looping over commits gives others their turn
    without a yield of its own."""

    shares_across_processes: ClassVar[bool] = False
    """Whether other processes see this mesh's data: those of this machine at least
    (a file, a server). False: it lives in this process only."""

    shares_across_machines: ClassVar[bool] = False
    """Whether processes on other machines can open this mesh (a server they reach):
    what a runtime whose hosts may run elsewhere, Ray's, needs."""

    reach: ClassVar[str] = "this process"
    """From where this kind of mesh can be opened, for messages: ``this process``,
    ``this machine``, ``any machine that reaches its server``."""

    @property
    def backend(self) -> str:
        """The backend's name, the scheme of its URL (``memory``, ``sqlite``, ``redis``)."""
        return self.url.partition(":")[0]

    @property
    def location(self) -> str:
        """Where this mesh's data lives, for messages (credentials masked)."""
        return self.url

    @property
    def live(self) -> LiveChannels | None:
        """The mesh's live channels (see :mod:`plait.mesh._live`), or None for a backend
        that has none: what would stream on it does not."""
        return None

    @property
    def local_files(self) -> tuple[Path, ...]:
        """The files on this machine that hold the mesh's data; tools never touch them."""
        return ()

    async def open(self) -> None:  # noqa: B027 -- optional hook, default does nothing
        """Connect and check the backend; raises :class:`MeshUnavailable` if it can't."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections and end every subscription of this mesh object."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def migrate(self) -> str:
        """Create the backend's tables or bring them to this plait's layout, and say
        what was done, in one line; idempotent.

        Opening a mesh does this too; ``plait mesh migrate`` does it alone, for an
        operator who upgrades plait and wants the schema changed before workers start.
        SQLite migrates its file on open; memory and Redis keep no schema.
        """
        await self.open()
        return f"{self.location}: nothing to migrate"

    # clock --------------------------------------------------------------------------

    async def now_ms(self) -> int:
        """The mesh's time in epoch milliseconds: the one clock that expiries written by
        several processes (partition leases, memberships) are judged by.

        A worker's own clock may run ahead or behind the others' (a host 60 s fast); one
        that compared a lease's expiry against it would take leases that are still held.
        Memory and SQLite meshes live on one host, so their clock is that host's (this
        default). A backend on a server answers with the server's clock: Redis its
        ``TIME``; a PostgreSQL backend overrides this with ``SELECT now()``.

        Raises:
            MeshUnavailable: a server backend cannot be reached.
        """
        return now_ms()

    # keys ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def get(self, key: str) -> Entry | None:
        """The entry at ``key``, or None if it does not exist."""

    @abc.abstractmethod
    async def put(
        self, key: str, value: Any, if_version: int | None = None, *, tainted: bool = False
    ) -> Entry:
        """Write ``value`` at ``key`` and return the new entry.

        Args:
            key: a non-empty string.
            value: any msgpack-encodable value.
            if_version: None writes unconditionally; 0 only creates; N writes only if
                the current version is N.
            tainted: store the value as tainted (its writer read outside content);
                False clears a taint the key had.

        Raises:
            VersionConflict: ``if_version`` did not hold; nothing was written.
        """

    @abc.abstractmethod
    async def delete(self, key: str, if_version: int | None = None) -> bool:
        """Delete ``key``; True if it existed.

        Raises:
            VersionConflict: ``if_version`` is set and the current version differs
                (a missing key has version 0).
        """

    @abc.abstractmethod
    def scan(
        self,
        prefix: str = "",
        *,
        on_corrupt: OnCorrupt | None = None,
        reverse: bool = False,
        limit: int | None = None,
        after: str | None = None,
    ) -> AsyncIterator[Entry]:
        """Every entry whose key starts with ``prefix``, in key order, read page by page.

        Args:
            prefix: only keys starting with this ("": every key).
            on_corrupt: called with each value that does not decode, which is skipped.
            reverse: in descending key order (the latest of ordered keys first).
            limit: at most this many entries (None: all); no more pages are read
                than that needs.
            after: start past this key in the scan's order: keys above it, or below it
                when ``reverse`` (to go on from the last key of an earlier scan).

        Raises:
            CorruptValue: a value does not decode, unless ``on_corrupt`` is given: then
                it is called with the error and the scan goes on past that key.
        """

    async def get_many(self, keys: Sequence[str]) -> list[Entry | None]:
        """The entry at each of ``keys`` (None where there is none), in the order given.

        One round trip on a server backend (one statement on PostgreSQL, one pipeline
        on Redis), one read on SQLite.
        """
        return [await self.get(key) for key in keys]

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every key starting with ``prefix`` atomically; how many were deleted.

        All or nothing, like a transaction: no reader sees some of the keys gone and
        others not. For the bounded sets of keys one owner keeps (a run's log, a
        thread's checkpoints), not millions at once: a backend holds its write lock
        for the whole delete.

        Raises:
            InvalidKey: ``prefix`` is empty or not a str (deleting every key is not a
                prefix delete).
        """
        check_prefix(prefix)
        while True:  # a transaction of version-checked deletes: retried if a key moved
            tx = self.transact()
            async for entry in self.scan(prefix):
                tx.delete(entry.key, if_version=entry.version)
            try:
                await tx.commit()
            except VersionConflict:
                continue
            return len(tx.ops)

    # topics -------------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        kind: str,
        data: Any = None,
        *,
        after_ms: int = 0,
        key: str | None = None,
        tainted: bool = False,
    ) -> str:
        """Append an event to ``topic`` and return its id.

        Args:
            topic: the topic.
            kind: a short type name for the event.
            data: any msgpack-encodable payload.
            after_ms: deliver no earlier than this many milliseconds from now.
            key: a schedule key; publishing again with the same key replaces the
                pending event instead of adding one, and :meth:`cancel` drops it.
            tainted: mark the event tainted (its publisher read outside content); its
                readers get :attr:`Event.tainted`.
        """
        op = self._publish_op(topic, kind, data, after_ms, key, tainted)
        await self._commit([op])
        return op.event_id

    async def cancel(self, key: str) -> None:
        """Drop the pending scheduled event with this key, if there is one."""
        check_key(key, "schedule key")
        await self._commit([CancelOp(key)])

    @abc.abstractmethod
    def subscribe(
        self,
        topics: str | Sequence[str],
        group: str,
        consumer: str,
        *,
        start: StartFrom = "new",
        visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS,
    ) -> Subscription:
        """Read ``topics`` as ``consumer`` of ``group``, creating the group if needed.

        Args:
            topics: one topic or several.
            group: the consumer group; every group sees every event.
            consumer: this reader's name within the group.
            start: where a new group starts (an existing group keeps its place).
            visibility_timeout_ms: how long a delivered, unacked event waits before it
                goes to a consumer of the group again.
        """

    @abc.abstractmethod
    async def extend(self, delivery: Delivery) -> None:
        """Restart the visibility timeout of a delivery its consumer is still handling.

        A consumer that works on an event for longer than the visibility timeout calls
        this periodically, so the event is not handed to another consumer while its
        first one is alive. Extending an acked delivery, or one another consumer holds
        now, does nothing.
        """

    async def trim(self, topic: str) -> int:
        """Forget the events of ``topic`` that every group has passed and acked.

        Returns how many were removed. A topic with no group keeps everything (a
        group made later with ``start="begin"`` reads what the topic still holds).
        Subscriptions call this now and then, so topics do not grow without end. The
        memory mesh keeps every event: it lives only as long as its process.
        """
        check_key(topic, "topic")
        return 0

    @abc.abstractmethod
    async def delete_topic(self, topic: str) -> None:
        """Delete ``topic``: every event it holds, and its groups' places and pending.

        For topics whose readers are done (a pruned run's leftovers). A subscription
        still reading it may hand out what it had already fetched, then reads the topic
        as new; acking a delivery of the deleted topic does nothing. A later publish (or
        a scheduled event falling due) makes the topic anew. Deleting a topic that does
        not exist does nothing.
        """

    async def topics(self, prefix: str = "") -> list[str]:
        """The names of the topics that exist and start with ``prefix``, sorted.

        A topic is listed once it holds an event (a scheduled one once it is due) or a
        consumer group; a deleted topic with no groups is not. For readers that follow
        topics by prefix (an actor subscribed to ``tasks.*``); it lists, it never waits.

        Raises:
            MeshError: the backend cannot list its topics (it refuses, not guesses).
        """
        raise MeshError(f"the mesh {self.url} cannot list its topics")

    async def backlog(self, topic: str, group: str) -> int:
        """How many events of ``topic`` ``group`` has not acked: those it has not
        taken yet and those taken and not acked (scheduled events not yet due are not
        counted). With no such group, every event the topic holds; 0 for no topic.

        For status views (a partition's backlog); it counts, it never takes.

        Raises:
            MeshError: the backend cannot count (it refuses, not guesses).
        """
        raise MeshError(f"the mesh {self.url} cannot count a topic's backlog")

    @abc.abstractmethod
    async def drop_group(self, topics: str | Sequence[str], group: str) -> None:
        """Forget a consumer group on ``topics``: its place and its pending events.

        For short-lived readers (a CLI watching one run) that subscribe under a group
        of their own; dropping a group that does not exist does nothing.
        """

    # transactions -------------------------------------------------------------------

    def transact(self) -> Transaction:
        """A new transaction; see :class:`Transaction`."""
        return Transaction(self)

    @abc.abstractmethod
    async def _commit(self, ops: Sequence[Op]) -> TransactionResult:
        """Apply ``ops`` atomically (backends implement this)."""

    def _publish_op(
        self,
        topic: str,
        kind: str,
        data: Any,
        after_ms: int,
        key: str | None,
        tainted: bool = False,
    ) -> PublishOp:
        check_key(topic, "topic")
        if not isinstance(kind, str) or not kind:
            raise ValueError("an event kind must be a non-empty str")
        if not isinstance(after_ms, int) or isinstance(after_ms, bool) or after_ms < 0:
            raise ValueError(f"after_ms must be an int >= 0, got {after_ms!r}")
        if key is not None:
            check_key(key, "schedule key")
        payload = encode(topic, data, self.max_value_bytes)
        return PublishOp(topic, new_event_id(), kind, payload, now_ms(), after_ms, key, tainted)


__all__ = [
    "DEFAULT_VISIBILITY_TIMEOUT_MS",
    "TRIM_INTERVAL_S",
    "AckOp",
    "CancelOp",
    "CheckOp",
    "DeleteOp",
    "Delivery",
    "Entry",
    "Event",
    "HoldOp",
    "InsertOp",
    "Mesh",
    "Op",
    "PublishOp",
    "PutOp",
    "StartFrom",
    "Subscription",
    "TakeOp",
    "Transaction",
    "TransactionResult",
    "check_prefix",
    "new_event_id",
    "now_ms",
    "scan_bounds",
]
