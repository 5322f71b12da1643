"""Ids: one time-sortable scheme, and the types that say what an id names.

Every fresh id plait makes — a run, a decision, a mesh event, an attempt's nonce, a
consumer group of one — is a UUIDv7 (RFC 9562) written as 32 lowercase hex digits,
behind a short prefix where a person reads it (``grun_``, ``dec_``). Its first 48 bits
are the Unix time in milliseconds, so ids sort as strings by when they were made:
strictly within one process (the generator keeps ids of one millisecond increasing),
to the millisecond across processes. The remaining random bits make a clash between
processes negligible.

Decision ids a run raises are not fresh: they are derived from run, node and visit
(see :func:`plait.runs.mesh_ports.decision_id`), so a retried visit raises the same one.

This module is the foundation of the package beside :mod:`plait.errors`: every layer
may import it, and it imports nothing of plait.
"""

from __future__ import annotations

import hashlib
from typing import NewType

import uuid_utils

RunId = NewType("RunId", str)
"""The id of a run; a durable run's record lives at ``runs/<id>``."""

ActorId = NewType("ActorId", str)
"""The id of a durable actor (``"run:grun_0197..."``); its record is at ``actors/<id>``."""

DecisionId = NewType("DecisionId", str)
"""The id of a decision; its record lives at ``decisions/<id>``."""

RUN_ID_PREFIX = "grun_"
"""The prefix of durable run ids (``grun_0197...``)."""

SESSION_RUN_ID_PREFIX = "run_"
"""The prefix of in-session run ids, which never reach a mesh."""

DECISION_ID_PREFIX = "dec_"
"""The prefix of the ids of decisions raised outside a run."""


def new_id(prefix: str = "") -> str:
    """A fresh time-sortable id: ``prefix`` then a UUIDv7 as 32 hex digits."""
    return prefix + uuid_utils.uuid7().hex


def new_run_id(prefix: str = RUN_ID_PREFIX) -> RunId:
    """A fresh run id (``grun_`` and 32 hex digits unless ``prefix`` says otherwise)."""
    return RunId(new_id(prefix))


def new_decision_id() -> DecisionId:
    """A fresh id for a decision raised outside a run: ``dec_`` and 32 hex digits."""
    return DecisionId(new_id(DECISION_ID_PREFIX))


def derived_id(prefix: str, *parts: str) -> str:
    """An id derived from ``parts``: ``prefix`` then 32 hex digits of their hash.

    For what a retried step must name the same way each time (the run a turn of an
    agent actor starts); the parts are joined unambiguously, so distinct parts never
    give one id. Not time-sortable, unlike :func:`new_id`.
    """
    joined = "\x00".join(f"{len(p)}:{p}" for p in parts)
    return prefix + hashlib.blake2b(joined.encode(), digest_size=16).hexdigest()


__all__ = [
    "DECISION_ID_PREFIX",
    "RUN_ID_PREFIX",
    "SESSION_RUN_ID_PREFIX",
    "ActorId",
    "DecisionId",
    "RunId",
    "derived_id",
    "new_decision_id",
    "new_id",
    "new_run_id",
]
