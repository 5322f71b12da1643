"""Durable actors: records in the mesh, mailboxes on a mesh topic, local runtime.

See :mod:`plait.actors._base` for the model and :mod:`plait.actors.local` for the
runtime that hosts actors in this process.
"""

from __future__ import annotations

from plait.actors._base import (
    MAILBOX_TOPIC,
    ActorContext,
    ActorId,
    ActorRecord,
    Handler,
    Mail,
    actor_key,
    new_host_id,
    resolve_kind,
    tell_in,
)
from plait.actors.local import (
    DEAD_LETTER_TOPIC,
    DEFAULT_VISIBILITY_TIMEOUT_MS,
    LocalRuntime,
    tune_gc_for_serving,
)

__all__ = [
    "DEAD_LETTER_TOPIC",
    "DEFAULT_VISIBILITY_TIMEOUT_MS",
    "MAILBOX_TOPIC",
    "ActorContext",
    "ActorId",
    "ActorRecord",
    "Handler",
    "LocalRuntime",
    "Mail",
    "actor_key",
    "new_host_id",
    "resolve_kind",
    "tell_in",
    "tune_gc_for_serving",
]
