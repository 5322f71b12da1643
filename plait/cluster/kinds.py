"""The actor kinds a plait serving process runs, as one table handed to ``serve()``.

``plait worker``, a foreground ``plait graph run``, ``plait serve`` and every Ray host
pass :data:`SERVING_KINDS` to :func:`plait.runs.serve` as ``kinds``: run owners, agent
actors and schedules, each with its dead-letter hook. A runtime looks a record's kind
up here first; nothing is found through a process-global cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from plait.actors import ActorKind, Handler
from plait.agents import AGENT_KIND
from plait.agents.actor import KIND as AGENT_ACTOR
from plait.runs import OWNER_KIND
from plait.runs.owner import handle as owner_handle
from plait.runs.owner import on_dead_letter as owner_dead_letter
from plait.schedules import SCHEDULE_KIND
from plait.schedules.actor import handle as schedule_handle

SERVING_KINDS: Mapping[str, Handler] = MappingProxyType(
    {
        OWNER_KIND: ActorKind(owner_handle, owner_dead_letter),
        AGENT_KIND: AGENT_ACTOR,
        SCHEDULE_KIND: ActorKind(schedule_handle),
    }
)
"""Run owners, agent actors and schedules, by kind."""

__all__ = ["SERVING_KINDS"]
