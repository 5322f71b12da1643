"""Durable actors: the room where messages become handler calls.

An actor is an id and a record in the mesh; its mailbox is a mesh topic; a runtime
activates it where its mail is served and lets it go when idle. Three parts:

- :mod:`plait.actors._base` — the :class:`ActorRuntime` contract, written once in its
  docstrings (activation, delivery, ack, visibility, dead letters, what a handler may
  assume), with :class:`ActorContext` and :class:`Mail`, what a handler gets.
- :mod:`plait.actors.directory` — actor records and the mailbox format, shared by every
  runtime and by code that tells actors in a transaction (:func:`tell_in`).
- :mod:`plait.actors.partitions` — P mailbox partitions per mesh (a topic each), and
  which one an actor's mail goes to.
- :mod:`plait.actors.leases` — partition leases (holder, epoch, expiry) and membership.
- :mod:`plait.actors.local` — :class:`LocalRuntime`, actors as asyncio tasks in this
  process (the embedded default), reading every partition.
- :mod:`plait.actors.topics` — actors' topic subscriptions, kept in the mesh, and the
  :class:`TopicRouter` that forwards each subscribed event into a mailbox.
- :mod:`plait.actors.backlog` — markers of the messages an actor has not handled yet.
- :mod:`plait.actors.leased` — :class:`LeasedRuntime`, a local runtime reading only
  the partitions it leases (single activation; ``plait worker`` runs it).
- :mod:`plait.actors.ray` — leased runtimes hosted in restartable Ray actors
  (:class:`~plait.actors.ray.RayRuntime`), and dedicated Ray actors for actors
  that ask for ``resources``; imported on its own, Ray being an extra.

Every runtime implements the same contract and passes the same conformance suite
(``tests/actors``).

Layers above (the run owner) talk to :class:`ActorRuntime` only.
"""

from __future__ import annotations

from plait.actors._base import (
    DEAD_LETTER_HOOK,
    DEAD_LETTER_TOPIC,
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    Accepts,
    ActorContext,
    ActorKind,
    ActorRuntime,
    DeadLetterHook,
    Fence,
    Handler,
    Mail,
    ServiceParts,
    new_host_id,
    resolve_dead_letter_hook,
    resolve_kind,
)
from plait.actors.backlog import backlog, clear_backlog_in, tell_tracked, tell_tracked_in
from plait.actors.directory import (
    MAIL_KIND,
    MAILBOX_TOPIC,
    ActorId,
    ActorRecord,
    actor_key,
    mail_data,
    tell_in,
)
from plait.actors.leased import GainsPartitions, LeasedRuntime
from plait.actors.leases import DEFAULT_LEASE_S
from plait.actors.local import MAILBOX_GROUP, LocalRuntime, tune_gc_for_serving
from plait.actors.partitions import (
    DEFAULT_PARTITIONS,
    load_partitions,
    mailbox_of,
    partition_of,
    ranges,
)
from plait.actors.topics import (
    TopicRouter,
    subscribe,
    subscriptions,
    topic_event,
    unsubscribe,
)

__all__ = [
    "DEAD_LETTER_HOOK",
    "DEAD_LETTER_TOPIC",
    "DEFAULT_LEASE_S",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_PARTITIONS",
    "MAILBOX_GROUP",
    "MAILBOX_TOPIC",
    "MAILBOX_VISIBILITY_TIMEOUT_MS",
    "MAIL_KIND",
    "Accepts",
    "ActorContext",
    "ActorId",
    "ActorKind",
    "ActorRecord",
    "ActorRuntime",
    "DeadLetterHook",
    "Fence",
    "GainsPartitions",
    "Handler",
    "LeasedRuntime",
    "LocalRuntime",
    "Mail",
    "ServiceParts",
    "TopicRouter",
    "actor_key",
    "backlog",
    "clear_backlog_in",
    "load_partitions",
    "mail_data",
    "mailbox_of",
    "new_host_id",
    "partition_of",
    "ranges",
    "resolve_dead_letter_hook",
    "resolve_kind",
    "subscribe",
    "subscriptions",
    "tell_in",
    "tell_tracked",
    "tell_tracked_in",
    "topic_event",
    "tune_gc_for_serving",
    "unsubscribe",
]
